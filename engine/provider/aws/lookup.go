package aws

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Lookups by tag. The tag filter is sent for real AWS; the result is also
// filtered here because not every EC2 implementation applies filters (kumo
// ignores most of them).

func clusterFilter(name string) []ec2types.Filter {
	return []ec2types.Filter{{Name: aws.String("tag:" + TagCluster), Values: []string{name}}}
}

func hasTag(tags []ec2types.Tag, key, value string) bool {
	for _, t := range tags {
		if aws.ToString(t.Key) == key && aws.ToString(t.Value) == value {
			return true
		}
	}
	return false
}

func tagValue(tags []ec2types.Tag, key string) string {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}

// ec2Tags are the tags of one kiln EC2 resource; role tells resources of
// one kind apart (subnet-1, subnet-2).
func ec2Tags(name, role string, extra ...ec2types.Tag) []ec2types.Tag {
	tags := []ec2types.Tag{
		{Key: aws.String(TagCluster), Value: aws.String(name)},
		{Key: aws.String(TagManagedBy), Value: aws.String("kiln")},
		{Key: aws.String(TagRole), Value: aws.String(role)},
		{Key: aws.String("Name"), Value: aws.String(resourceName(name, role))},
	}
	return append(tags, extra...)
}

func tagSpec(rt ec2types.ResourceType, tags []ec2types.Tag) []ec2types.TagSpecification {
	return []ec2types.TagSpecification{{ResourceType: rt, Tags: tags}}
}

func findVPCs(ctx context.Context, c *ec2.Client, name string) ([]ec2types.Vpc, error) {
	var out []ec2types.Vpc
	pg := ec2.NewDescribeVpcsPaginator(c, &ec2.DescribeVpcsInput{Filters: clusterFilter(name)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe VPCs: %w", err)
		}
		for _, v := range page.Vpcs {
			if hasTag(v.Tags, TagCluster, name) {
				out = append(out, v)
			}
		}
	}
	return out, nil
}

func findSubnets(ctx context.Context, c *ec2.Client, name string) ([]ec2types.Subnet, error) {
	var out []ec2types.Subnet
	pg := ec2.NewDescribeSubnetsPaginator(c, &ec2.DescribeSubnetsInput{Filters: clusterFilter(name)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe subnets: %w", err)
		}
		for _, s := range page.Subnets {
			if hasTag(s.Tags, TagCluster, name) {
				out = append(out, s)
			}
		}
	}
	return out, nil
}

func findIGWs(ctx context.Context, c *ec2.Client, name string) ([]ec2types.InternetGateway, error) {
	var out []ec2types.InternetGateway
	pg := ec2.NewDescribeInternetGatewaysPaginator(c, &ec2.DescribeInternetGatewaysInput{Filters: clusterFilter(name)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe internet gateways: %w", err)
		}
		for _, g := range page.InternetGateways {
			if hasTag(g.Tags, TagCluster, name) {
				out = append(out, g)
			}
		}
	}
	return out, nil
}

func findRouteTables(ctx context.Context, c *ec2.Client, name string) ([]ec2types.RouteTable, error) {
	var out []ec2types.RouteTable
	pg := ec2.NewDescribeRouteTablesPaginator(c, &ec2.DescribeRouteTablesInput{Filters: clusterFilter(name)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe route tables: %w", err)
		}
		for _, r := range page.RouteTables {
			if hasTag(r.Tags, TagCluster, name) {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

func findSecurityGroups(ctx context.Context, c *ec2.Client, name string) ([]ec2types.SecurityGroup, error) {
	var out []ec2types.SecurityGroup
	pg := ec2.NewDescribeSecurityGroupsPaginator(c, &ec2.DescribeSecurityGroupsInput{Filters: clusterFilter(name)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe security groups: %w", err)
		}
		for _, g := range page.SecurityGroups {
			if hasTag(g.Tags, TagCluster, name) {
				out = append(out, g)
			}
		}
	}
	return out, nil
}

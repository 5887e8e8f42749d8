package awsemu

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// Network interfaces and group references through the real SDK, with the
// refusals of the EC2 API reference: DeleteNetworkInterface of an attached
// interface (InvalidNetworkInterface.InUse, API_DeleteNetworkInterface),
// DependencyViolation from DeleteSecurityGroup (used by an interface,
// referenced by another group), DeleteSubnet (an interface in it) and
// DeleteVpc (interfaces, groups but "default"; API_DeleteVpc), and
// RevokeSecurityGroupIngress by rule ID (API_RevokeSecurityGroupIngress).
func TestNetworkInterfacesAndGroupReferences(t *testing.T) {
	e := start(t, Options{})
	ctx := t.Context()
	c := ec2.NewFromConfig(cfg(t, e, regionA))
	vpc, err := c.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.0.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	vpcID := vpc.Vpc.VpcId
	sub, err := c.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpcID, CidrBlock: aws.String("10.0.0.0/24")})
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("a"), Description: aws.String("a"), VpcId: vpcID})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("b"), Description: aws.String("b"), VpcId: vpcID})
	if err != nil {
		t.Fatal(err)
	}
	perm := []ec2types.IpPermission{{IpProtocol: aws.String("-1"), UserIdGroupPairs: []ec2types.UserIdGroupPair{{GroupId: b.GroupId}}}}
	if _, err := c.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: a.GroupId, IpPermissions: perm}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: a.GroupId, IpPermissions: perm}); apiErrorCode(err) != "InvalidPermission.Duplicate" {
		t.Errorf("second identical rule: want InvalidPermission.Duplicate, got %v", err)
	}
	n, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: sub.Subnet.SubnetId, Groups: []string{*a.GroupId}, Description: aws.String("x")})
	if err != nil {
		t.Fatal(err)
	}
	id := n.NetworkInterface.NetworkInterfaceId
	if aws.ToString(n.NetworkInterface.VpcId) != *vpcID || n.NetworkInterface.Status != ec2types.NetworkInterfaceStatusAvailable {
		t.Errorf("new interface: %+v", n.NetworkInterface)
	}
	if err := e.AttachNetworkInterface(regionA, *id, "i-0abc"); err != nil {
		t.Fatal(err)
	}
	got, err := c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []ec2types.Filter{{Name: aws.String("vpc-id"), Values: []string{*vpcID}}}})
	if err != nil || len(got.NetworkInterfaces) != 1 || got.NetworkInterfaces[0].Status != ec2types.NetworkInterfaceStatusInUse ||
		aws.ToString(got.NetworkInterfaces[0].Attachment.InstanceId) != "i-0abc" {
		t.Fatalf("describe: %v %+v", err, got)
	}
	for what, err := range map[string]error{
		"DeleteNetworkInterface attached": func() error {
			_, err := c.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: id})
			return err
		}(),
	} {
		if apiErrorCode(err) != "InvalidNetworkInterface.InUse" {
			t.Errorf("%s: want InvalidNetworkInterface.InUse, got %v", what, err)
		}
	}
	violations := func(when string) {
		t.Helper()
		for what, err := range map[string]error{
			"DeleteSecurityGroup b (referenced by a)": func() error {
				_, err := c.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: b.GroupId})
				return err
			}(),
			"DeleteSecurityGroup a (used by an interface)": func() error {
				_, err := c.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: a.GroupId})
				return err
			}(),
			"DeleteSubnet (an interface in it)": func() error {
				_, err := c.DeleteSubnet(ctx, &ec2.DeleteSubnetInput{SubnetId: sub.Subnet.SubnetId})
				return err
			}(),
			"DeleteVpc": func() error {
				_, err := c.DeleteVpc(ctx, &ec2.DeleteVpcInput{VpcId: vpcID})
				return err
			}(),
		} {
			if apiErrorCode(err) != "DependencyViolation" {
				t.Errorf("%s %s: want DependencyViolation, got %v", when, what, err)
			}
		}
	}
	violations("attached:")
	if err := e.DetachNetworkInterface(regionA, *id); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: id}); err != nil {
		t.Fatal(err)
	}
	rules, err := c.DescribeSecurityGroupRules(ctx, &ec2.DescribeSecurityGroupRulesInput{Filters: []ec2types.Filter{{Name: aws.String("group-id"), Values: []string{*a.GroupId}}}})
	if err != nil || len(rules.SecurityGroupRules) != 1 || aws.ToString(rules.SecurityGroupRules[0].ReferencedGroupInfo.GroupId) != *b.GroupId {
		t.Fatalf("rules of a: %v %+v", err, rules)
	}
	refs, err := c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("ip-permission.group-id"), Values: []string{*b.GroupId}}}})
	if err != nil || len(refs.SecurityGroups) != 1 || aws.ToString(refs.SecurityGroups[0].GroupId) != *a.GroupId {
		t.Errorf("groups referencing b: %v %+v", err, refs)
	}
	if _, err := c.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: b.GroupId}); apiErrorCode(err) != "DependencyViolation" {
		t.Errorf("b still referenced: want DependencyViolation, got %v", err)
	}
	if _, err := c.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: a.GroupId, SecurityGroupRuleIds: []string{*rules.SecurityGroupRules[0].SecurityGroupRuleId}}); err != nil {
		t.Fatal(err)
	}
	for _, g := range []*string{b.GroupId, a.GroupId} {
		if _, err := c.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: g}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.DeleteSubnet(ctx, &ec2.DeleteSubnetInput{SubnetId: sub.Subnet.SubnetId}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteVpc(ctx, &ec2.DeleteVpcInput{VpcId: vpcID}); err != nil {
		t.Fatal(err)
	}
}

// Fargate profiles (kumo has none): EKS refuses DeleteCluster while one
// is attached (ResourceInUseException, API_DeleteCluster) and a second
// deletion while one is DELETING (API_DeleteFargateProfile).
func TestFargateProfilesEmulated(t *testing.T) {
	e := start(t, Options{})
	ctx := t.Context()
	c := eks.NewFromConfig(cfg(t, e, regionA))
	const name = "fg"
	if _, err := c.CreateCluster(ctx, &eks.CreateClusterInput{
		Name: aws.String(name), RoleArn: aws.String("arn:aws:iam::123456789012:role/r"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: []string{"subnet-1"}},
	}); err != nil {
		t.Fatal(err)
	}
	for _, fp := range []string{"one", "two"} {
		if _, err := c.CreateFargateProfile(ctx, &eks.CreateFargateProfileInput{
			ClusterName: aws.String(name), FargateProfileName: aws.String(fp), PodExecutionRoleArn: aws.String("arn:aws:iam::123456789012:role/p"),
			Selectors: []ekstypes.FargateProfileSelector{{Namespace: aws.String(fp)}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := c.ListFargateProfiles(ctx, &eks.ListFargateProfilesInput{ClusterName: aws.String(name)})
	if err != nil || len(l.FargateProfileNames) != 2 {
		t.Fatalf("list: %v %+v", err, l)
	}
	if _, err := c.DeleteCluster(ctx, &eks.DeleteClusterInput{Name: aws.String(name)}); apiErrorCode(err) != errResourceInUse {
		t.Errorf("DeleteCluster with Fargate profiles: want ResourceInUseException, got %v", err)
	}
	d, err := c.DeleteFargateProfile(ctx, &eks.DeleteFargateProfileInput{ClusterName: aws.String(name), FargateProfileName: aws.String("one")})
	if err != nil || d.FargateProfile.Status != ekstypes.FargateProfileStatusDeleting {
		t.Fatalf("delete one: %v %+v", err, d)
	}
	if _, err := c.DeleteFargateProfile(ctx, &eks.DeleteFargateProfileInput{ClusterName: aws.String(name), FargateProfileName: aws.String("two")}); apiErrorCode(err) != errResourceInUse {
		t.Errorf("second deletion while one is DELETING: want ResourceInUseException, got %v", err)
	}
	time.Sleep(fargateDeleting + 200*time.Millisecond)
	if _, err := c.DeleteFargateProfile(ctx, &eks.DeleteFargateProfileInput{ClusterName: aws.String(name), FargateProfileName: aws.String("two")}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(fargateDeleting + 200*time.Millisecond)
	if _, err := c.DescribeFargateProfile(ctx, &eks.DescribeFargateProfileInput{ClusterName: aws.String(name), FargateProfileName: aws.String("two")}); apiErrorCode(err) != "ResourceNotFoundException" {
		t.Errorf("deleted profile: want ResourceNotFoundException, got %v", err)
	}
	if _, err := c.DeleteCluster(ctx, &eks.DeleteClusterInput{Name: aws.String(name)}); err != nil {
		t.Errorf("DeleteCluster without profiles: %v", err)
	}
}

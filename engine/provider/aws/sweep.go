// The VPC sweep of destroy: after the EKS cluster and its node groups are
// gone and before the subnets, kiln's VPC is swept by its ID — network
// interfaces left `available` (by the VPC CNI, load balancers, EKS) are
// deleted, and every security group in the VPC but "default" (kiln's or
// not: nothing outside kiln's VPC can use a group inside it once the VPC
// goes; eksctl does the same) has the rules of the other groups that
// reference it revoked and is deleted. What kiln will not delete — an
// interface in use by an instance kiln did not create, a group referenced
// from outside the VPC — fails the run within Limits.Dependency, naming it.

package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/kilnctl/kiln/engine"
)

// KindNetworkInterface is the kind of the resource events of the sweep's
// network interfaces.
const KindNetworkInterface = "NetworkInterface"

// Limits.Dependency bounds how long a DependencyViolation (or an interface
// in use) may persist before destroy fails naming what blocks: AWS answers
// DependencyViolation while something still uses the resource, and what
// kiln does not delete will not go by waiting.
//
// Limits.Release bounds the wait for interfaces AWS itself removes once
// their owner is gone (EKS's control-plane interfaces after DeleteCluster,
// a load balancer's after its deletion): requester-managed, or described
// "Amazon EKS …" / "ELB …".

// releasedByAWS reports an interface AWS deletes by itself once its owner
// (an EKS cluster, a load balancer) is deleted.
func releasedByAWS(n ec2types.NetworkInterface) bool {
	d := aws.ToString(n.Description)
	return aws.ToBool(n.RequesterManaged) || strings.HasPrefix(d, "Amazon EKS ") || strings.HasPrefix(d, "ELB ")
}

// describeENI names an interface the way a user finds it in the console.
func describeENI(n ec2types.NetworkInterface) string {
	s := fmt.Sprintf("network interface %s (%s", aws.ToString(n.NetworkInterfaceId), n.Status)
	if d := aws.ToString(n.Description); d != "" {
		s += fmt.Sprintf(", %q", d)
	}
	if a := n.Attachment; a != nil {
		switch {
		case aws.ToString(a.InstanceId) != "":
			s += ", attached to instance " + aws.ToString(a.InstanceId)
		case aws.ToString(a.InstanceOwnerId) != "":
			s += ", attached by " + aws.ToString(a.InstanceOwnerId)
		}
	}
	return s + ")"
}

func (in *infra) enis(ctx context.Context, filter string, values ...string) ([]ec2types.NetworkInterface, error) {
	var out []ec2types.NetworkInterface
	pg := ec2.NewDescribeNetworkInterfacesPaginator(in.ec2, &ec2.DescribeNetworkInterfacesInput{
		Filters: []ec2types.Filter{{Name: aws.String(filter), Values: values}},
	})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe network interfaces (%s=%s): %w", filter, strings.Join(values, ","), err)
		}
		out = append(out, page.NetworkInterfaces...)
	}
	return out, nil
}

// deleteNetworkInterfaces deletes the available interfaces of kiln's VPCs
// (DeleteNetworkInterface: "You must detach the network interface before
// you can delete it" —
// https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DeleteNetworkInterface.html),
// waits a bounded time for the ones in use to be released, and fails
// naming those that stay.
func (in *infra) deleteNetworkInterfaces(ctx context.Context) error {
	vpcs, err := findVPCs(ctx, in.ec2, in.name)
	if err != nil {
		return in.fail(KindNetworkInterface, resourceName(in.name, "vpc"), err)
	}
	for _, v := range vpcs {
		if err := in.sweepENIs(ctx, aws.ToString(v.VpcId)); err != nil {
			return err
		}
	}
	return nil
}

func (in *infra) sweepENIs(ctx context.Context, vpc string) error {
	start := time.Now()
	var busy []ec2types.NetworkInterface
	swept := false
	limits := in.p.limits()
	err := poll(ctx, limits.Release, func(ctx context.Context) (bool, error) {
		all, err := in.enis(ctx, "vpc-id", vpc)
		if err != nil {
			return false, err
		}
		busy = busy[:0]
		for _, n := range all {
			if aws.ToString(n.VpcId) != vpc && n.VpcId != nil {
				continue
			}
			id := aws.ToString(n.NetworkInterfaceId)
			if n.Status != ec2types.NetworkInterfaceStatusAvailable {
				busy = append(busy, n)
				continue
			}
			swept = true
			in.emit(KindNetworkInterface, id, engine.StatusTerminating, "deleting: left %s in VPC %s", strings.TrimPrefix(describeENI(n), "network interface "+id+" "), vpc)
			_, err := in.ec2.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(id)})
			switch {
			case err == nil, apiCode(err) == "InvalidNetworkInterfaceID.NotFound":
				in.emit(KindNetworkInterface, id, engine.StatusNotFound, "deleted")
			case apiCode(err) == "InvalidNetworkInterface.InUse":
				busy = append(busy, n) // attached since it was listed
			default:
				return false, fmt.Errorf("delete network interface %s: %w", id, err)
			}
		}
		if len(busy) == 0 {
			return true, nil
		}
		// Interfaces AWS releases by itself get Limits.Release; anything
		// else will not go by waiting: Limits.Dependency, then say so.
		if !slices.ContainsFunc(busy, releasedByAWS) && time.Since(start) >= limits.Dependency {
			return false, errPollLimit
		}
		for _, n := range busy {
			in.emit(KindNetworkInterface, aws.ToString(n.NetworkInterfaceId), engine.StatusTerminating, "waiting: %s is in use in VPC %s", describeENI(n), vpc)
		}
		return false, nil
	})
	if len(busy) > 0 && timedOut(ctx, err) {
		var names []string
		for _, n := range busy {
			names = append(names, describeENI(n))
		}
		err = fmt.Errorf("VPC %s still has %s after %s; kiln does not detach or delete network interfaces in use: delete what uses them (or detach them), then run `%s` again",
			vpc, strings.Join(names, "; "), time.Since(start).Round(time.Second), in.p.command("destroy", in.name, in.region))
		return in.fail(KindNetworkInterface, aws.ToString(busy[0].NetworkInterfaceId), err)
	}
	if err != nil {
		return in.fail(KindNetworkInterface, vpc, err)
	}
	if !swept {
		in.emit(KindNetworkInterface, vpc, engine.StatusNotFound, "none left in VPC %s", vpc)
	}
	return nil
}

// vpcSecurityGroups are the groups destroy deletes: every group in kiln's
// VPCs but "default" (which goes with its VPC), and every kiln-tagged
// group wherever it is.
func (in *infra) vpcSecurityGroups(ctx context.Context) ([]ec2types.SecurityGroup, error) {
	tagged, err := findSecurityGroups(ctx, in.ec2, in.name)
	if err != nil {
		return nil, err
	}
	vpcs, err := findVPCs(ctx, in.ec2, in.name)
	if err != nil {
		return nil, err
	}
	out := tagged
	for _, v := range vpcs {
		id := aws.ToString(v.VpcId)
		pg := ec2.NewDescribeSecurityGroupsPaginator(in.ec2, &ec2.DescribeSecurityGroupsInput{
			Filters: []ec2types.Filter{{Name: aws.String("vpc-id"), Values: []string{id}}},
		})
		for pg.HasMorePages() {
			page, err := pg.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("describe security groups of VPC %s: %w", id, err)
			}
			for _, g := range page.SecurityGroups {
				if aws.ToString(g.VpcId) != id || aws.ToString(g.GroupName) == "default" ||
					slices.ContainsFunc(out, func(x ec2types.SecurityGroup) bool { return aws.ToString(x.GroupId) == aws.ToString(g.GroupId) }) {
					continue
				}
				out = append(out, g)
			}
		}
	}
	return out, nil
}

// revokeCrossReferences revokes the rules of groups in sgs that reference
// another group in sgs (a group's rule naming itself does not block its
// deletion): DeleteSecurityGroup fails with DependencyViolation while
// "another security group" references the group
// (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DeleteSecurityGroup.html);
// rules are revoked by ID (RevokeSecurityGroupIngress/Egress
// SecurityGroupRuleId.N —
// https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_RevokeSecurityGroupIngress.html).
func (in *infra) revokeCrossReferences(ctx context.Context, sgs []ec2types.SecurityGroup) error {
	if len(sgs) == 0 {
		return nil
	}
	ids := make([]string, 0, len(sgs))
	for _, g := range sgs {
		ids = append(ids, aws.ToString(g.GroupId))
	}
	pg := ec2.NewDescribeSecurityGroupRulesPaginator(in.ec2, &ec2.DescribeSecurityGroupRulesInput{
		Filters: []ec2types.Filter{{Name: aws.String("group-id"), Values: ids}},
	})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("describe security group rules of %s: %w", strings.Join(ids, ","), err)
		}
		for _, r := range page.SecurityGroupRules {
			group, rule := aws.ToString(r.GroupId), aws.ToString(r.SecurityGroupRuleId)
			if r.ReferencedGroupInfo == nil || !slices.Contains(ids, group) {
				continue
			}
			ref := aws.ToString(r.ReferencedGroupInfo.GroupId)
			if ref == group || !slices.Contains(ids, ref) {
				continue
			}
			in.emit(KindSecurityGroup, group, engine.StatusTerminating, "revoking rule %s, which references %s", rule, ref)
			if aws.ToBool(r.IsEgress) {
				_, err = in.ec2.RevokeSecurityGroupEgress(ctx, &ec2.RevokeSecurityGroupEgressInput{GroupId: aws.String(group), SecurityGroupRuleIds: []string{rule}})
			} else {
				_, err = in.ec2.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: aws.String(group), SecurityGroupRuleIds: []string{rule}})
			}
			if err != nil && !strings.HasSuffix(apiCode(err), ".NotFound") {
				return fmt.Errorf("revoke rule %s of security group %s (references %s): %w", rule, group, ref, err)
			}
		}
	}
	return nil
}

// sgBlockers names what keeps security group id: interfaces that use it
// and groups whose rules reference it.
func (in *infra) sgBlockers(ctx context.Context, id string) string {
	var names []string
	if enis, err := in.enis(ctx, "group-id", id); err == nil {
		for _, n := range enis {
			if slices.ContainsFunc(n.Groups, func(g ec2types.GroupIdentifier) bool { return aws.ToString(g.GroupId) == id }) {
				names = append(names, describeENI(n)+" uses it")
			}
		}
	}
	for _, f := range []string{"ip-permission.group-id", "egress.ip-permission.group-id"} {
		out, err := in.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{{Name: aws.String(f), Values: []string{id}}}})
		if err != nil {
			continue
		}
		for _, g := range out.SecurityGroups {
			if aws.ToString(g.GroupId) != id {
				names = append(names, fmt.Sprintf("security group %s (%s) in %s has a rule referencing it", aws.ToString(g.GroupId), aws.ToString(g.GroupName), aws.ToString(g.VpcId)))
			}
		}
	}
	return strings.Join(names, "; ")
}

// subnetBlockers names the interfaces in subnet id.
func (in *infra) subnetBlockers(ctx context.Context, id string) string {
	var names []string
	if enis, err := in.enis(ctx, "subnet-id", id); err == nil {
		for _, n := range enis {
			if aws.ToString(n.SubnetId) == id {
				names = append(names, describeENI(n))
			}
		}
	}
	return strings.Join(names, "; ")
}

// vpcBlockers names what is left in VPC id: interfaces, security groups
// but "default", subnets and attached internet gateways.
func (in *infra) vpcBlockers(ctx context.Context, id string) string {
	var names []string
	if enis, err := in.enis(ctx, "vpc-id", id); err == nil {
		for _, n := range enis {
			if aws.ToString(n.VpcId) == id {
				names = append(names, describeENI(n))
			}
		}
	}
	vpc := []ec2types.Filter{{Name: aws.String("vpc-id"), Values: []string{id}}}
	if out, err := in.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: vpc}); err == nil {
		for _, g := range out.SecurityGroups {
			if aws.ToString(g.VpcId) == id && aws.ToString(g.GroupName) != "default" {
				names = append(names, fmt.Sprintf("security group %s (%s)", aws.ToString(g.GroupId), aws.ToString(g.GroupName)))
			}
		}
	}
	if out, err := in.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: vpc}); err == nil {
		for _, s := range out.Subnets {
			if aws.ToString(s.VpcId) == id {
				names = append(names, fmt.Sprintf("subnet %s (%s)", aws.ToString(s.SubnetId), aws.ToString(s.CidrBlock)))
			}
		}
	}
	if out, err := in.ec2.DescribeInternetGateways(ctx, &ec2.DescribeInternetGatewaysInput{
		Filters: []ec2types.Filter{{Name: aws.String("attachment.vpc-id"), Values: []string{id}}},
	}); err == nil {
		for _, g := range out.InternetGateways {
			if slices.ContainsFunc(g.Attachments, func(a ec2types.InternetGatewayAttachment) bool { return aws.ToString(a.VpcId) == id }) {
				names = append(names, "internet gateway "+aws.ToString(g.InternetGatewayId))
			}
		}
	}
	return strings.Join(names, "; ")
}

// errorMessage is an API error's message (its code and message when it is
// one), else err's text.
func errorMessage(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorMessage()
	}
	return err.Error()
}

// timedOut reports that poll gave up at its own limit (the limit may also
// end a request in flight) while ctx itself goes on.
func timedOut(ctx context.Context, err error) bool {
	return ctx.Err() == nil && (errors.Is(err, errPollLimit) || errors.Is(err, context.DeadlineExceeded))
}

// Over 400 lines on purpose: the inventory of NAME's tagged AWS resources
// and their deletion in reverse dependency order, each verified, are one
// ordered procedure mirroring infra.go.

package aws

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/kilnctl/kiln/engine"
)

// deleteLimit bounds the wait for one deletion to be confirmed (EKS takes
// minutes; EC2 resources report DependencyViolation while EKS's network
// interfaces are still being released).
const deleteLimit = 20 * time.Minute

// Inventory is every kiln resource of one cluster in one region (IAM roles
// are global), by kind, found by tag: what destroy must remove and what
// tests count.
type Inventory map[string][]string

// Empty reports whether nothing is left, ignoring kinds listed in except.
func (inv Inventory) Empty(except ...string) bool {
	for k, ids := range inv {
		if len(ids) > 0 && !slices.Contains(except, k) {
			return false
		}
	}
	return true
}

func (inv Inventory) String() string {
	var parts []string
	for k, ids := range inv {
		if len(ids) > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", k, strings.Join(ids, ",")))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// Inventory lists the resources tagged kiln.dev/cluster=name in region.
func (p *Provider) Inventory(ctx context.Context, name, region string) (Inventory, error) {
	in, err := p.newInfra(ctx, name, region, nil)
	if err != nil {
		return nil, err
	}
	return in.inventory(ctx)
}

func (in *infra) inventory(ctx context.Context) (Inventory, error) {
	inv := Inventory{}
	vpcs, err := findVPCs(ctx, in.ec2, in.name)
	if err != nil {
		return nil, err
	}
	for _, v := range vpcs {
		inv[KindVPC] = append(inv[KindVPC], aws.ToString(v.VpcId))
	}
	subnets, err := findSubnets(ctx, in.ec2, in.name)
	if err != nil {
		return nil, err
	}
	for _, s := range subnets {
		inv[KindSubnet] = append(inv[KindSubnet], aws.ToString(s.SubnetId))
	}
	gws, err := findIGWs(ctx, in.ec2, in.name)
	if err != nil {
		return nil, err
	}
	for _, g := range gws {
		inv[KindInternetGateway] = append(inv[KindInternetGateway], aws.ToString(g.InternetGatewayId))
	}
	rts, err := findRouteTables(ctx, in.ec2, in.name)
	if err != nil {
		return nil, err
	}
	for _, r := range rts {
		inv[KindRouteTable] = append(inv[KindRouteTable], aws.ToString(r.RouteTableId))
	}
	sgs, err := findSecurityGroups(ctx, in.ec2, in.name)
	if err != nil {
		return nil, err
	}
	for _, g := range sgs {
		inv[KindSecurityGroup] = append(inv[KindSecurityGroup], aws.ToString(g.GroupId))
	}
	for _, r := range roles {
		n := resourceName(in.name, r.part)
		got, err := in.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(n)})
		switch {
		case err == nil && iamTagged(got.Role.Tags, in.name):
			inv[KindIAMRole] = append(inv[KindIAMRole], n)
		case err != nil && apiCode(err) != "NoSuchEntity":
			return nil, fmt.Errorf("get IAM role %s: %w", n, err)
		}
	}
	out, err := in.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(in.name)})
	switch {
	case err == nil && out.Cluster.Tags[TagCluster] == in.name:
		inv[KindEKSCluster] = append(inv[KindEKSCluster], in.name)
		ngs, err := in.nodegroups(ctx)
		if err != nil {
			return nil, err
		}
		inv[KindNodegroup] = ngs
	case err != nil && apiCode(err) != "ResourceNotFoundException":
		return nil, fmt.Errorf("describe EKS cluster %s: %w", in.name, err)
	}
	return inv, nil
}

// nodegroups lists the kiln-tagged node groups of the EKS cluster.
func (in *infra) nodegroups(ctx context.Context) ([]string, error) {
	var out []string
	pg := eks.NewListNodegroupsPaginator(in.eks, &eks.ListNodegroupsInput{ClusterName: aws.String(in.name)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			if apiCode(err) == "ResourceNotFoundException" {
				return nil, nil
			}
			return nil, fmt.Errorf("list node groups of %s: %w", in.name, err)
		}
		for _, n := range page.Nodegroups {
			d, err := in.eks.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(in.name), NodegroupName: aws.String(n)})
			if err != nil {
				if apiCode(err) == "ResourceNotFoundException" {
					continue
				}
				return nil, fmt.Errorf("describe node group %s: %w", n, err)
			}
			if d.Nodegroup.Tags[TagCluster] == in.name {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// foreignNodegroups lists the node groups of the cluster that kiln did
// not create (not tagged kiln.dev/cluster=NAME).
func (in *infra) foreignNodegroups(ctx context.Context) ([]string, error) {
	ours, err := in.nodegroups(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	pg := eks.NewListNodegroupsPaginator(in.eks, &eks.ListNodegroupsInput{ClusterName: aws.String(in.name)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if apiCode(err) == "ResourceNotFoundException" {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list node groups of %s: %w", in.name, err)
		}
		for _, n := range page.Nodegroups {
			if !slices.Contains(ours, n) {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// unsupportedCode reports an API error meaning "this endpoint does not
// implement the action" — only tolerated against a non-AWS endpoint.
func (in *infra) unsupported(err error) bool {
	switch apiCode(err) {
	case "InvalidAction", "UnknownError", "UnknownOperation", "UnknownOperationException", "NotImplemented":
		return customEndpoint(in.cfg)
	}
	return false
}

// DestroyInfrastructure implements engine.Provider: it removes, in reverse
// order of creation, every resource tagged kiln.dev/cluster=NAME — found by
// tag, so leftovers of a partial create or an earlier destroy are removed
// even when the EKS cluster is already gone — confirms each deletion, and
// finally verifies that nothing tagged remains.
//
// An endpoint that is not AWS may lack DeleteRouteTable (kumo); the route
// table is then reported as left behind by the emulator, not as an error.
func (p *Provider) DestroyInfrastructure(ctx context.Context, name, region string, sink engine.Sink) (bool, error) {
	in, err := p.newInfra(ctx, name, region, sink)
	if err != nil {
		return false, err
	}
	c, ctx, err := in.acquireClaim(ctx, "destroy")
	if err != nil {
		return false, err
	}
	defer c.release(ctx)
	unsupported := map[string]bool{}
	steps := []struct {
		kind string
		run  func(context.Context) error
	}{
		{KindNodegroup, in.deleteNodegroups},
		{KindEKSCluster, in.deleteCluster},
		{KindIAMRole, in.deleteRoles},
		{KindSecurityGroup, in.deleteSecurityGroups},
		{KindSubnet, in.deleteSubnets},
		{KindRouteTable, func(ctx context.Context) error {
			left, err := in.deleteRouteTables(ctx)
			unsupported[KindRouteTable] = left
			return err
		}},
		{KindInternetGateway, in.deleteIGWs},
		{KindVPC, in.deleteVPCs},
	}
	for _, s := range steps {
		engine.Checkpoint(ctx, "before-aws-delete-"+strings.ToLower(s.kind))
		if err := s.run(ctx); err != nil {
			return false, err
		}
	}
	inv, err := in.inventory(ctx)
	if err != nil {
		return false, fmt.Errorf("verify destroy: %w", err)
	}
	var except []string
	for k, v := range unsupported {
		if v {
			except = append(except, k)
		}
	}
	if !inv.Empty(except...) {
		return false, fmt.Errorf("destroy of %s in %s left resources tagged %s=%s: %s; run `%s` again", name, region, TagCluster, name, inv, command("destroy", name, region))
	}
	if p.KubeconfigFile != "" {
		removed, warnings, err := RemoveKubeconfig(ctx, p.KubeconfigFile, name)
		for _, w := range warnings {
			logf(sink, engine.LevelWarn, "kubeconfig %s: %s", p.KubeconfigFile, w)
		}
		if err != nil {
			return false, fmt.Errorf("remove context %s: %w", ContextName(name), err)
		}
		if removed {
			logf(sink, engine.LevelInfo, "kubeconfig %s: removed context, cluster and user %s", p.KubeconfigFile, ContextName(name))
		}
	}
	return false, nil
}

func (in *infra) deleteNodegroups(ctx context.Context) error {
	ngs, err := in.nodegroups(ctx)
	if err != nil {
		return in.fail(KindNodegroup, nodegroupName, err)
	}
	if len(ngs) == 0 {
		in.emit(KindNodegroup, nodegroupName, engine.StatusNotFound, "none")
	}
	for _, n := range ngs {
		in.emit(KindNodegroup, n, engine.StatusTerminating, "deleting")
		if err := in.deleteNodegroup(ctx, n); err != nil {
			return err
		}
	}
	// EKS deletes no cluster that still has node groups. Those kiln did
	// not create belong to the cluster kiln did, and cannot outlive it:
	// they go too, each named (eksctl's delete cluster does the same).
	foreign, err := in.foreignNodegroups(ctx)
	if err != nil {
		return in.fail(KindNodegroup, nodegroupName, err)
	}
	for _, n := range foreign {
		in.emit(KindNodegroup, n, engine.StatusTerminating, "deleting: not created by kiln (not tagged %s=%s), but a node group of the EKS cluster kiln created, which EKS does not delete while it has one", TagCluster, in.name)
		if err := in.deleteNodegroup(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// deleteNodegroup deletes node group n and waits until EKS no longer knows
// it, so destroy and upgrade's replacement both leave nothing behind. Already
// gone or already deleting is not an error.
func (in *infra) deleteNodegroup(ctx context.Context, n string) error {
	_, err := in.eks.DeleteNodegroup(ctx, &eks.DeleteNodegroupInput{ClusterName: aws.String(in.name), NodegroupName: aws.String(n)})
	if err != nil && apiCode(err) != "ResourceNotFoundException" && apiCode(err) != "ResourceInUseException" {
		return in.fail(KindNodegroup, n, fmt.Errorf("delete node group %s: %w", n, err))
	}
	err = poll(ctx, deleteLimit, func(ctx context.Context) (bool, error) {
		_, err := in.eks.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(in.name), NodegroupName: aws.String(n)})
		if apiCode(err) == "ResourceNotFoundException" {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		return in.fail(KindNodegroup, n, fmt.Errorf("confirm node group %s deleted: %w", n, err))
	}
	in.emit(KindNodegroup, n, engine.StatusNotFound, "deleted")
	return nil
}

func (in *infra) deleteCluster(ctx context.Context) error {
	n := in.name
	out, err := in.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(n)})
	switch {
	case apiCode(err) == "ResourceNotFoundException":
		in.emit(KindEKSCluster, n, engine.StatusNotFound, "none")
		return nil
	case err != nil:
		return in.fail(KindEKSCluster, n, fmt.Errorf("describe EKS cluster %s: %w", n, err))
	case out.Cluster.Tags[TagCluster] != in.name:
		in.emit(KindEKSCluster, n, engine.StatusCurrent, "not tagged %s=%s: kiln did not create it; left alone", TagCluster, in.name)
		return nil
	}
	in.emit(KindEKSCluster, n, engine.StatusTerminating, "deleting")
	if _, err := in.eks.DeleteCluster(ctx, &eks.DeleteClusterInput{Name: aws.String(n)}); err != nil && apiCode(err) != "ResourceNotFoundException" {
		// ResourceInUseException is no "already deleting": EKS answers it
		// while the cluster still has node groups or another operation
		// runs. Waiting would wait for nothing: say so now.
		if apiCode(err) == "ResourceInUseException" && out.Cluster.Status != ekstypes.ClusterStatusDeleting {
			return in.fail(KindEKSCluster, n, fmt.Errorf("EKS refuses to delete cluster %s (%v); run `%s` again once what it names is gone", n, err, command("destroy", in.name, in.region)))
		}
		if apiCode(err) != "ResourceInUseException" {
			return in.fail(KindEKSCluster, n, fmt.Errorf("delete EKS cluster %s: %w", n, err))
		}
	}
	err = poll(ctx, deleteLimit, func(ctx context.Context) (bool, error) {
		_, err := in.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(n)})
		if apiCode(err) == "ResourceNotFoundException" {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		return in.fail(KindEKSCluster, n, fmt.Errorf("confirm EKS cluster %s deleted: %w", n, err))
	}
	in.emit(KindEKSCluster, n, engine.StatusNotFound, "deleted")
	return nil
}

func (in *infra) deleteRoles(ctx context.Context) error {
	for _, r := range roles {
		n := resourceName(in.name, r.part)
		got, err := in.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(n)})
		switch {
		case apiCode(err) == "NoSuchEntity":
			in.emit(KindIAMRole, n, engine.StatusNotFound, "none")
			continue
		case err != nil:
			return in.fail(KindIAMRole, n, fmt.Errorf("get IAM role %s: %w", n, err))
		case !iamTagged(got.Role.Tags, in.name):
			in.emit(KindIAMRole, n, engine.StatusCurrent, "not tagged %s=%s: kiln did not create it; left alone", TagCluster, in.name)
			continue
		}
		in.emit(KindIAMRole, n, engine.StatusTerminating, "deleting")
		ap := iam.NewListAttachedRolePoliciesPaginator(in.iam, &iam.ListAttachedRolePoliciesInput{RoleName: aws.String(n)})
		for ap.HasMorePages() {
			page, err := ap.NextPage(ctx)
			if err != nil {
				return in.fail(KindIAMRole, n, fmt.Errorf("list policies of %s: %w", n, err))
			}
			for _, pol := range page.AttachedPolicies {
				if _, err := in.iam.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: aws.String(n), PolicyArn: pol.PolicyArn}); err != nil && apiCode(err) != "NoSuchEntity" {
					return in.fail(KindIAMRole, n, fmt.Errorf("detach %s from %s: %w", aws.ToString(pol.PolicyArn), n, err))
				}
			}
		}
		ip := iam.NewListRolePoliciesPaginator(in.iam, &iam.ListRolePoliciesInput{RoleName: aws.String(n)})
		for ip.HasMorePages() {
			page, err := ip.NextPage(ctx)
			if err != nil {
				return in.fail(KindIAMRole, n, fmt.Errorf("list inline policies of %s: %w", n, err))
			}
			for _, pol := range page.PolicyNames {
				if _, err := in.iam.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: aws.String(n), PolicyName: aws.String(pol)}); err != nil && apiCode(err) != "NoSuchEntity" {
					return in.fail(KindIAMRole, n, fmt.Errorf("delete inline policy %s of %s: %w", pol, n, err))
				}
			}
		}
		if _, err := in.iam.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String(n)}); err != nil && apiCode(err) != "NoSuchEntity" {
			return in.fail(KindIAMRole, n, fmt.Errorf("delete IAM role %s: %w", n, err))
		}
		if _, err := in.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(n)}); apiCode(err) != "NoSuchEntity" {
			return in.fail(KindIAMRole, n, fmt.Errorf("IAM role %s still exists after DeleteRole (%v)", n, err))
		}
		in.emit(KindIAMRole, n, engine.StatusNotFound, "deleted")
	}
	return nil
}

// deleteEC2 deletes one EC2 resource, retrying while AWS reports
// DependencyViolation (EKS releases its network interfaces late), then
// confirms it is gone with exists.
func (in *infra) deleteEC2(ctx context.Context, kind, id string, del func(context.Context) error, exists func(context.Context) (bool, error)) error {
	in.emit(kind, id, engine.StatusTerminating, "deleting")
	err := poll(ctx, deleteLimit, func(ctx context.Context) (bool, error) {
		err := del(ctx)
		switch {
		case err == nil || strings.HasSuffix(apiCode(err), ".NotFound"):
			return true, nil
		case apiCode(err) == "DependencyViolation":
			in.emit(kind, id, engine.StatusTerminating, "waiting for dependencies to go: %v", err)
			return false, nil
		}
		return false, err
	})
	if err != nil {
		return in.fail(kind, id, fmt.Errorf("delete %s %s: %w", kind, id, err))
	}
	still, err := exists(ctx)
	if err != nil {
		return in.fail(kind, id, fmt.Errorf("confirm %s %s deleted: %w", kind, id, err))
	}
	if still {
		return in.fail(kind, id, fmt.Errorf("%s %s still exists after delete", kind, id))
	}
	in.emit(kind, id, engine.StatusNotFound, "deleted")
	return nil
}

func (in *infra) deleteSecurityGroups(ctx context.Context) error {
	sgs, err := findSecurityGroups(ctx, in.ec2, in.name)
	if err != nil {
		return in.fail(KindSecurityGroup, resourceName(in.name, "sg"), err)
	}
	if len(sgs) == 0 {
		in.emit(KindSecurityGroup, resourceName(in.name, "sg"), engine.StatusNotFound, "none")
	}
	for _, g := range sgs {
		id := aws.ToString(g.GroupId)
		err := in.deleteEC2(ctx, KindSecurityGroup, id,
			func(ctx context.Context) error {
				_, err := in.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(id)})
				return err
			},
			func(ctx context.Context) (bool, error) {
				left, err := findSecurityGroups(ctx, in.ec2, in.name)
				return slices.ContainsFunc(left, func(x ec2types.SecurityGroup) bool { return aws.ToString(x.GroupId) == id }), err
			})
		if err != nil {
			return err
		}
	}
	return nil
}

func (in *infra) deleteSubnets(ctx context.Context) error {
	subnets, err := findSubnets(ctx, in.ec2, in.name)
	if err != nil {
		return in.fail(KindSubnet, resourceName(in.name, "subnet"), err)
	}
	if len(subnets) == 0 {
		in.emit(KindSubnet, resourceName(in.name, "subnet"), engine.StatusNotFound, "none")
	}
	for _, s := range subnets {
		id := aws.ToString(s.SubnetId)
		err := in.deleteEC2(ctx, KindSubnet, id,
			func(ctx context.Context) error {
				_, err := in.ec2.DeleteSubnet(ctx, &ec2.DeleteSubnetInput{SubnetId: aws.String(id)})
				return err
			},
			func(ctx context.Context) (bool, error) {
				left, err := findSubnets(ctx, in.ec2, in.name)
				return slices.ContainsFunc(left, func(x ec2types.Subnet) bool { return aws.ToString(x.SubnetId) == id }), err
			})
		if err != nil {
			return err
		}
	}
	return nil
}

// deleteRouteTables reports left=true when the endpoint does not implement
// DeleteRouteTable (an emulator): the table is then left and reported.
func (in *infra) deleteRouteTables(ctx context.Context) (left bool, err error) {
	rts, err := findRouteTables(ctx, in.ec2, in.name)
	if err != nil {
		return false, in.fail(KindRouteTable, resourceName(in.name, "rt"), err)
	}
	if len(rts) == 0 {
		in.emit(KindRouteTable, resourceName(in.name, "rt"), engine.StatusNotFound, "none")
	}
	for _, rt := range rts {
		id := aws.ToString(rt.RouteTableId)
		_, err := in.ec2.DeleteRouteTable(ctx, &ec2.DeleteRouteTableInput{RouteTableId: aws.String(id)})
		if in.unsupported(err) {
			left = true
			in.emit(KindRouteTable, id, engine.StatusCurrent, "left behind: the endpoint %s does not implement DeleteRouteTable (%s)", aws.ToString(in.cfg.BaseEndpoint), apiCode(err))
			logf(in.sink, engine.LevelWarn, "route table %s of %s was not deleted: the endpoint %s does not implement DeleteRouteTable (an emulator); AWS would delete it",
				id, in.name, aws.ToString(in.cfg.BaseEndpoint))
			continue
		}
		err = in.deleteEC2(ctx, KindRouteTable, id,
			func(ctx context.Context) error {
				_, err := in.ec2.DeleteRouteTable(ctx, &ec2.DeleteRouteTableInput{RouteTableId: aws.String(id)})
				return err
			},
			func(ctx context.Context) (bool, error) {
				left, err := findRouteTables(ctx, in.ec2, in.name)
				return slices.ContainsFunc(left, func(x ec2types.RouteTable) bool { return aws.ToString(x.RouteTableId) == id }), err
			})
		if err != nil {
			return left, err
		}
	}
	return left, nil
}

func (in *infra) deleteIGWs(ctx context.Context) error {
	gws, err := findIGWs(ctx, in.ec2, in.name)
	if err != nil {
		return in.fail(KindInternetGateway, resourceName(in.name, "igw"), err)
	}
	if len(gws) == 0 {
		in.emit(KindInternetGateway, resourceName(in.name, "igw"), engine.StatusNotFound, "none")
	}
	for _, g := range gws {
		id := aws.ToString(g.InternetGatewayId)
		for _, a := range g.Attachments {
			if _, err := in.ec2.DetachInternetGateway(ctx, &ec2.DetachInternetGatewayInput{InternetGatewayId: aws.String(id), VpcId: a.VpcId}); err != nil &&
				apiCode(err) != "Gateway.NotAttached" && !strings.HasSuffix(apiCode(err), ".NotFound") {
				return in.fail(KindInternetGateway, id, fmt.Errorf("detach internet gateway %s from %s: %w", id, aws.ToString(a.VpcId), err))
			}
		}
		err := in.deleteEC2(ctx, KindInternetGateway, id,
			func(ctx context.Context) error {
				_, err := in.ec2.DeleteInternetGateway(ctx, &ec2.DeleteInternetGatewayInput{InternetGatewayId: aws.String(id)})
				return err
			},
			func(ctx context.Context) (bool, error) {
				left, err := findIGWs(ctx, in.ec2, in.name)
				return slices.ContainsFunc(left, func(x ec2types.InternetGateway) bool { return aws.ToString(x.InternetGatewayId) == id }), err
			})
		if err != nil {
			return err
		}
	}
	return nil
}

func (in *infra) deleteVPCs(ctx context.Context) error {
	vpcs, err := findVPCs(ctx, in.ec2, in.name)
	if err != nil {
		return in.fail(KindVPC, resourceName(in.name, "vpc"), err)
	}
	if len(vpcs) == 0 {
		in.emit(KindVPC, resourceName(in.name, "vpc"), engine.StatusNotFound, "none")
	}
	for _, v := range vpcs {
		id := aws.ToString(v.VpcId)
		err := in.deleteEC2(ctx, KindVPC, id,
			func(ctx context.Context) error {
				_, err := in.ec2.DeleteVpc(ctx, &ec2.DeleteVpcInput{VpcId: aws.String(id)})
				return err
			},
			func(ctx context.Context) (bool, error) {
				left, err := findVPCs(ctx, in.ec2, in.name)
				return slices.ContainsFunc(left, func(x ec2types.Vpc) bool { return aws.ToString(x.VpcId) == id }), err
			})
		if err != nil {
			return err
		}
	}
	return nil
}

// The managed node groups of a kiln EKS cluster: ensure, inventory,
// delete (including groups kiln did not create, which EKS would not delete
// the cluster with), and the upgrade steps (version, size, and a
// replacement group for an instance-type change).

package aws

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/kilnctl/kiln/engine"
)

// nodegroupName is the managed node group's name inside the EKS cluster.
const nodegroupName = "kiln-nodes"

func (in *infra) ensureNodegroup(ctx context.Context) error {
	n := nodegroupName
	out, err := in.eks.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(in.name), NodegroupName: aws.String(n)})
	if apiCode(err) == "ResourceNotFoundException" {
		// An upgrade that changed the instance type replaced kiln-nodes
		// by kiln-nodes-TYPE (upgrade.go): that group is the cluster's.
		if st, serr := in.readState(ctx); serr == nil && len(st.groups) > 0 {
			n = aws.ToString(st.groups[len(st.groups)-1].NodegroupName)
			out, err = in.eks.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(in.name), NodegroupName: aws.String(n)})
		}
	}
	switch {
	case err == nil:
		if out.Nodegroup.Tags[TagCluster] != in.name {
			return in.fail(KindNodegroup, n, fmt.Errorf("node group %s of EKS cluster %s is not tagged %s=%s; kiln does not adopt it", n, in.name, TagCluster, in.name))
		}
	case apiCode(err) == "ResourceNotFoundException":
		in.emit(KindNodegroup, n, engine.StatusInProgress, "creating %d × %s", in.p.nodes(), in.p.instanceType())
		err := retryRolePropagation(ctx, func(ctx context.Context) error {
			_, err := in.eks.CreateNodegroup(ctx, &eks.CreateNodegroupInput{
				ClusterName: aws.String(in.name), NodegroupName: aws.String(n),
				NodeRole: aws.String(in.roleARNs["node"]), Subnets: in.subnetIDs,
				InstanceTypes: []string{in.p.instanceType()},
				ScalingConfig: &ekstypes.NodegroupScalingConfig{
					MinSize: aws.Int32(in.p.nodes()), MaxSize: aws.Int32(in.p.nodes()), DesiredSize: aws.Int32(in.p.nodes()),
				},
				Tags: map[string]string{TagCluster: in.name, TagManagedBy: "kiln"},
			})
			return err
		})
		if err != nil && apiCode(err) != "ResourceInUseException" {
			return in.fail(KindNodegroup, n, fmt.Errorf("create node group %s: %w", n, err))
		}
	default:
		return in.fail(KindNodegroup, n, fmt.Errorf("describe node group %s: %w", n, err))
	}
	var ng *ekstypes.Nodegroup
	err = poll(ctx, waitLimit, func(ctx context.Context) (bool, error) {
		out, err := in.eks.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(in.name), NodegroupName: aws.String(n)})
		if err != nil {
			return false, fmt.Errorf("describe node group %s: %w", n, err)
		}
		ng = out.Nodegroup
		switch ng.Status {
		case ekstypes.NodegroupStatusActive:
			return true, nil
		case ekstypes.NodegroupStatusCreateFailed, ekstypes.NodegroupStatusDeleting, ekstypes.NodegroupStatusDegraded:
			return false, fmt.Errorf("node group %s is %s", n, ng.Status)
		}
		in.emit(KindNodegroup, n, engine.StatusInProgress, "%s", ng.Status)
		return false, nil
	})
	if err != nil {
		return in.fail(KindNodegroup, n, err)
	}
	size := int32(0)
	if ng.ScalingConfig != nil {
		size = aws.ToInt32(ng.ScalingConfig.DesiredSize)
	}
	in.emit(KindNodegroup, n, engine.StatusCurrent, "ACTIVE, %d × %s", size, strings.Join(ng.InstanceTypes, ","))
	return nil
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

// ngState is a kiln node group as EKS describes it.
type ngState = ekstypes.Nodegroup

// failedCreate says why node group g ended CREATE_FAILED, from its health
// issues ("" when it did not).
func failedCreate(g *ngState) string {
	if g.Status != ekstypes.NodegroupStatusCreateFailed {
		return ""
	}
	var why []string
	if g.Health != nil {
		for _, is := range g.Health.Issues {
			why = append(why, fmt.Sprintf("%s: %s", is.Code, aws.ToString(is.Message)))
		}
	}
	if len(why) == 0 {
		return "CREATE_FAILED (EKS gives no health issue)"
	}
	return "CREATE_FAILED: " + strings.Join(why, "; ")
}

func ngSize(g *ngState) int32 {
	if g.ScalingConfig == nil {
		return 0
	}
	return aws.ToInt32(g.ScalingConfig.DesiredSize)
}

func ngType(g *ngState) string { return strings.Join(g.InstanceTypes, ",") }

// replacementName is the node group that runs instance type t.
func replacementName(t string) string {
	return nodegroupName + "-" + strings.ReplaceAll(t, ".", "-")
}

// nodegroupVersion moves node group n from → to and waits.
func (in *infra) nodegroupVersion(ctx context.Context, n, from, to string) error {
	in.emit(KindNodegroup, n, engine.StatusInProgress, "updating Kubernetes %s → %s", from, to)
	out, err := in.eks.UpdateNodegroupVersion(ctx, &eks.UpdateNodegroupVersionInput{ClusterName: aws.String(in.name), NodegroupName: aws.String(n), Version: aws.String(to)})
	if err != nil {
		return in.fail(KindNodegroup, n, fmt.Errorf("update node group %s to Kubernetes %s: %w", n, to, err))
	}
	if err := in.waitUpdate(ctx, KindNodegroup, n, n, out.Update); err != nil {
		return in.fail(KindNodegroup, n, err)
	}
	in.emit(KindNodegroup, n, engine.StatusCurrent, "ACTIVE, Kubernetes %s", to)
	return nil
}

func (in *infra) upgradeNodegroupVersion(ctx context.Context) error {
	_, pl, err := in.settled(ctx)
	if err != nil {
		return in.fail(KindNodegroup, nodegroupName, err)
	}
	if pl.keep == nil || !pl.ngVersion {
		return nil
	}
	return in.nodegroupVersion(ctx, aws.ToString(pl.keep.NodegroupName), aws.ToString(pl.keep.Version), pl.target)
}

func (in *infra) createReplacement(ctx context.Context) error {
	st, pl, err := in.settled(ctx)
	if err != nil {
		return in.fail(KindNodegroup, nodegroupName, err)
	}
	if pl.create == "" {
		return nil
	}
	n := pl.create
	if pl.recreate {
		in.emit(KindNodegroup, n, engine.StatusTerminating, "deleting: an earlier creation failed")
		if err := in.deleteNodegroup(ctx, n); err != nil {
			return err
		}
	}
	subnets, role := st.cluster.ResourcesVpcConfig.SubnetIds, ""
	for i := len(st.groups) - 1; i >= 0; i-- {
		if g := st.groups[i]; failedCreate(g) == "" {
			subnets, role = g.Subnets, aws.ToString(g.NodeRole)
			break
		}
	}
	if role == "" {
		got, err := in.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(resourceName(in.name, "node"))})
		if err != nil {
			return in.fail(KindNodegroup, n, fmt.Errorf("get IAM role %s: %w", resourceName(in.name, "node"), err))
		}
		role = aws.ToString(got.Role.Arn)
	}
	in.emit(KindNodegroup, n, engine.StatusInProgress, "creating %d × %s, Kubernetes %s", pl.nodes, pl.instanceType, pl.target)
	_, err = in.eks.CreateNodegroup(ctx, &eks.CreateNodegroupInput{
		ClusterName: aws.String(in.name), NodegroupName: aws.String(n),
		NodeRole: aws.String(role), Subnets: subnets, Version: aws.String(pl.target),
		InstanceTypes: []string{pl.instanceType},
		ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: aws.Int32(pl.nodes), MaxSize: aws.Int32(pl.nodes), DesiredSize: aws.Int32(pl.nodes)},
		Tags:          map[string]string{TagCluster: in.name, TagManagedBy: "kiln"},
	})
	if err != nil && apiCode(err) != "ResourceInUseException" {
		return in.fail(KindNodegroup, n, fmt.Errorf("create node group %s: %w", n, err))
	}
	engine.Checkpoint(ctx, "aws-upgrade-nodegroup-requested")
	after, _, err := in.settled(ctx)
	if err != nil {
		return in.fail(KindNodegroup, n, err)
	}
	// Settled means no longer CREATING: the replacement must be ACTIVE
	// before anything it replaces is touched.
	for _, g := range after.groups {
		if aws.ToString(g.NodegroupName) != n || g.Status == ekstypes.NodegroupStatusActive {
			continue
		}
		kept := "no other node group"
		if pl.keep != nil {
			kept = "node group " + aws.ToString(pl.keep.NodegroupName)
		} else if len(pl.remove) > 0 {
			kept = "node group " + strings.Join(pl.remove, ", ")
		}
		why := failedCreate(g)
		if why == "" {
			why = string(g.Status)
		}
		return in.fail(KindNodegroup, n, fmt.Errorf("replacement node group %s ended %s; %s keeps running and nothing was deleted. Run `%s` again once EC2 has the capacity (it deletes the failed group and creates it again), or choose another --instance-type", n, why, kept, command("upgrade", in.name, in.region)))
	}
	in.emit(KindNodegroup, n, engine.StatusCurrent, "ACTIVE, %d × %s", pl.nodes, pl.instanceType)
	return nil
}

func (in *infra) resizeNodegroup(ctx context.Context) error {
	_, pl, err := in.settled(ctx)
	if err != nil {
		return in.fail(KindNodegroup, nodegroupName, err)
	}
	if pl.keep == nil || pl.size == 0 {
		return nil
	}
	n := aws.ToString(pl.keep.NodegroupName)
	in.emit(KindNodegroup, n, engine.StatusInProgress, "scaling %d → %d nodes", ngSize(pl.keep), pl.size)
	out, err := in.eks.UpdateNodegroupConfig(ctx, &eks.UpdateNodegroupConfigInput{
		ClusterName: aws.String(in.name), NodegroupName: aws.String(n),
		ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: aws.Int32(pl.size), MaxSize: aws.Int32(pl.size), DesiredSize: aws.Int32(pl.size)},
	})
	if err != nil {
		return in.fail(KindNodegroup, n, fmt.Errorf("scale node group %s to %d: %w", n, pl.size, err))
	}
	if err := in.waitUpdate(ctx, KindNodegroup, n, n, out.Update); err != nil {
		return in.fail(KindNodegroup, n, err)
	}
	in.emit(KindNodegroup, n, engine.StatusCurrent, "ACTIVE, %d × %s", pl.size, pl.instanceType)
	return nil
}

// removeReplaced deletes the node groups the kept one replaces, only once
// the kept one is ACTIVE (settled), and waits until they are gone.
func (in *infra) removeReplaced(ctx context.Context) error {
	_, pl, err := in.settled(ctx)
	if err != nil {
		return in.fail(KindNodegroup, nodegroupName, err)
	}
	if pl.keep == nil {
		if len(pl.remove) > 0 {
			return in.fail(KindNodegroup, pl.create, fmt.Errorf("node group %s is not there to replace %s; nothing was deleted", pl.create, strings.Join(pl.remove, ", ")))
		}
		return nil
	}
	if pl.keep.Status != ekstypes.NodegroupStatusActive && len(pl.remove) > 0 {
		return in.fail(KindNodegroup, aws.ToString(pl.keep.NodegroupName), fmt.Errorf("node group %s is %s, not ACTIVE; %s not deleted", aws.ToString(pl.keep.NodegroupName), pl.keep.Status, strings.Join(pl.remove, ", ")))
	}
	for _, n := range pl.remove {
		in.emit(KindNodegroup, n, engine.StatusTerminating, "deleting (replaced by %s)", aws.ToString(pl.keep.NodegroupName))
		if err := in.deleteNodegroup(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

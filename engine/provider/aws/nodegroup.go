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
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/input"
)

// nodegroupName is the managed node group's name inside the EKS cluster.
const nodegroupName = "kiln-nodes"

// KindLaunchTemplate is the resource kind of the node groups' EC2 launch
// template.
const KindLaunchTemplate = "LaunchTemplate"

// Waiting. The SDK has EKS waiters (eks.NewNodegroupActiveWaiter,
// NewNodegroupDeletedWaiter, …), but kiln keeps its own poll for node
// groups: a waiter reports nothing while it waits (kiln emits a resource
// event per status change), and when a group ends CREATE_FAILED,
// DELETE_FAILED or DEGRADED it returns "waiter state transitioned to
// Failure" without the group — kiln must name AWS's health issues, and
// treat DEGRADED as a warning, which a waiter's success/failure cannot say.

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
		lt, err := in.launchTemplate(ctx, false)
		if err != nil {
			return in.fail(KindNodegroup, n, err)
		}
		in.emit(KindNodegroup, n, engine.StatusInProgress, "creating %d × %s, launch template %s", in.p.nodes(), in.p.instanceType(), aws.ToString(lt.Id))
		err = retryRolePropagation(ctx, func(ctx context.Context) error {
			_, err := in.eks.CreateNodegroup(ctx, &eks.CreateNodegroupInput{
				ClusterName: aws.String(in.name), NodegroupName: aws.String(n),
				NodeRole: aws.String(in.roleARNs["node"]), Subnets: in.subnetIDs,
				InstanceTypes:  []string{in.p.instanceType()},
				LaunchTemplate: lt,
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
		case ekstypes.NodegroupStatusActive, ekstypes.NodegroupStatusDegraded:
			return true, nil // DEGRADED: reported below, not fatal
		case ekstypes.NodegroupStatusCreateFailed, ekstypes.NodegroupStatusDeleteFailed, ekstypes.NodegroupStatusDeleting:
			return false, fmt.Errorf("node group %s is %s", n, unhealthy(ng))
		}
		in.emit(KindNodegroup, n, engine.StatusInProgress, "%s", ng.Status)
		return false, nil
	})
	if err != nil {
		return in.fail(KindNodegroup, n, err)
	}
	in.reportHealth(ng)
	return nil
}

// reportHealth emits node group g as it is: ACTIVE, or — DEGRADED, or
// ACTIVE with health issues — as a warning naming AWS's issues. A
// degraded group still runs nodes; kiln reports it and goes on.
func (in *infra) reportHealth(g *ngState) {
	n := aws.ToString(g.NodegroupName)
	if healthy(g) {
		in.emit(KindNodegroup, n, engine.StatusCurrent, "ACTIVE, %d × %s", ngSize(g), ngType(g))
		return
	}
	why := unhealthy(g)
	in.emit(KindNodegroup, n, engine.StatusCurrent, "%s (%d × %s)", why, ngSize(g), ngType(g))
	logf(in.sink, engine.LevelWarn, "node group %s of %s is %s; its nodes keep running and kiln goes on. Fix the cause the issue names (the node group's Health tab in the EKS console shows it too); each kiln create or upgrade of %s reports it until it is ACTIVE", n, in.name, why, in.name)
}

// launchTemplateName is the node groups' EC2 launch template.
func launchTemplateName(cluster string) string { return resourceName(cluster, "nodes") }

// ensureLaunchTemplate is the step that makes the launch template every
// node group kiln creates uses.
func (in *infra) ensureLaunchTemplate(ctx context.Context) error {
	_, err := in.launchTemplate(ctx, true)
	return err
}

// launchTemplate finds (by tag) or creates the node groups' EC2 launch
// template and returns its specification for CreateNodegroup. It carries
// only the instance metadata options: IMDSv2 required (HttpTokens
// required), HttpPutResponseHopLimit 1 (a pod on the node's network
// cannot reach IMDS through the extra hop, so it cannot take the node
// role's credentials), HttpEndpoint enabled (the node itself needs IMDS).
// It names no instance type, disk or SSH key: CreateNodegroup keeps
// instanceTypes (allowed when the template has none) and sets neither
// diskSize nor remoteAccess, which EKS refuses with a launch template
// (https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateNodegroup.html).
// One template serves every group, so a replacement of another instance
// type uses it too. report: emit its resource events (the step itself).
func (in *infra) launchTemplate(ctx context.Context, report bool) (*ekstypes.LaunchTemplateSpecification, error) {
	name := launchTemplateName(in.name)
	found, err := in.launchTemplates(ctx)
	if err != nil {
		return nil, in.fail(KindLaunchTemplate, name, err)
	}
	var lt ec2types.LaunchTemplate
	if len(found) > 0 {
		lt = found[0]
	} else {
		if report {
			in.emit(KindLaunchTemplate, name, engine.StatusInProgress, "creating: IMDSv2 required, hop limit 1")
		}
		out, err := in.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
			LaunchTemplateName: aws.String(name),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
				MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
					HttpTokens:              ec2types.LaunchTemplateHttpTokensStateRequired,
					HttpPutResponseHopLimit: aws.Int32(1),
					HttpEndpoint:            ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled,
				},
			},
			TagSpecifications: []ec2types.TagSpecification{{
				ResourceType: ec2types.ResourceTypeLaunchTemplate,
				Tags: []ec2types.Tag{
					{Key: aws.String(TagCluster), Value: aws.String(in.name)},
					{Key: aws.String(TagManagedBy), Value: aws.String("kiln")},
					{Key: aws.String("Name"), Value: aws.String(name)},
				},
			}},
		})
		switch {
		case apiCode(err) == "InvalidLaunchTemplateName.AlreadyExistsException":
			return nil, in.fail(KindLaunchTemplate, name, fmt.Errorf("EC2 launch template %s exists in %s but is not tagged %s=%s; kiln does not adopt it (delete it, or use another NAME)", name, in.region, TagCluster, in.name))
		case err != nil:
			return nil, in.fail(KindLaunchTemplate, name, fmt.Errorf("create EC2 launch template %s: %w", name, err))
		}
		lt = *out.LaunchTemplate
		in.p.checkpoint(ctx, "aws-launchtemplate-created")
	}
	if report {
		in.emit(KindLaunchTemplate, name, engine.StatusCurrent, "%s: IMDSv2 required, hop limit 1", aws.ToString(lt.LaunchTemplateId))
	}
	version := "1"
	if lt.DefaultVersionNumber != nil {
		version = fmt.Sprint(*lt.DefaultVersionNumber)
	}
	return &ekstypes.LaunchTemplateSpecification{Id: lt.LaunchTemplateId, Version: aws.String(version)}, nil
}

// launchTemplates are the EC2 launch templates tagged for the cluster.
func (in *infra) launchTemplates(ctx context.Context) ([]ec2types.LaunchTemplate, error) {
	var all []ec2types.LaunchTemplate
	pg := ec2.NewDescribeLaunchTemplatesPaginator(in.ec2, &ec2.DescribeLaunchTemplatesInput{
		Filters: []ec2types.Filter{{Name: aws.String("tag:" + TagCluster), Values: []string{in.name}}},
	})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe EC2 launch templates tagged %s=%s: %w", TagCluster, in.name, err)
		}
		all = append(all, page.LaunchTemplates...)
	}
	slices.SortFunc(all, func(a, b ec2types.LaunchTemplate) int {
		return aws.ToTime(a.CreateTime).Compare(aws.ToTime(b.CreateTime))
	})
	return all, nil
}

// launchTemplateInventory adds the tagged launch templates to inv.
func (in *infra) launchTemplateInventory(ctx context.Context, inv Inventory) error {
	lts, err := in.launchTemplates(ctx)
	if err != nil {
		return err
	}
	for _, lt := range lts {
		inv[KindLaunchTemplate] = append(inv[KindLaunchTemplate], aws.ToString(lt.LaunchTemplateId))
	}
	return nil
}

// deleteLaunchTemplates deletes the tagged launch templates, after the
// node groups that use them (EC2 deletes a template a group still uses,
// and the group could then not replace a node).
func (in *infra) deleteLaunchTemplates(ctx context.Context) error {
	lts, err := in.launchTemplates(ctx)
	if err != nil {
		return in.fail(KindLaunchTemplate, launchTemplateName(in.name), err)
	}
	if len(lts) == 0 {
		in.emit(KindLaunchTemplate, launchTemplateName(in.name), engine.StatusNotFound, "none")
	}
	for _, lt := range lts {
		id := aws.ToString(lt.LaunchTemplateId)
		in.emit(KindLaunchTemplate, aws.ToString(lt.LaunchTemplateName), engine.StatusTerminating, "deleting %s", id)
		_, err := in.ec2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(id)})
		if err != nil && apiCode(err) != "InvalidLaunchTemplateId.NotFound" {
			return in.fail(KindLaunchTemplate, aws.ToString(lt.LaunchTemplateName), fmt.Errorf("delete EC2 launch template %s: %w", id, err))
		}
	}
	// EC2 is eventually consistent after a delete too: a template may
	// still be listed for a moment. Wait (bounded) until the listing
	// agrees, so destroy's final inventory does not report it as left.
	err = poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		left, err := in.launchTemplates(ctx)
		return len(left) == 0, err
	})
	if err != nil {
		return in.fail(KindLaunchTemplate, launchTemplateName(in.name), fmt.Errorf("confirm EC2 launch templates deleted: %w", err))
	}
	for _, lt := range lts {
		in.emit(KindLaunchTemplate, aws.ToString(lt.LaunchTemplateName), engine.StatusNotFound, "deleted %s", aws.ToString(lt.LaunchTemplateId))
	}
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
		out, err := in.eks.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(in.name), NodegroupName: aws.String(n)})
		switch {
		case apiCode(err) == "ResourceNotFoundException":
			return true, nil
		case err != nil:
			return false, err
		case out.Nodegroup.Status == ekstypes.NodegroupStatusDeleteFailed:
			// EKS has given up: waiting on would wait out deleteLimit for
			// nothing. Its health issue says what holds the group.
			return false, fmt.Errorf("EKS could not delete it: %s. Remove what the issue names, then run `%s` again", unhealthy(out.Nodegroup), in.p.command("destroy", in.name, in.region))
		}
		return false, nil
	})
	if err != nil {
		return in.fail(KindNodegroup, n, fmt.Errorf("confirm node group %s deleted: %w", n, err))
	}
	in.emit(KindNodegroup, n, engine.StatusNotFound, "deleted")
	return nil
}

// ngState is a kiln node group as EKS describes it.
type ngState = ekstypes.Nodegroup

// healthy is kiln's one rule for a node group that is fine: ACTIVE, and
// no health issue (NodegroupHealth.issues is empty:
// https://docs.aws.amazon.com/eks/latest/APIReference/API_NodegroupHealth.html).
// Create reports a group that is not as a warning; an upgrade deletes no
// group unless the one that takes over is healthy.
func healthy(g *ngState) bool {
	return g.Status == ekstypes.NodegroupStatusActive && (g.Health == nil || len(g.Health.Issues) == 0)
}

// unhealthy says why node group g is not healthy: its status and AWS's
// health issues ("" when it is healthy).
func unhealthy(g *ngState) string {
	if healthy(g) {
		return ""
	}
	var why []string
	if g.Health != nil {
		for _, is := range g.Health.Issues {
			why = append(why, fmt.Sprintf("%s: %s", is.Code, aws.ToString(is.Message)))
		}
	}
	if len(why) == 0 {
		return string(g.Status) + " (EKS gives no health issue)"
	}
	return string(g.Status) + ": " + strings.Join(why, "; ")
}

// unusable reports whether node group g runs no node kiln can count on:
// its creation failed, or its deletion did (EKS deleted part of it).
func unusable(g *ngState) bool {
	return g.Status == ekstypes.NodegroupStatusCreateFailed || g.Status == ekstypes.NodegroupStatusDeleteFailed
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
		if g := st.groups[i]; !unusable(g) {
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
	// A cluster made before kiln used a launch template gets it now.
	lt, err := in.launchTemplate(ctx, true)
	if err != nil {
		return in.fail(KindNodegroup, n, err)
	}
	in.emit(KindNodegroup, n, engine.StatusInProgress, "creating %d × %s, Kubernetes %s", pl.nodes, pl.instanceType, pl.target)
	_, err = in.eks.CreateNodegroup(ctx, &eks.CreateNodegroupInput{
		ClusterName: aws.String(in.name), NodegroupName: aws.String(n),
		NodeRole: aws.String(role), Subnets: subnets, Version: aws.String(pl.target),
		InstanceTypes: []string{pl.instanceType}, LaunchTemplate: lt,
		ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: aws.Int32(pl.nodes), MaxSize: aws.Int32(pl.nodes), DesiredSize: aws.Int32(pl.nodes)},
		Tags:          map[string]string{TagCluster: in.name, TagManagedBy: "kiln"},
	})
	if err != nil && apiCode(err) != "ResourceInUseException" {
		return in.fail(KindNodegroup, n, fmt.Errorf("create node group %s: %w", n, err))
	}
	in.p.checkpoint(ctx, "aws-upgrade-nodegroup-requested")
	after, _, err := in.settled(ctx)
	if err != nil {
		return in.fail(KindNodegroup, n, err)
	}
	// Settled means no longer CREATING: the replacement must be healthy
	// before anything it replaces is touched.
	for _, g := range after.groups {
		if aws.ToString(g.NodegroupName) != n || healthy(g) {
			continue
		}
		kept := "no other node group"
		if pl.keep != nil {
			kept = "node group " + aws.ToString(pl.keep.NodegroupName)
		} else if len(pl.remove) > 0 {
			kept = "node group " + strings.Join(pl.remove, ", ")
		}
		if unusable(g) {
			// Fixed by another instance type too: worded per frontend (the
			// wizard's Node type field), the command for the CLI only.
			return in.fail(KindNodegroup, n, input.New(failure.Failed, input.InstanceType, n,
				"replacement node group %s ended %s; %s keeps running and nothing was deleted. Upgrade again%s once EC2 has the capacity (it deletes the failed group and creates it again), or choose another instance type with {input}",
				n, unhealthy(g), kept, input.CLIOnly(" (`"+in.p.command("upgrade", in.name, in.region)+"`)")))
		}
		return in.fail(KindNodegroup, n, fmt.Errorf("replacement node group %s ended %s; %s keeps running and nothing was deleted. Run `%s` again once the cause the issue names is fixed (%s is deleted only when %s is ACTIVE without health issues)",
			n, unhealthy(g), kept, in.p.command("upgrade", in.name, in.region), kept, n))
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
	if !healthy(pl.keep) && len(pl.remove) > 0 {
		return in.fail(KindNodegroup, aws.ToString(pl.keep.NodegroupName), fmt.Errorf("node group %s is %s, not healthy; %s not deleted", aws.ToString(pl.keep.NodegroupName), unhealthy(pl.keep), strings.Join(pl.remove, ", ")))
	}
	if len(pl.remove) == 0 && !healthy(pl.keep) {
		// Nothing to replace: a DEGRADED group is reported, not fatal.
		in.reportHealth(pl.keep)
	}
	for _, n := range pl.remove {
		in.emit(KindNodegroup, n, engine.StatusTerminating, "deleting (replaced by %s)", aws.ToString(pl.keep.NodegroupName))
		if err := in.deleteNodegroup(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

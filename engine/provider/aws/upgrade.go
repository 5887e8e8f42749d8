package aws

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/input"
	"github.com/kilnctl/kiln/engine/platform"
)

// kiln upgrade aws: the infrastructure part (engine.InfraUpgrader).
//
// What is asked is the provider's Change (set by kiln upgrade's flags
// only: a provider built for anything else asks no change), with "unset"
// meaning "keep what runs": Nodes (0 = keep), InstanceType ("" = keep),
// KubernetesVersion ("" = keep). The order is EKS's: the control
// plane first (one minor version at a time; EKS refuses more, and never
// goes down, so kiln refuses both before anything is written, failure.Input),
// then the node group — its Kubernetes version (UpdateNodegroupVersion,
// a rolling replacement of the nodes by EKS), its instance type, its size
// (UpdateNodegroupConfig) — and then, in the engine, the platform.
//
// Instance type. EKS cannot change the instance types of a managed node
// group (UpdateNodegroupConfig has no such field; kiln's launch template,
// nodegroup.go, names no instance type). kiln therefore creates a
// replacement node group, named kiln-nodes-TYPE (dots as dashes) with the
// asked size and the cluster's version, waits until it is healthy
// (ACTIVE, no health issue), then deletes the old group and waits until
// it is gone: capacity never drops
// below the asked size meanwhile, and EKS drains the old nodes as it
// removes them. The name follows from the type, so a run killed at any
// point finds its replacement again; where several kiln node groups exist
// (a replacement was interrupted) and no --instance-type is given, the
// newest is the one kept.

var _ engine.InfraUpgrader = (*Provider)(nil)

// Change is what kiln upgrade aws asks of the infrastructure; a zero
// field keeps what runs.
type Change struct {
	// Nodes is the node group's new size (1 to MaxNodes).
	Nodes int
	// InstanceType is the node group's new EC2 instance type.
	InstanceType string
	// KubernetesVersion is the Kubernetes version (MAJOR.MINOR) the
	// control plane and then the nodes go to: one minor above the
	// current at most.
	KubernetesVersion string
}

// validate checks what can be checked without AWS (failure.Input naming the
// field).
func (c Change) validate() error {
	if err := checkInstanceType(c.InstanceType); err != nil {
		return err
	}
	if err := CheckNodes(int(c.Nodes), false); err != nil {
		return err
	}
	if err := checkKubernetesVersion(c.KubernetesVersion); err != nil {
		return err
	}
	return nil
}

// updateWaitLimit bounds the wait for one EKS update (a control-plane
// version update takes EKS 8 to 10 minutes; a node group's rolling one
// longer with many nodes).
const updateWaitLimit = waitLimit

// infraState is what an upgrade reads: the EKS cluster and its kiln node
// groups, oldest first.
type infraState struct {
	cluster *ekstypes.Cluster
	groups  []*ngState
}

// infraPlan is what an upgrade does, step by step, derived from the
// request and the state alone.
type infraPlan struct {
	from, version string // control plane: from → version ("" = no change)
	keep          *ngState
	ngVersion     bool   // keep's version goes to the target version
	size          int32  // keep's new size (0 = no change)
	create        string // a replacement node group's name ("" = none)
	nodes         int32
	instanceType  string
	target        string // the Kubernetes version the nodes run in the end
	remove        []string
	// recreate: the group named create exists, CREATE_FAILED: it is
	// deleted before it is created again.
	recreate bool
	changes  []engine.PlanChange
}

func parseMinor(v string) (int, bool) {
	major, m, ok := strings.Cut(v, ".")
	if !ok || major != "1" {
		return 0, false
	}
	n, err := strconv.Atoi(m)
	return n, err == nil
}

// planUpgrade derives the plan from the request (p's fields) and the state.
func (p *Provider) planUpgrade(name string, st *infraState) (*infraPlan, error) {
	pl := &infraPlan{}
	have := aws.ToString(st.cluster.Version)
	req := p.Change
	want := req.KubernetesVersion
	if want == "" {
		want = have
	}
	pl.target = want
	if want != have {
		hm, okH := parseMinor(have)
		wm, _ := parseMinor(want)
		switch {
		case !okH:
			return nil, fmt.Errorf("EKS cluster %s reports Kubernetes version %q, which kiln cannot read", name, have)
		case wm < hm:
			return nil, input.New(failure.Input, input.KubernetesVersion, want, "{input} %s: EKS cluster %s runs Kubernetes %s, and EKS never downgrades a control plane; nothing was changed", want, name, have)
		case wm > hm+1:
			return nil, input.New(failure.Input, input.KubernetesVersion, want, "{input} %s: EKS cluster %s runs Kubernetes %s, and EKS upgrades a control plane one minor version at a time; nothing was changed. Upgrade to 1.%d first%s, then on from there", want, name, have, hm+1,
				// The command names the flag: the CLI's words only.
				input.CLIOnly(" (`"+p.command("upgrade", name, p.Target(), engine.FlagName(input.KubernetesVersion), fmt.Sprintf("1.%d", hm+1))+"`)"))
		}
		pl.from, pl.version = have, want
		pl.changes = append(pl.changes, engine.PlanChange{Action: platform.ActionUpdate, Kind: KindEKSCluster, Name: name, Fields: []string{"version"},
			Message: fmt.Sprintf("Kubernetes %s → %s: the EKS control plane, one minor version (EKS keeps serving meanwhile)", have, want)})
	}

	// A group whose creation failed runs no node: it is never the one
	// kept, whatever its type, and never counts as a replacement that is
	// there. The usable groups decide the plan.
	var usable, failed []*ngState
	for _, g := range st.groups {
		if unusable(g) {
			failed = append(failed, g)
		} else {
			usable = append(usable, g)
		}
	}
	defer func(all []*ngState) { st.groups = all }(st.groups)
	st.groups = usable

	// The node group kept: the newest running the asked type (or the
	// newest of all when no type is asked).
	for i := len(st.groups) - 1; i >= 0; i-- {
		g := st.groups[i]
		if req.InstanceType == "" || ngType(g) == req.InstanceType {
			pl.keep = g
			break
		}
	}
	pl.instanceType = req.InstanceType
	pl.nodes = int32(req.Nodes)
	if pl.keep != nil {
		if pl.instanceType == "" {
			pl.instanceType = ngType(pl.keep)
		}
		if pl.nodes == 0 {
			pl.nodes = ngSize(pl.keep)
		}
		kv := aws.ToString(pl.keep.Version)
		n := aws.ToString(pl.keep.NodegroupName)
		if kv != want {
			pl.ngVersion = true
			pl.changes = append(pl.changes, engine.PlanChange{Action: platform.ActionUpdate, Kind: KindNodegroup, Name: n, Fields: []string{"version"},
				Message: fmt.Sprintf("Kubernetes %s → %s: EKS replaces the nodes one at a time, draining each", kv, want)})
		}
		if s := ngSize(pl.keep); s != pl.nodes {
			pl.size = pl.nodes
			pl.changes = append(pl.changes, engine.PlanChange{Action: platform.ActionUpdate, Kind: KindNodegroup, Name: n,
				Fields:  []string{"scalingConfig.desiredSize", "scalingConfig.maxSize", "scalingConfig.minSize"},
				Message: fmt.Sprintf("%d → %d nodes (%s)", s, pl.nodes, pl.instanceType)})
		}
	} else {
		if pl.instanceType == "" {
			pl.instanceType = DefaultInstanceType
		}
		if pl.nodes == 0 {
			pl.nodes = DefaultNodes
			if len(st.groups) > 0 {
				pl.nodes = ngSize(st.groups[len(st.groups)-1])
			}
		}
		pl.create = replacementName(pl.instanceType)
		if len(st.groups) == 0 {
			pl.create = nodegroupName
		}
		msg := fmt.Sprintf("%d × %s, Kubernetes %s", pl.nodes, pl.instanceType, want)
		if len(st.groups) > 0 {
			g := st.groups[len(st.groups)-1]
			msg += fmt.Sprintf(": replaces %s (%d × %s); EKS cannot change a node group's instance type in place", aws.ToString(g.NodegroupName), ngSize(g), ngType(g))
		}
		pl.changes = append(pl.changes, engine.PlanChange{Action: platform.ActionCreate, Kind: KindNodegroup, Name: pl.create,
			Fields: []string{"instanceTypes", "scalingConfig", "version"}, Message: msg})
	}
	for _, g := range st.groups {
		if g == pl.keep {
			continue
		}
		n := aws.ToString(g.NodegroupName)
		pl.remove = append(pl.remove, n)
		by := pl.create
		if pl.keep != nil {
			by = aws.ToString(pl.keep.NodegroupName)
		}
		pl.changes = append(pl.changes, engine.PlanChange{Action: platform.ActionDelete, Kind: KindNodegroup, Name: n,
			Message: fmt.Sprintf("%d × %s, replaced by %s: deleted once that is ACTIVE", ngSize(g), ngType(g), by)})
	}
	for _, g := range failed {
		n := aws.ToString(g.NodegroupName)
		if n == pl.create {
			pl.recreate = true
			pl.changes = append(pl.changes, engine.PlanChange{Action: platform.ActionDelete, Kind: KindNodegroup, Name: n,
				Message: fmt.Sprintf("an earlier run left it %s; deleted, then created again", unhealthy(g))})
			continue
		}
		pl.remove = append(pl.remove, n)
		pl.changes = append(pl.changes, engine.PlanChange{Action: platform.ActionDelete, Kind: KindNodegroup, Name: n,
			Message: fmt.Sprintf("runs no node (%s): deleted", unhealthy(g))})
	}
	return pl, nil
}

// readState reads the EKS cluster and its kiln node groups. It writes
// nothing.
func (in *infra) readState(ctx context.Context) (*infraState, error) {
	out, err := in.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(in.name)})
	switch {
	case apiCode(err) == "ResourceNotFoundException":
		return nil, fmt.Errorf("EKS cluster %s not found in %s; kiln upgrade changes an existing cluster (`%s` makes one)", in.name, in.region, in.p.command("create", in.name, in.region))
	case err != nil:
		return nil, fmt.Errorf("describe EKS cluster %s: %w", in.name, err)
	case out.Cluster.Tags[TagCluster] != in.name:
		return nil, fmt.Errorf("EKS cluster %s in %s is not tagged %s=%s; kiln does not change clusters it did not create", in.name, in.region, TagCluster, in.name)
	}
	st := &infraState{cluster: out.Cluster}
	names, err := in.nodegroups(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		d, err := in.eks.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(in.name), NodegroupName: aws.String(n)})
		if apiCode(err) == "ResourceNotFoundException" {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("describe node group %s: %w", n, err)
		}
		if d.Nodegroup.Status == ekstypes.NodegroupStatusDeleting {
			continue // on its way out: nothing to keep or delete
		}
		st.groups = append(st.groups, d.Nodegroup)
	}
	slices.SortStableFunc(st.groups, func(a, b *ngState) int {
		if c := aws.ToTime(a.CreatedAt).Compare(aws.ToTime(b.CreatedAt)); c != 0 {
			return c
		}
		return strings.Compare(aws.ToString(a.NodegroupName), aws.ToString(b.NodegroupName))
	})
	return st, nil
}

// PlanInfrastructure implements engine.InfraUpgrader: the changes asked
// of the EKS cluster in region, read from EKS, nothing written.
func (p *Provider) PlanInfrastructure(ctx context.Context, name, region string) ([]engine.PlanChange, error) {
	if err := p.Change.validate(); err != nil {
		return nil, err
	}
	if err := p.Access.validate(); err != nil {
		return nil, err
	}
	in, err := p.newInfra(ctx, name, region, nil)
	if err != nil {
		return nil, err
	}
	st, err := in.readState(ctx)
	if err != nil {
		return nil, err
	}
	pl, err := p.planUpgrade(name, st)
	if err != nil {
		return nil, err
	}
	addons, err := in.planAddons(ctx, pl.target)
	if err != nil {
		return nil, err
	}
	access, err := in.planAccessChanges(ctx, st.cluster)
	if err != nil {
		return nil, err
	}
	return append(append(pl.changes, addons...), access...), nil
}

// UpgradeInfrastructure implements engine.InfraUpgrader: under the claim,
// each step reads EKS again (waiting out an update a killed run left
// running), so a run killed anywhere and run again finishes the work.
// Checkpoints: before-/after-aws-upgrade-cluster, -nodegroup-version,
// -nodegroup-create, -nodegroup-size, -nodegroup-delete.
func (p *Provider) UpgradeInfrastructure(ctx context.Context, name, region string, sink *event.Reporter) error {
	if err := p.Change.validate(); err != nil {
		return err
	}
	if err := p.Access.validate(); err != nil {
		return err
	}
	in, err := p.newInfra(ctx, name, region, sink)
	if err != nil {
		return err
	}
	c, ctx, err := in.acquireClaim(ctx, "upgrade")
	if err != nil {
		return err
	}
	defer c.release(ctx)
	p.checkpoint(ctx, "after-aws-claim")
	steps := []struct {
		point string
		run   func(context.Context) error
	}{
		{"cluster", in.upgradeCluster},
		{"nodegroup-version", in.upgradeNodegroupVersion},
		{"nodegroup-create", in.createReplacement},
		{"nodegroup-size", in.resizeNodegroup},
		{"nodegroup-delete", in.removeReplaced},
		{"addons", in.upgradeAddons},
		{"access", in.upgradeAccess},
	}
	for _, s := range steps {
		p.checkpoint(ctx, "before-aws-upgrade-"+s.point)
		if err := s.run(ctx); err != nil {
			return lostErr(ctx, err)
		}
		p.checkpoint(ctx, "after-aws-upgrade-"+s.point)
	}
	return nil
}

// settled waits until neither the cluster nor a kiln node group is
// UPDATING or CREATING (a killed run may have left an update running),
// then reads the state and plans from it.
func (in *infra) settled(ctx context.Context) (*infraState, *infraPlan, error) {
	var st *infraState
	err := poll(ctx, updateWaitLimit, func(ctx context.Context) (bool, error) {
		var err error
		if st, err = in.readState(ctx); err != nil {
			return false, err
		}
		if s := st.cluster.Status; s != ekstypes.ClusterStatusActive {
			if s == ekstypes.ClusterStatusFailed || s == ekstypes.ClusterStatusDeleting {
				return false, fmt.Errorf("EKS cluster %s is %s", in.name, s)
			}
			in.emit(KindEKSCluster, in.name, engine.StatusInProgress, "%s", s)
			return false, nil
		}
		for _, g := range st.groups {
			switch g.Status {
			case ekstypes.NodegroupStatusUpdating, ekstypes.NodegroupStatusCreating:
				in.emit(KindNodegroup, aws.ToString(g.NodegroupName), engine.StatusInProgress, "%s", g.Status)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, nil, err
	}
	pl, err := in.p.planUpgrade(in.name, st)
	return st, pl, err
}

// waitUpdate polls DescribeUpdate until the update succeeded (nodegroup
// "" for a cluster update), then waits until the object is ACTIVE again.
func (in *infra) waitUpdate(ctx context.Context, kind, obj, nodegroup string, up *ekstypes.Update) error {
	id := aws.ToString(up.Id)
	last := up.Status
	err := poll(ctx, updateWaitLimit, func(ctx context.Context) (bool, error) {
		din := &eks.DescribeUpdateInput{Name: aws.String(in.name), UpdateId: aws.String(id)}
		if nodegroup != "" {
			din.NodegroupName = aws.String(nodegroup)
		}
		out, err := in.eks.DescribeUpdate(ctx, din)
		if err != nil {
			return false, fmt.Errorf("describe update %s of %s: %w", id, obj, err)
		}
		switch s := out.Update.Status; s {
		case ekstypes.UpdateStatusSuccessful:
			return true, nil
		case ekstypes.UpdateStatusFailed, ekstypes.UpdateStatusCancelled:
			var why []string
			for _, e := range out.Update.Errors {
				why = append(why, fmt.Sprintf("%s: %s", e.ErrorCode, aws.ToString(e.ErrorMessage)))
			}
			return false, fmt.Errorf("update %s of %s %s: %s", id, obj, s, strings.Join(why, "; "))
		default:
			if s != last {
				in.emit(kind, obj, engine.StatusInProgress, "update %s %s", id, s)
				last = s
			}
			return false, nil
		}
	})
	if err != nil {
		return err
	}
	_, _, err = in.settled(ctx)
	return err
}

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
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/input"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/internal/exit"
)

// kiln upgrade aws: the infrastructure part (engine.InfraUpgrader).
//
// What is asked is the provider's Change (set by kiln upgrade's flags
// only: a provider built for anything else asks no change), with "unset"
// meaning "keep what runs": Nodes (0 = keep), InstanceType ("" = keep),
// KubernetesVersion ("" = keep). The order is EKS's: the control
// plane first (one minor version at a time; EKS refuses more, and never
// goes down, so kiln refuses both before anything is written, exit 2),
// then the node group — its Kubernetes version (UpdateNodegroupVersion,
// a rolling replacement of the nodes by EKS), its instance type, its size
// (UpdateNodegroupConfig) — and then, in the engine, the platform.
//
// Instance type. EKS cannot change the instance types of a managed node
// group made without a launch template (UpdateNodegroupConfig has no such
// field; kiln's group has no launch template). kiln therefore creates a
// replacement node group, named kiln-nodes-TYPE (dots as dashes) with the
// asked size and the cluster's version, waits until it is ACTIVE, then
// deletes the old group and waits until it is gone: capacity never drops
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

// validate checks what can be checked without AWS (exit 2 naming the
// field).
func (c Change) validate() error {
	if c.InstanceType != "" && !instanceTypeRE.MatchString(c.InstanceType) {
		return input.New(exit.BadInput, input.InstanceType, c.InstanceType, "{input}: %q is not an EC2 instance type (like t3.medium or m6i.large)", c.InstanceType)
	}
	if c.Nodes < 0 || c.Nodes > MaxNodes {
		return input.New(exit.BadInput, input.Nodes, fmt.Sprint(c.Nodes), "{input}: %d is out of range; a node group has 1 to %d nodes", c.Nodes, MaxNodes)
	}
	if c.KubernetesVersion != "" && !k8sVersionRE.MatchString(c.KubernetesVersion) {
		return input.New(exit.BadInput, input.KubernetesVersion, c.KubernetesVersion, "{input}: %q is not an EKS Kubernetes version (MAJOR.MINOR, like 1.31)", c.KubernetesVersion)
	}
	return nil
}

// updateWaitLimit bounds the wait for one EKS update (a control-plane
// version update takes EKS 8 to 10 minutes; a node group's rolling one
// longer with many nodes).
const updateWaitLimit = waitLimit

// ngState is a kiln node group as EKS describes it.
type ngState = ekstypes.Nodegroup

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
			return nil, input.New(exit.BadInput, input.KubernetesVersion, want, "{input} %s: EKS cluster %s runs Kubernetes %s, and EKS never downgrades a control plane; nothing was changed", want, name, have)
		case wm > hm+1:
			return nil, input.New(exit.BadInput, input.KubernetesVersion, want, "{input} %s: EKS cluster %s runs Kubernetes %s, and EKS upgrades a control plane one minor version at a time; nothing was changed. Upgrade to 1.%d first (`%s`), then on from there", want, name, have, hm+1, command("upgrade", name, p.Target(), "--kubernetes-version", fmt.Sprintf("1.%d", hm+1)))
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
		if failedCreate(g) != "" {
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
				Message: fmt.Sprintf("an earlier creation ended %s; deleted, then created again", failedCreate(g))})
			continue
		}
		pl.remove = append(pl.remove, n)
		pl.changes = append(pl.changes, engine.PlanChange{Action: platform.ActionDelete, Kind: KindNodegroup, Name: n,
			Message: fmt.Sprintf("runs no node (%s): deleted", failedCreate(g))})
	}
	return pl, nil
}

// readState reads the EKS cluster and its kiln node groups. It writes
// nothing.
func (in *infra) readState(ctx context.Context) (*infraState, error) {
	out, err := in.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(in.name)})
	switch {
	case apiCode(err) == "ResourceNotFoundException":
		return nil, fmt.Errorf("EKS cluster %s not found in %s; kiln upgrade changes an existing cluster (`%s` makes one)", in.name, in.region, command("create", in.name, in.region))
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

// planAddons lists the managed add-ons an upgrade to Kubernetes version
// creates (a cluster made before kiln managed them) or moves to that
// version's default. It only reads.
func (in *infra) planAddons(ctx context.Context, version string) ([]engine.PlanChange, error) {
	var out []engine.PlanChange
	for _, a := range managedAddons {
		want, err := in.defaultAddonVersion(ctx, a.name, version)
		if err != nil {
			if in.unsupported(err) {
				return nil, nil
			}
			return nil, err
		}
		d, err := in.eks.DescribeAddon(ctx, &eks.DescribeAddonInput{ClusterName: aws.String(in.name), AddonName: aws.String(a.name)})
		switch {
		case apiCode(err) == "ResourceNotFoundException":
			msg := "EKS managed add-on " + want + ", upgraded with the cluster from now on"
			if a.config != "" {
				msg += "; configuration " + a.config
			}
			out = append(out, engine.PlanChange{Action: platform.ActionCreate, Kind: KindAddon, Name: a.name, Fields: []string{"addonVersion", "configurationValues"}, Message: msg})
		case err != nil:
			return nil, fmt.Errorf("describe add-on %s: %w", a.name, err)
		default:
			var fields []string
			var why []string
			if have := aws.ToString(d.Addon.AddonVersion); have != want {
				fields = append(fields, "addonVersion")
				why = append(why, fmt.Sprintf("%s → %s (the default for Kubernetes %s)", have, want, version))
			}
			if a.config != "" && !sameJSON(aws.ToString(d.Addon.ConfigurationValues), a.config) {
				fields = append(fields, "configurationValues")
				why = append(why, "configuration "+a.config)
			}
			if len(fields) > 0 {
				out = append(out, engine.PlanChange{Action: platform.ActionUpdate, Kind: KindAddon, Name: a.name, Fields: fields, Message: strings.Join(why, "; ") + ", after the node groups"})
			}
		}
	}
	return out, nil
}

// UpgradeInfrastructure implements engine.InfraUpgrader: under the claim,
// each step reads EKS again (waiting out an update a killed run left
// running), so a run killed anywhere and run again finishes the work.
// Checkpoints: before-/after-aws-upgrade-cluster, -nodegroup-version,
// -nodegroup-create, -nodegroup-size, -nodegroup-delete.
func (p *Provider) UpgradeInfrastructure(ctx context.Context, name, region string, sink engine.Sink) error {
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
	engine.Checkpoint(ctx, "after-aws-claim")
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
		engine.Checkpoint(ctx, "before-aws-upgrade-"+s.point)
		if err := s.run(ctx); err != nil {
			return lostErr(ctx, err)
		}
		engine.Checkpoint(ctx, "after-aws-upgrade-"+s.point)
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

func (in *infra) upgradeCluster(ctx context.Context) error {
	st, pl, err := in.settled(ctx)
	if err != nil {
		return in.fail(KindEKSCluster, in.name, err)
	}
	if pl.version == "" {
		return nil
	}
	// EKS moves the control plane only while every node group runs its
	// version: a group an interrupted upgrade left behind catches up first.
	for _, g := range st.groups {
		if aws.ToString(g.Version) != pl.from {
			if err := in.nodegroupVersion(ctx, aws.ToString(g.NodegroupName), aws.ToString(g.Version), pl.from); err != nil {
				return err
			}
		}
	}
	in.emit(KindEKSCluster, in.name, engine.StatusInProgress, "updating Kubernetes %s → %s", pl.from, pl.version)
	out, err := in.eks.UpdateClusterVersion(ctx, &eks.UpdateClusterVersionInput{Name: aws.String(in.name), Version: aws.String(pl.version)})
	if err != nil {
		return in.fail(KindEKSCluster, in.name, fmt.Errorf("update EKS cluster %s to Kubernetes %s: %w", in.name, pl.version, err))
	}
	engine.Checkpoint(ctx, "aws-upgrade-cluster-requested")
	if err := in.waitUpdate(ctx, KindEKSCluster, in.name, "", out.Update); err != nil {
		return in.fail(KindEKSCluster, in.name, err)
	}
	in.emit(KindEKSCluster, in.name, engine.StatusCurrent, "ACTIVE, Kubernetes %s", pl.version)
	return nil
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

// The infrastructure of a kiln EKS cluster as ordered procedures over the
// resource families of network.go, iam.go, cluster.go, nodegroup.go,
// addons.go and access.go: EnsureInfrastructure creates in dependency
// order, each step a checkpoint with its own resource events;
// DestroyInfrastructure deletes in reverse order and verifies the
// inventory is empty; upgrade.go plans and applies changes.

package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/input"
)

// Kinds of the resource events the aws provider emits.
const (
	KindVPC             = "VPC"
	KindSubnet          = "Subnet"
	KindInternetGateway = "InternetGateway"
	KindRouteTable      = "RouteTable"
	KindSecurityGroup   = "SecurityGroup"
	KindIAMRole         = "IAMRole"
	KindEKSCluster      = "EKSCluster"
	KindNodegroup       = "Nodegroup"
)

// waitLimit bounds the wait for the EKS cluster and node group to become
// ACTIVE (real EKS takes 10 to 15 minutes for a cluster).
const waitLimit = 30 * time.Minute

// deleteLimit bounds the wait for one deletion to be confirmed (EKS takes
// minutes; EC2 resources report DependencyViolation while EKS's network
// interfaces are still being released).
const deleteLimit = 20 * time.Minute

// infra is one run of the infrastructure steps in one region.
type infra struct {
	p      *Provider
	name   string
	region string
	sink   *event.Reporter
	cfg    aws.Config
	ec2    *ec2.Client
	iam    *iam.Client
	eks    *eks.Client

	vpcID     string
	subnetIDs []string
	igwID     string
	sgID      string
	roleARNs  map[string]string
	cluster   *ekstypes.Cluster
}

func (p *Provider) newInfra(ctx context.Context, name, region string, sink *event.Reporter) (*infra, error) {
	cfg, err := p.longConfig(ctx, region)
	if err != nil {
		return nil, err
	}
	return &infra{
		p: p, name: name, region: region, sink: sink, cfg: cfg,
		ec2: ec2.NewFromConfig(cfg), iam: iam.NewFromConfig(cfg), eks: eks.NewFromConfig(cfg),
		roleARNs: map[string]string{},
	}, nil
}

// EnsureInfrastructure implements engine.Provider: each step looks its
// resource up by tag and creates it only when missing, so a run killed at
// any point and run again creates no duplicates. The crash hook names each
// step (before-aws-vpc, after-aws-vpc, …, after-aws-nodegroup).
func (p *Provider) EnsureInfrastructure(ctx context.Context, name, region string, sink *event.Reporter) (engine.Location, bool, error) {
	if err := p.ValidateFlags(); err != nil {
		return engine.Location{}, false, err
	}
	in, err := p.newInfra(ctx, name, region, sink)
	if err != nil {
		return engine.Location{}, false, err
	}
	// Nothing is created before the claim is held: two hosts never both
	// create a VPC (or roles, cluster, node group) for one NAME.
	c, ctx, err := in.acquireClaim(ctx, "create")
	if err != nil {
		return engine.Location{}, false, err
	}
	defer c.release(ctx)
	p.checkpoint(ctx, "after-aws-claim")
	steps := []struct {
		kind string
		run  func(context.Context) error
	}{
		{KindVPC, in.ensureVPC},
		{KindSubnet, in.ensureSubnets},
		{KindInternetGateway, in.ensureIGW},
		{KindRouteTable, in.ensureRouteTable},
		{KindSecurityGroup, in.ensureSecurityGroup},
		{KindIAMRole, in.ensureRoles},
		{KindEKSCluster, in.ensureCluster},
		{KindAccessEntry, in.ensureAccess},
		{KindLaunchTemplate, in.ensureLaunchTemplate},
		{KindNodegroup, in.ensureNodegroup},
		{KindAddon, in.ensureAddons},
	}
	for _, s := range steps {
		p.checkpoint(ctx, "before-aws-"+strings.ToLower(s.kind))
		if err := s.run(ctx); err != nil {
			return engine.Location{}, false, lostErr(ctx, err)
		}
		p.checkpoint(ctx, "after-aws-"+strings.ToLower(s.kind))
	}
	if p.WriteKubeconfig != "" {
		warnings, err := WriteKubeconfig(ctx, p.WriteKubeconfig, KubeconfigEntry{
			Cluster: name, Region: region, Profile: p.Profile, KilnPath: p.KilnPath,
			Endpoint: aws.ToString(in.cluster.Endpoint), CAData: caData(in.cluster),
			LockWait: p.limits().KubeconfigLockWait, Hooks: p.Hooks,
		})
		for _, w := range warnings {
			logf(sink, engine.LevelWarn, "kubeconfig %s: %s", p.WriteKubeconfig, w)
		}
		if err != nil {
			return engine.Location{}, false, err
		}
		logf(sink, engine.LevelInfo, "kubeconfig %s: context %s uses `kiln aws token` (no static secret)", p.WriteKubeconfig, ContextName(name))
	}
	rc, cs, err := p.kubeClient(ctx, in.cfg, in.cluster)
	if err != nil {
		return engine.Location{}, false, err
	}
	// The viewers' group gets the support role (access.go) once a viewer
	// is named.
	if len(p.Access.Viewers) > 0 {
		p.checkpoint(ctx, "before-aws-supportrbac")
		if err := in.ensureSupportRBAC(ctx, cs); err != nil {
			return engine.Location{}, false, lostErr(ctx, err)
		}
		p.checkpoint(ctx, "after-aws-supportrbac")
	}
	return engine.Location{Name: region, Cluster: name, Infra: engine.InfraPresent, Client: cs, REST: rc}, false, nil
}

func (in *infra) emit(kind, name string, status event.Status, format string, args ...any) {
	emit(in.sink, kind, name, status, fmt.Sprintf(format, args...))
}

// fail reports the resource failed with err, an input it names worded by
// the frontend (the wizard's field, the CLI's flag), and returns err.
func (in *infra) fail(kind, name string, err error) error {
	in.emit(kind, name, engine.StatusFailed, "%s", input.Render(err, in.p.namer))
	return err
}

// errPollLimit is returned when poll's limit passes.
var errPollLimit = errors.New("gave up waiting")

// poll asks check until it reports done, with a backoff from 1s to 15s
// (EKS has no watch API; its own waiters poll the same way). check runs at
// once first, so a resource that is already there costs no delay.
func poll(ctx context.Context, limit time.Duration, check func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	delay := time.Second
	for {
		done, err := check(ctx)
		if err != nil || done {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%w after %s", errPollLimit, limit)
			}
			return ctx.Err()
		case <-t.C:
		}
		delay = min(delay*2, 15*time.Second)
	}
}

// Inventory is every kiln resource of one cluster in one region (IAM roles
// are global), by kind, found by tag: what destroy must remove and what
// tests count.
type Inventory map[string][]string

// Inventory lists the resources tagged kiln.dev/cluster=name in region.
func (p *Provider) Inventory(ctx context.Context, name, region string) (Inventory, error) {
	in, err := p.newInfra(ctx, name, region, nil)
	if err != nil {
		return nil, err
	}
	return in.inventory(ctx)
}

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

func (in *infra) inventory(ctx context.Context) (Inventory, error) {
	inv := Inventory{}
	for _, family := range []func(context.Context, Inventory) error{in.networkInventory, in.roleInventory, in.clusterInventory, in.launchTemplateInventory} {
		if err := family(ctx, inv); err != nil {
			return nil, err
		}
	}
	return inv, nil
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
// finally verifies that nothing tagged remains. Before the node groups it
// deletes, through the cluster's API, the LoadBalancer Services and
// Ingresses (lb.go) and the Fargate profiles; after the cluster it sweeps
// kiln's VPC by ID (sweep.go). What kiln will not delete fails the run
// within about a minute, naming it (Limits.Dependency).
//
// An endpoint that is not AWS may lack DeleteRouteTable (kumo); the route
// table is then reported as left behind by the emulator, not as an error.
func (p *Provider) DestroyInfrastructure(ctx context.Context, name, region string, sink *event.Reporter) (bool, error) {
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
		// Through the cluster's API while it is served (lb.go).
		{KindLoadBalancer, in.deleteLoadBalancers},
		{KindFargateProfile, in.deleteFargateProfiles},
		{KindNodegroup, in.deleteNodegroups},
		{KindLaunchTemplate, in.deleteLaunchTemplates},
		{KindEKSCluster, in.deleteCluster},
		{KindIAMRole, in.deleteRoles},
		// The VPC sweep, by VPC ID (sweep.go), before the subnets.
		{KindNetworkInterface, in.deleteNetworkInterfaces},
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
		p.checkpoint(ctx, "before-aws-delete-"+strings.ToLower(s.kind))
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
		return false, fmt.Errorf("destroy of %s in %s left resources tagged %s=%s: %s; run `%s` again", name, region, TagCluster, name, inv, p.command("destroy", name, region))
	}
	if p.KubeconfigFile != "" {
		removed, warnings, err := removeKubeconfig(ctx, p.KubeconfigFile, name, p.limits().KubeconfigLockWait, p.Hooks)
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

package aws

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/platform"
)

// searchRegions returns the regions discovery scans — --regions, else the
// regions DescribeRegions says are enabled, else the built-in list; plus
// --region — and the regions kiln knows exist (the built-in list, --regions
// and DescribeRegions' answer): a --region outside them is bad input.
func (p *Provider) searchRegions(ctx context.Context) (search, known []string) {
	known = slices.Clone(Regions)
	known = append(known, p.SearchRegions...)
	if len(p.SearchRegions) > 0 {
		search = slices.Clone(p.SearchRegions)
	} else {
		described := p.describeRegions(ctx)
		known = append(known, described...)
		search = described
		if len(search) == 0 {
			search = slices.Clone(Regions)
		}
	}
	if p.Region != "" && slices.Contains(known, p.Region) && !slices.Contains(search, p.Region) {
		search = append(search, p.Region)
	}
	sort.Strings(search)
	return slices.Compact(search), known
}

// describeRegions asks EC2 for the account's enabled regions; nil when the
// API does not answer (an emulator, no permission), bounded by a short
// timeout so a slow answer never delays discovery much.
func (p *Provider) describeRegions(ctx context.Context) []string {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	cfg, err := p.config(ctx, p.regionOr(Regions))
	if err != nil {
		return nil
	}
	out, err := ec2.NewFromConfig(cfg).DescribeRegions(ctx, &ec2.DescribeRegionsInput{})
	if err != nil {
		return nil
	}
	var names []string
	for _, r := range out.Regions {
		if r.RegionName != nil {
			names = append(names, *r.RegionName)
		}
	}
	return names
}

// Discover implements engine.Provider: every region, in parallel (at most
// Concurrency at once, each bounded by Timeout). A region that fails is a
// Location with Err set, not an error of the operation.
func (p *Provider) Discover(ctx context.Context, name string) ([]engine.Location, error) {
	return p.eachRegion(ctx, nil, func(region string, timeout time.Duration) []engine.Location {
		return []engine.Location{p.inspectBounded(ctx, region, name, timeout)}
	})
}

// eachRegion checks the flags and credentials, then runs search on every
// region to search, at most Concurrency at a time, each with the
// per-region bound, and returns their locations in region order. progress
// (nil: nobody) hears each region's search start and end.
func (p *Provider) eachRegion(ctx context.Context, progress func(engine.SearchProgress), search func(region string, timeout time.Duration) []engine.Location) ([]engine.Location, error) {
	if err := p.ValidateFlags(); err != nil {
		return nil, err
	}
	if err := p.validateCredentials(ctx); err != nil {
		return nil, err
	}
	regions, known := p.searchRegions(ctx)
	if err := p.checkRegion(known); err != nil {
		return nil, err
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	conc := p.Concurrency
	if conc <= 0 {
		conc = DefaultConcurrency
	}
	perRegion := make([][]engine.Location, len(regions))
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for i, r := range regions {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				perRegion[i] = []engine.Location{{Name: r, Infra: engine.InfraUnreachable, Err: ctx.Err()}}
				return
			}
			defer func() { <-sem }()
			engine.ReportSearch(progress, "aws", r, false)
			perRegion[i] = search(r, timeout)
			engine.ReportSearch(progress, "aws", r, true, perRegion[i]...)
		})
	}
	wg.Wait()
	var out []engine.Location
	for _, locs := range perRegion {
		out = append(out, locs...)
	}
	return out, ctx.Err()
}

// InspectLocation implements engine.LocationInspector: one region, within
// the same bound as discovery.
func (p *Provider) InspectLocation(ctx context.Context, name, region string) engine.Location {
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return p.inspectBounded(ctx, region, name, timeout)
}

// inspectBounded inspects a region within timeout, whatever it waits on
// (credential chain, AWS APIs, the cluster's API): a region that does not
// answer in time is abandoned and reported.
func (p *Provider) inspectBounded(ctx context.Context, region, name string, timeout time.Duration) engine.Location {
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan engine.Location, 1)
	go func() { done <- p.inspect(rctx, region, name) }()
	var loc engine.Location
	select {
	case loc = <-done:
	case <-rctx.Done():
		select {
		case loc = <-done: // it gave up on its own
		case <-time.After(250 * time.Millisecond):
			loc = engine.Location{Name: region, Infra: engine.InfraUnreachable, Err: fmt.Errorf("region %s: no answer within %s", region, timeout)}
			if ctx.Err() != nil {
				loc.Err = ctx.Err()
			}
		}
	}
	loc.Elapsed = time.Since(start)
	return loc
}

// found is what one region holds for kiln.
type found struct {
	cluster  *ekstypes.Cluster // the kiln EKS cluster (nil if none)
	kilnName string            // its kiln.dev/cluster tag
	vpc      bool              // a VPC tagged for name exists (partial infra)
}

func (p *Provider) inspect(ctx context.Context, region, name string) engine.Location {
	loc := engine.Location{Name: region, Infra: engine.InfraAbsent}
	cfg, err := p.config(ctx, region)
	if err != nil {
		loc.Infra, loc.Err = engine.InfraUnreachable, err
		return loc
	}
	// The EKS listing and the VPC lookup are independent: run them together
	// so a region costs one round trip of latency, not two.
	var f found
	var eksErr, vpcErr error
	var wg sync.WaitGroup
	wg.Go(func() { f.cluster, f.kilnName, eksErr = findCluster(ctx, eks.NewFromConfig(cfg), name) })
	wg.Go(func() {
		var vpcs []ec2types.Vpc
		vpcs, vpcErr = findVPCs(ctx, ec2.NewFromConfig(cfg), name)
		f.vpc = len(vpcs) > 0
	})
	wg.Wait()
	if eksErr != nil {
		loc.Infra, loc.Err = engine.InfraUnreachable, fmt.Errorf("region %s: %w", region, eksErr)
		return loc
	}
	if vpcErr != nil {
		loc.Infra, loc.Err = engine.InfraUnreachable, fmt.Errorf("region %s: %w", region, vpcErr)
		return loc
	}
	switch {
	case f.cluster == nil && f.vpc:
		loc.Cluster, loc.Infra = name, engine.InfraPartial
		return loc
	case f.cluster == nil:
		return loc
	}
	loc.Cluster = f.kilnName
	loc.Infra = engine.InfraPartial
	// An UPDATING cluster (an upgrade's version update) keeps serving its
	// Kubernetes API, as EKS promises: it is there, platform and all.
	serving := f.cluster.Status == ekstypes.ClusterStatusActive || f.cluster.Status == ekstypes.ClusterStatusUpdating
	if !serving {
		return loc
	}
	loc.Infra = engine.InfraPresent
	rc, cs, err := p.kubeClient(ctx, cfg, f.cluster)
	if err != nil {
		loc.Err = err
		return loc
	}
	st, err := platform.Read(ctx, cs)
	if err != nil {
		loc.Err = fmt.Errorf("region %s: EKS cluster %s unreachable: %w", region, aws.ToString(f.cluster.Name), err)
		return loc
	}
	loc.State, loc.Client, loc.REST = st, cs, rc
	return loc
}

// findCluster returns the region's EKS cluster of the kiln cluster name:
// kiln names the EKS cluster NAME and tags it kiln.dev/cluster=NAME, so the
// listing is searched for NAME and the tag confirms it is kiln's. Other
// kiln clusters in the region are not reported: a region hosts any number
// of EKS clusters, and a Location carries the one this operation is about.
func findCluster(ctx context.Context, c *eks.Client, name string) (*ekstypes.Cluster, string, error) {
	listed := false
	pg := eks.NewListClustersPaginator(c, &eks.ListClustersInput{})
	for pg.HasMorePages() && !listed {
		out, err := pg.NextPage(ctx)
		if err != nil {
			return nil, "", fmt.Errorf("list EKS clusters: %w", err)
		}
		listed = slices.Contains(out.Clusters, name)
	}
	if !listed {
		return nil, "", nil
	}
	out, err := c.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
	switch {
	case apiCode(err) == "ResourceNotFoundException":
		return nil, "", nil // deleted between list and describe
	case err != nil:
		return nil, "", fmt.Errorf("describe EKS cluster %s: %w", name, err)
	case out.Cluster.Tags[TagCluster] != name:
		return nil, "", nil // an EKS cluster kiln did not create
	}
	return out.Cluster, name, nil
}

// ListClusters implements engine.Lister: every kiln cluster in every
// region searched — each EKS cluster tagged kiln.dev/cluster with its own
// name — one Location each, inspected as Discover inspects a named one and
// within the same per-region bound. A region holding none is one Location
// without a cluster; a region that cannot be searched is one Location with
// its error. Infrastructure left without its EKS cluster (a VPC only) is
// not listed: only a NAME finds it.
func (p *Provider) ListClusters(ctx context.Context, progress func(engine.SearchProgress)) ([]engine.Location, error) {
	return p.eachRegion(ctx, progress, func(region string, timeout time.Duration) []engine.Location {
		return p.listRegion(ctx, region, timeout)
	})
}

// listRegion finds the kiln clusters of one region and inspects each.
func (p *Provider) listRegion(ctx context.Context, region string, timeout time.Duration) []engine.Location {
	start := time.Now()
	lctx, cancel := context.WithTimeout(ctx, timeout)
	names, err := p.kilnClusters(lctx, region)
	cancel()
	if err != nil {
		if lctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("region %s: no answer within %s", region, timeout)
		}
		return []engine.Location{{Name: region, Infra: engine.InfraUnreachable, Err: err, Elapsed: time.Since(start)}}
	}
	if len(names) == 0 {
		return []engine.Location{{Name: region, Infra: engine.InfraAbsent, Elapsed: time.Since(start)}}
	}
	locs := make([]engine.Location, len(names))
	var wg sync.WaitGroup
	sem := make(chan struct{}, describeConcurrency)
	for i, n := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			locs[i] = p.inspectBounded(ctx, region, n, timeout)
		})
	}
	wg.Wait()
	return locs
}

// describeConcurrency bounds the DescribeCluster calls (and the
// inspections of the clusters found) in flight at once in one region: a
// region holding hundreds of EKS clusters is described a few at a time,
// not in one burst that EKS's request rate limit would throttle (and that
// the 3-attempt retryer of discovery would then report as a failure).
const describeConcurrency = 8

// kilnClusters lists the EKS clusters of region that kiln created: those
// tagged kiln.dev/cluster with their own name.
func (p *Provider) kilnClusters(ctx context.Context, region string) ([]string, error) {
	cfg, err := p.config(ctx, region)
	if err != nil {
		return nil, err
	}
	c := eks.NewFromConfig(cfg)
	var all []string
	pg := eks.NewListClustersPaginator(c, &eks.ListClustersInput{})
	for pg.HasMorePages() {
		out, err := pg.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("region %s: list EKS clusters: %w", region, err)
		}
		all = append(all, out.Clusters...)
	}
	var mu sync.Mutex
	var names []string
	var firstErr error
	var wg sync.WaitGroup
	sem := make(chan struct{}, describeConcurrency)
	for _, n := range all {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("region %s: describe EKS cluster %s: %w", region, n, ctx.Err())
				}
				mu.Unlock()
				return
			}
			defer func() { <-sem }()
			out, err := c.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(n)})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case apiCode(err) == "ResourceNotFoundException": // deleted since the listing
			case err != nil:
				if firstErr == nil {
					firstErr = fmt.Errorf("region %s: describe EKS cluster %s: %w", region, n, err)
				}
			case out.Cluster.Tags[TagCluster] == n:
				names = append(names, n)
			}
		})
	}
	wg.Wait()
	slices.Sort(names)
	return names, firstErr
}

package engine

import (
	"context"
	"time"

	"github.com/kilnctl/kiln/engine/project"
)

// ClusterSummary is one location discovery found, for a frontend's list
// of clusters.
type ClusterSummary struct {
	Provider, Name, Location string
	// Platform is PlatformInstalled or PlatformAbsent ("?" when the
	// location could not be inspected).
	Platform string
	KeyIDs   []string
	// TokenDir is a local token dir holding a key the cluster trusts, found
	// and validated as create and status find it ("" if none).
	TokenDir string
	// Err says why the location could not be inspected.
	Err string
	// Version is the kiln version that last installed or upgraded the
	// platform, as kiln-config records it ("" when unknown).
	Version string
	// Projects is how many projects the platform holds (-1 when they could
	// not be read; 0 without a platform).
	Projects int
}

// DiscoverClusters searches every location of p for kiln clusters and
// emits the discovery event, as create's discover phase does. Each cluster
// found gets the token dir create would use: a candidate (tokenDir, the
// keyring entry, the default path) that loads and validates with
// creds.Load and holds a key id kiln-auth trusts. Nothing is changed.
func (e *Engine) DiscoverClusters(ctx context.Context, p Provider, tokenDir string) ([]ClusterSummary, error) {
	ctx = e.traced(ctx)
	return e.discoverClusters(ctx, p, tokenDir, nil)
}

// discoverClusters is DiscoverClusters telling progress (nil: nobody)
// each location's search, for the providers that search one by one.
func (e *Engine) discoverClusters(ctx context.Context, p Provider, tokenDir string, progress func(SearchProgress)) ([]ClusterSummary, error) {
	// The provider's messages (a credential plugin refused the terminal)
	// in the frontend's words, as a request's are.
	e.hinted(Target{Provider: p})
	start := time.Now()
	var locs []Location
	var err error
	if l, ok := p.(Lister); ok {
		locs, err = l.ListClusters(ctx, progress)
	} else {
		locs, err = p.Discover(ctx, "")
	}
	if err != nil {
		return nil, err
	}
	searched, skipped := splitSkipped(locs)
	e.report(Target{Provider: p}, searched, skipped, nil, time.Since(start), SourceDiscovery)
	var out []ClusterSummary
	for _, l := range searched {
		if l.Err != nil {
			out = append(out, ClusterSummary{Provider: p.Name(), Name: l.Cluster, Location: l.Name, Platform: "?", Err: l.Err.Error()})
			continue
		}
		if l.Cluster == "" || l.State == nil {
			continue
		}
		c := ClusterSummary{Provider: p.Name(), Name: l.Cluster, Location: l.Name, Platform: PlatformAbsent, KeyIDs: l.State.KeyIDs()}
		if l.State.PartlyRemoved() {
			c.Platform = PlatformPartlyRemoved
		} else if l.State.Installed {
			c.Platform = PlatformInstalled
			c.Version = l.State.Version
			if l.Client != nil {
				c.Projects = countProjects(ctx, l.Client, l.Cluster, l.State)
			}
		}
		cands, err := e.candidates(p.Name(), l.Cluster, tokenDir)
		if err != nil {
			return nil, err
		}
		// A broken dir or one of another cluster is not trusted; create
		// refuses it and says why.
		if td, _, err := findTrusted(cands, p.Name(), l.Cluster, l.State.Keys); err == nil && td != nil {
			c.TokenDir = td.Path
		}
		out = append(out, c)
	}
	cleanDeep(&out)
	return out, nil
}

// Inspect reads one cluster for a frontend that refreshes it every few
// seconds: the status at the location req's provider targets (when the
// provider can inspect one location alone, nothing else is searched),
// with its projects' token sync and creation times and the stacks of
// kiln-config. Unlike Status it emits no result event.
func (e *Engine) Inspect(ctx context.Context, t Target) (*ClusterStatus, error) {
	ctx = e.traced(ctx)
	t = e.hinted(t)
	return e.status(ctx, StatusRequest{Target: t})
}

// Token sync of a project (ProjectStatus.TokenSync).
const (
	TokenInSync    = project.TokenInSync
	TokenOutOfSync = project.TokenOutOfSync
	TokenUnknown   = project.TokenUnknown
)

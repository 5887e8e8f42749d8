package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/project"
	"github.com/kilnctl/kiln/internal/human"
)

// ListRequest is what List needs.
type ListRequest struct {
	// Providers are searched because the user named them: one that cannot
	// be searched at all fails the list with its error.
	Providers []Provider
	// Optional providers are searched because this machine is set up for
	// them (AWS configured, say): one that cannot be searched is one row
	// saying why, not a failure.
	Optional []Provider
	// TokenDir is the token dir the user named ("" to look it up).
	TokenDir string
	// Progress, when set, hears each location's search start and end
	// from providers that search locations one by one (the aws provider's
	// regions, Lister), concurrently: the wizard's spinner per region.
	Progress func(SearchProgress)
}

// List finds every kiln cluster in every location of every provider, all
// providers in parallel, and emits one cluster event per cluster and per
// location that could not be inspected, then a result. Unreachable
// locations are reported, never fatal. Nothing is changed.
func (e *Engine) List(ctx context.Context, req ListRequest) ([]ClusterSummary, error) {
	ctx = e.traced(ctx)
	all := append(append([]Provider{}, req.Providers...), req.Optional...)
	rows := make([][]ClusterSummary, len(all))
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, p := range all {
		wg.Go(func() { rows[i], errs[i] = e.discoverClusters(ctx, p, req.TokenDir, req.Progress) })
	}
	wg.Wait()
	var out []ClusterSummary
	var failed error
	for i, p := range all {
		if errs[i] != nil {
			if i < len(req.Providers) {
				if failed == nil {
					failed = fmt.Errorf("list %s clusters: %w", p.Name(), errs[i])
				}
				continue
			}
			// One row says why, where the provider's clusters would be.
			out = append(out, ClusterSummary{Provider: p.Name(), Location: "every " + p.Nouns().Location, Platform: "?", Err: renderError(errs[i], e.Namer)})
			continue
		}
		out = append(out, rows[i]...)
	}
	for _, c := range out {
		e.emit(&c)
	}
	if failed != nil {
		return out, e.finish(failed, "", "")
	}
	return out, e.finish(nil, listSummary(out), "")
}

func listSummary(rows []ClusterSummary) string {
	clusters, unreachable := 0, 0
	by := map[string]int{}
	for _, r := range rows {
		if r.Err != "" {
			unreachable++
		}
		if r.Name != "" {
			clusters++
			by[r.Provider]++
		}
	}
	var parts []string
	for p, n := range by {
		parts = append(parts, fmt.Sprintf("%d %s", n, p))
	}
	sort.Strings(parts)
	msg := fmt.Sprintf("%d kiln cluster%s", clusters, human.Plural(clusters))
	if len(parts) > 0 {
		msg += " (" + strings.Join(parts, ", ") + ")"
	}
	if unreachable > 0 {
		msg += fmt.Sprintf("; %d location%s could not be inspected", unreachable, human.Plural(unreachable))
	}
	return msg
}

// countProjects counts the projects of an installed platform: the project
// spec ConfigMaps in its tenants' namespaces (one list per tenant, in
// parallel; no cluster-wide read). -1 when they cannot be read.
func countProjects(ctx context.Context, cs kubernetes.Interface, cluster string, st *platform.State) int {
	if st == nil || st.Config == nil {
		return 0
	}
	tenants := st.Config.Spec.Tenants
	counts := make([]int, len(tenants))
	var wg sync.WaitGroup
	for i, t := range tenants {
		wg.Go(func() {
			list, err := cs.CoreV1().ConfigMaps(platform.TenantNamespace(t)).List(ctx, metav1.ListOptions{
				LabelSelector: project.LabelCluster + "=" + cluster + "," + project.LabelProject,
			})
			if err != nil {
				counts[i] = -1
				return
			}
			for _, cm := range list.Items {
				if strings.HasPrefix(cm.Name, project.SpecName("")) {
					counts[i]++
				}
			}
		})
	}
	wg.Wait()
	n := 0
	for _, c := range counts {
		if c < 0 {
			return -1
		}
		n += c
	}
	return n
}

package bench

import (
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kilnctl/kiln/internal/testenv/faultproxy"
	"github.com/kilnctl/kiln/internal/testenv/testcluster"
)

// apiProxy is a counting reverse proxy in front of the API server: the
// project's fault proxy (internal/testenv/faultproxy), with no faults unless a
// benchmark sets them through Fault. Clients reach it through Kubeconfig
// (context ContextName); it terminates TLS itself and forwards with the
// cluster's own transport, so what it counts is exactly what the client
// sent.
type apiProxy struct {
	Kubeconfig  string
	ContextName string
	Fault       *faultproxy.Proxy

	mu     sync.Mutex
	counts apiCounts
}

// apiCounts are the requests of one measured span.
type apiCounts struct {
	Reads   int            // GET: get, list and watch
	Lists   int            // of the reads, LISTs: a collection without watch=true
	Watches int            // of the reads, watches (watch=true)
	DryRun  map[string]int // writes with dryRun=All (never persisted) by "VERB resource/name"
	Writes  map[string]int // persisted writes by "VERB resource/name"
}

func startAPIProxy(b *testing.B, c *testcluster.Cluster, contextName string) *apiProxy {
	b.Helper()
	p := &apiProxy{ContextName: contextName, counts: newAPICounts()}
	fp, err := faultproxy.Start(faultproxy.Options{
		Upstream: c.RESTConfig,
		Seed:     1,
		HTTP2:    true, // as client-go talks to a real API server
		Observe:  p.count,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(fp.Close)
	p.Fault = fp
	p.Kubeconfig = filepath.Join(b.TempDir(), "kubeconfig")
	if err := fp.Kubeconfig(p.Kubeconfig, contextName); err != nil {
		b.Fatal(err)
	}
	return p
}

func (p *apiProxy) count(r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		p.counts.Reads++
		switch {
		case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
			p.counts.Watches++
		case isCollection(r.URL.Path):
			p.counts.Lists++
		}
	case slices.Contains(r.URL.Query()["dryRun"], "All"):
		p.counts.DryRun[r.Method+" "+resourcePath(r.URL.Path)]++
	default:
		p.counts.Writes[r.Method+" "+resourcePath(r.URL.Path)]++
	}
}

// take returns the counts since the last take and starts afresh.
func (p *apiProxy) take() apiCounts {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.counts
	p.counts = newAPICounts()
	return c
}

func newAPICounts() apiCounts {
	return apiCounts{DryRun: map[string]int{}, Writes: map[string]int{}}
}

// resourcePath shortens an API path to "resource/name" (or "resource" for a
// collection), e.g. /apis/coordination.k8s.io/v1/namespaces/kiln-system/leases/kiln-lock
// to leases/kiln-lock.
func resourcePath(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return path
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	return strings.Join(parts, "/")
}

// isCollection says whether an API path names a collection of a resource
// (a LIST when read), not one object: /api/v1/namespaces/N/configmaps,
// /apis/apps/v1/deployments, but not .../configmaps/NAME, /api/v1/namespaces/N
// or discovery paths like /api/v1.
func isCollection(path string) bool {
	p := strings.Trim(path, "/")
	if !strings.HasPrefix(p, "api/") && !strings.HasPrefix(p, "apis/") {
		return false
	}
	rp := resourcePath(path)
	parts := strings.Split(p, "/")
	min := 3 // api/v1/RESOURCE
	if parts[0] == "apis" {
		min = 4 // apis/GROUP/VERSION/RESOURCE
	}
	return len(parts) >= min && !strings.Contains(rp, "/")
}

// Total is every request: reads and writes, dry-run or persisted.
func (c apiCounts) Total() int {
	return c.Reads + c.DryRuns() + sum(c.Writes, func(string) bool { return true })
}

func (c *apiCounts) add(o apiCounts) {
	if c.Writes == nil {
		*c = newAPICounts()
	}
	c.Reads += o.Reads
	c.Lists += o.Lists
	c.Watches += o.Watches
	for k, v := range o.DryRun {
		c.DryRun[k] += v
	}
	for k, v := range o.Writes {
		c.Writes[k] += v
	}
}

// DryRuns are the dryRun=All writes.
func (c apiCounts) DryRuns() int { return sum(c.DryRun, func(string) bool { return true }) }

// LeaseWrites are the writes of coordination Leases (kiln's lock).
func (c apiCounts) LeaseWrites() int { return sum(c.Writes, isLease) }

// OtherWrites are every persisted write except the lock's.
func (c apiCounts) OtherWrites() int {
	return sum(c.Writes, func(k string) bool { return !isLease(k) })
}

func sum(m map[string]int, keep func(string) bool) int {
	n := 0
	for k, v := range m {
		if keep(k) {
			n += v
		}
	}
	return n
}

func isLease(key string) bool {
	return strings.Contains(key, " leases/") || strings.HasSuffix(key, " leases")
}

func (c apiCounts) String() string {
	list := func(m map[string]int, keep func(string) bool) string {
		var items []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if keep(k) {
				items = append(items, fmt.Sprintf("%s ×%d", k, m[k]))
			}
		}
		if len(items) == 0 {
			return "none"
		}
		return strings.Join(items, ", ")
	}
	all := func(string) bool { return true }
	other := func(k string) bool { return !isLease(k) }
	return fmt.Sprintf("reads %d (lists %d, watches %d); dry-run writes %d [%s]; lease writes %d [%s]; other writes %d [%s]",
		c.Reads, c.Lists, c.Watches, c.DryRuns(), list(c.DryRun, all), c.LeaseWrites(), list(c.Writes, isLease),
		c.OtherWrites(), list(c.Writes, other))
}

package livetest

import (
	"context"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/provider/kube"
	"github.com/kilnctl/kiln/internal/cli/ndjson"
	"github.com/kilnctl/kiln/internal/testenv/faultproxy"
)

// pagedRead is one status and one project list of live1 by an engine with
// page size size, through a proxy that records their LISTs.
type pagedRead struct {
	st     *engine.ClusterStatus
	events []string // the project and resource events, times zeroed
	lists  []string // "path?query" of every LIST sent
}

func readPaged(t *testing.T, ctx context.Context, target engine.Target, size int64) pagedRead {
	return readPagedExpiring(t, ctx, target, size, nil)
}

// readPagedExpiring is readPaged through a proxy that answers 410 Expired
// to every LIST expire returns true for.
func readPagedExpiring(t *testing.T, ctx context.Context, target engine.Target, size int64, expire func(*http.Request) bool) pagedRead {
	t.Helper()
	var mu sync.Mutex
	var out pagedRead
	p, err := faultproxy.Start(faultproxy.Options{
		Upstream: cluster.RESTConfig, Seed: 1, HTTP2: true, Expire: expire,
		Observe: func(r *http.Request) {
			q := r.URL.Query()
			if r.Method != http.MethodGet || q.Get("watch") == "true" || q.Get("watch") == "1" {
				return
			}
			mu.Lock()
			out.lists = append(out.lists, r.URL.Path+"?"+r.URL.RawQuery)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := p.Kubeconfig(kc, cluster.ContextName); err != nil {
		t.Fatal(err)
	}
	pt := target
	pt.Provider = kube.New(kc, cluster.ContextName)
	e := &engine.Engine{PageSize: size, Sink: engine.SinkFunc(func(ev engine.Event) {
		if ev.Type() != engine.TypeProject && ev.Type() != engine.TypeResource {
			return
		}
		ev.Time = time.Time{}
		b, err := ndjson.Marshal(ev)
		if err != nil {
			t.Error(err)
		}
		mu.Lock()
		out.events = append(out.events, string(b))
		mu.Unlock()
	})}
	if out.st, err = e.Status(ctx, engine.StatusRequest{Target: pt}); err != nil {
		t.Fatalf("status (page size %d): %v", size, err)
	}
	if _, err := e.Project(ctx, engine.ProjectRequest{Target: pt, Op: engine.ProjectList}); err != nil {
		t.Fatalf("project list (page size %d): %v", size, err)
	}
	return out
}

// TestStatusAndListPaginated: with a page of 2 objects, status and project
// list read the projects' objects with limit=2 and follow the continue
// token, and what they report (the status, every project and resource
// event) is what one page per LIST reports.
func TestStatusAndListPaginated(t *testing.T) {
	target := livePlatform(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := &engine.Engine{Sink: engine.SinkFunc(func(engine.Event) {})}
	// Three projects: three of each kind in kiln-tenant-default, two pages
	// of two.
	var wg sync.WaitGroup
	for _, p := range []string{"pg1", "pg2", "pg3"} {
		wg.Go(func() {
			if _, err := e.Project(ctx, engine.ProjectRequest{Target: target, Op: engine.ProjectCreate, Ref: "default/" + p, Timeout: 2 * time.Minute}); err != nil {
				t.Errorf("project create %s: %v", p, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Cleanup(func() {
		for _, p := range []string{"pg1", "pg2", "pg3"} {
			_, _ = e.Project(context.Background(), engine.ProjectRequest{Target: target, Op: engine.ProjectDelete, Ref: "default/" + p, Timeout: 2 * time.Minute})
		}
	})

	// The projects' pods may still be starting after the creates
	// returned: the unpaged read is repeated until the three run, then
	// the paged read is compared with it (and with one more unpaged read,
	// should the cluster have changed in between).
	var paged, whole pagedRead
	for {
		whole = readPaged(t, ctx, target, 0)
		running := 0
		for _, p := range []string{"pg1", "pg2", "pg3"} {
			if ps := project(whole.st, "default/"+p); ps != nil && ps.State == "running" {
				running++
			}
		}
		if running == 3 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("projects pg1..pg3 never all running: %+v", whole.st.Projects)
		case <-time.After(200 * time.Millisecond):
		}
	}
	same := func(a, b pagedRead) bool {
		return reflect.DeepEqual(masked(a.st), masked(b.st)) && reflect.DeepEqual(a.events, b.events)
	}
	paged = readPaged(t, ctx, target, 2)
	if !same(paged, whole) {
		if whole = readPaged(t, ctx, target, 0); !same(paged, whole) {
			t.Fatalf("paged and unpaged reads differ:\nstatus: %s\npaged events:\n%s\nunpaged events:\n%s", jsonDiff(masked(paged.st), masked(whole.st)),
				strings.Join(paged.events, "\n"), strings.Join(whole.events, "\n"))
		}
	}
	if n := len(paged.st.Projects); n < 3 {
		t.Fatalf("status reported %d projects, want at least 3", n)
	}

	// Every kind of the projects' snapshot was read in pages of 2, and the
	// spec ConfigMaps' LIST went on past its first page.
	cmPath := "/api/v1/namespaces/kiln-tenant-default/configmaps"
	limited, continued := 0, 0
	for _, l := range paged.lists {
		if !strings.Contains(l, "kiln.dev%2Fproject") && !strings.Contains(l, "kiln.dev/project") {
			continue
		}
		if strings.Contains(l, "limit=2") {
			limited++
		}
		if strings.HasPrefix(l, cmPath+"?") && strings.Contains(l, "continue=") {
			continued++
		}
	}
	// Two reads (status, project list), eight kinds each, at least one
	// page each.
	if limited < 16 || continued < 2 {
		t.Fatalf("paged reads: %d project LISTs with limit=2 (want at least 16), %d spec ConfigMap LISTs with continue= (want at least 2); LISTs:\n%s",
			limited, continued, strings.Join(paged.lists, "\n"))
	}
	for _, l := range whole.lists {
		if strings.HasPrefix(l, cmPath+"?") && strings.Contains(l, "continue=") {
			t.Fatalf("the default page size split the spec ConfigMaps' LIST of a few projects: %s", l)
		}
	}

	// A continue token the API server no longer honours (410 Expired:
	// the read outlived its snapshot) makes that kind start over with
	// one unpaged LIST, dropping what its pages gave: the report is
	// still the whole read's, with no project counted twice.
	var mu sync.Mutex
	expired := 0
	expiring := readPagedExpiring(t, ctx, target, 2, func(r *http.Request) bool {
		if r.URL.Query().Get("continue") == "" || !strings.HasPrefix(r.URL.Path, cmPath) {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		expired++
		return true
	})
	if !same(expiring, whole) {
		if whole = readPaged(t, ctx, target, 0); !same(expiring, whole) {
			t.Fatalf("a read whose continue tokens expired differs from an unpaged read:\nstatus: %s\nexpiring events:\n%s\nunpaged events:\n%s", jsonDiff(masked(expiring.st), masked(whole.st)),
				strings.Join(expiring.events, "\n"), strings.Join(whole.events, "\n"))
		}
	}
	restarted := 0
	for _, l := range expiring.lists {
		if strings.HasPrefix(l, cmPath+"?") && !strings.Contains(l, "limit=") && !strings.Contains(l, "continue=") {
			restarted++
		}
	}
	if expired < 2 || restarted < 2 {
		t.Fatalf("expired continue tokens: %d answered 410, %d spec ConfigMap LISTs started over unpaged (want at least 2 each: status and list); LISTs:\n%s",
			expired, restarted, strings.Join(expiring.lists, "\n"))
	}
}

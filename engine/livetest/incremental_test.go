package livetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/provider/kube"
	"github.com/kilnctl/kiln/internal/testenv/faultproxy"
)

// inspector is an engine.Watch of live1 through a proxy that records every
// request it sends (watches aside): each delivered status carries the
// requests of the pass that read it.
type inspector struct {
	t       *testing.T
	updates chan delivery
	done    chan error
	refuse  atomic.Pointer[string] // labelSelector substring to refuse (403)

	mu   sync.Mutex
	reqs []string // since the last delivery: "LIST path?query"
	logs []string
	last *engine.ClusterStatus
}

type delivery struct {
	st   *engine.ClusterStatus
	err  error
	reqs []string
}

func startInspector(t *testing.T, ctx context.Context, target engine.Target) *inspector {
	in := &inspector{t: t, updates: make(chan delivery, 256), done: make(chan error, 1)}
	p, err := faultproxy.Start(faultproxy.Options{
		Upstream: cluster.RESTConfig, Seed: 1, HTTP2: true,
		Observe: func(r *http.Request) {
			q := r.URL.Query()
			if q.Get("watch") == "true" || q.Get("watch") == "1" {
				return
			}
			in.mu.Lock()
			in.reqs = append(in.reqs, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
			in.mu.Unlock()
		},
		Refuse: func(r *http.Request) bool {
			s := in.refuse.Load()
			return s != nil && strings.Contains(r.URL.Query().Get("labelSelector"), *s)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := p.Kubeconfig(kc, cluster.ContextName); err != nil {
		t.Fatal(err)
	}
	wt := target
	wt.Provider = kube.New(kc, cluster.ContextName)
	sink := engine.SinkFunc(func(ev engine.Event) {
		if l, ok := ev.Payload.(event.LogEvent); ok && strings.HasPrefix(l.Message, "inspector:") {
			in.mu.Lock()
			in.logs = append(in.logs, l.Message)
			in.mu.Unlock()
		}
	})
	go func() {
		in.done <- (&engine.Engine{Sink: sink}).Watch(ctx, wt, func(st *engine.ClusterStatus, err error) {
			in.mu.Lock()
			reqs := in.reqs
			in.reqs = nil
			in.mu.Unlock()
			in.updates <- delivery{st: st, err: err, reqs: reqs}
		})
	}()
	return in
}

// next waits for a delivered status that satisfies ok and returns it with
// every delivery since the call (it included).
func (in *inspector) next(ctx context.Context, what string, ok func(*engine.ClusterStatus) bool) []delivery {
	t := in.t
	t.Helper()
	var seen []delivery
	for {
		select {
		case d := <-in.updates:
			if d.err != nil {
				t.Fatalf("watch read while waiting for %s: %v\npasses: %s", what, d.err, in.passLog())
			}
			seen = append(seen, d)
			in.last = d.st
			if ok(d.st) {
				return seen
			}
		case err := <-in.done:
			t.Fatalf("watch ended while waiting for %s: %v", what, err)
		case <-ctx.Done():
			t.Fatalf("no update with %s; passes: %s", what, in.passLog())
		}
	}
}

func (in *inspector) passLog() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return strings.Join(in.logs, "\n  ")
}

// settled waits until the last delivered status equals a fresh full
// Inspect of the cluster (times masked), re-inspecting after each delivery
// and every second (the fresh read may precede a change the watch has
// not reported yet, or follow one it has).
func (in *inspector) settled(ctx context.Context, e *engine.Engine, target engine.Target, what string) {
	t := in.t
	t.Helper()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	diff := ""
	for {
		fresh, err := e.Inspect(ctx, target)
		if err != nil {
			t.Fatalf("inspect (%s): %v", what, err)
		}
		if in.last != nil {
			a, b := masked(in.last), masked(fresh)
			if reflect.DeepEqual(a, b) {
				return
			}
			diff = jsonDiff(a, b)
		}
		select {
		case d := <-in.updates:
			if d.err != nil {
				t.Fatalf("watch read (%s): %v", what, d.err)
			}
			in.last = d.st
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("%s: the watch's status never equalled a fresh Inspect: %s\npasses: %s", what, diff, in.passLog())
		}
	}
}

// masked is a deep copy of st (through JSON, which keeps every field the
// status shows) with times zeroed.
func masked(st *engine.ClusterStatus) *engine.ClusterStatus {
	b, err := json.Marshal(st)
	if err != nil {
		panic(err)
	}
	var out engine.ClusterStatus
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	// Fields JSON leaves out but a frontend shows.
	out.Stacks, out.Nouns = st.Stacks, st.Nouns
	zeroTimes(reflect.ValueOf(&out).Elem())
	return &out
}

var timeType = reflect.TypeFor[time.Time]()

func zeroTimes(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			zeroTimes(v.Elem())
		}
	case reflect.Struct:
		if v.Type() == timeType {
			if v.CanSet() {
				v.Set(reflect.Zero(timeType))
			}
			return
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				zeroTimes(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			zeroTimes(v.Index(i))
		}
	}
}

func jsonDiff(a, b *engine.ClusterStatus) string {
	ja, _ := json.MarshalIndent(a, "", " ")
	jb, _ := json.MarshalIndent(b, "", " ")
	la, lb := strings.Split(string(ja), "\n"), strings.Split(string(jb), "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			lo := max(0, i-6)
			return fmt.Sprintf("first difference at line %d:\nwatch:  %s\nfresh:  %s\n(context: %s)", i, la[i], lb[i], strings.Join(la[lo:i], " "))
		}
	}
	return fmt.Sprintf("%d lines against %d", len(la), len(lb))
}

// projectOf names the project a request reads the objects of (by a
// kiln.dev/project or service-name label, or by one of DESIGN §5's names),
// "" for a request that is no single project's (a full re-read's).
func projectOf(req string) string {
	_, query, _ := strings.Cut(req, "?")
	q, _ := url.ParseQuery(query)
	for _, l := range strings.Split(q.Get("labelSelector"), ",") {
		for _, k := range []string{"kiln.dev/project=", "kubernetes.io/service-name="} {
			if p, ok := strings.CutPrefix(l, k); ok {
				return p
			}
		}
	}
	name, ok := strings.CutPrefix(q.Get("fieldSelector"), "metadata.name=")
	if !ok || !strings.HasPrefix(req, "GET ") {
		return ""
	}
	if p, ok := strings.CutPrefix(name, "kiln-project-"); ok {
		return p
	}
	if _, p, ok := strings.Cut(name, "."); ok {
		return p
	}
	if p, ok := strings.CutSuffix(name, "-auth"); ok {
		return p
	}
	return name
}

func objStatus(st *engine.ClusterStatus, ref, kind string) event.Status {
	p := project(st, ref)
	if p == nil {
		return ""
	}
	return objectStatus(p, kind)
}

// TestWatchIncremental: the live inspector re-reads only the project a
// change touched (its requests name that project only, as many with 2
// projects as with 6), its status stays equal to a fresh full Inspect
// after creates, suspend, start, delete, a Service deleted behind kiln's
// back and a platform change, a deleted project leaves it, and a failed
// project read falls back to a full re-read.
func TestWatchIncremental(t *testing.T) {
	target := livePlatform(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	e := &engine.Engine{Sink: engine.SinkFunc(func(engine.Event) {})}
	op := func(o, ref string) {
		t.Helper()
		if _, err := e.Project(ctx, engine.ProjectRequest{Target: target, Op: o, Ref: ref, Timeout: 2 * time.Minute}); err != nil {
			t.Fatalf("project %s %s: %v", o, ref, err)
		}
	}
	wctx, stop := context.WithCancel(ctx)
	in := startInspector(t, wctx, target)
	in.next(ctx, "the platform ready", func(st *engine.ClusterStatus) bool { return st.Installed && st.Ready })

	running := func(refs ...string) func(*engine.ClusterStatus) bool {
		return func(st *engine.ClusterStatus) bool {
			for _, r := range refs {
				if p := project(st, r); p == nil || p.State != "running" {
					return false
				}
			}
			return true
		}
	}
	op(engine.ProjectCreate, "default/a1")
	op(engine.ProjectCreate, "default/a2")
	in.next(ctx, "a1 and a2 running", running("default/a1", "default/a2"))
	in.settled(ctx, e, target, "after two creates")

	svcs := cluster.Client.CoreV1().Services("kiln-tenant-default")
	// oneChange deletes a1's Service behind kiln's back and returns the
	// requests of the pass that showed it, which must all read a1's
	// objects only. start then heals it.
	oneChange := func(label string) int {
		t.Helper()
		if err := svcs.Delete(ctx, "a1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		seen := in.next(ctx, "a1's Service gone ("+label+")", func(st *engine.ClusterStatus) bool {
			return objStatus(st, "default/a1", "Service") == engine.StatusNotFound
		})
		// The pass that showed it read a1's objects only (earlier
		// deliveries may be passes for changes before this one).
		d := seen[len(seen)-1]
		most := 0
		for _, r := range d.reqs {
			if p := projectOf(r); p != "a1" {
				t.Errorf("%s: the pass that showed a change to a1 sent a request that is not a1's (%q's): %s\npasses: %s", label, p, r, in.passLog())
			} else {
				most++
			}
		}
		t.Logf("%s: the pass that showed the change made %d requests (%d deliveries waited for)", label, most, len(seen))
		in.settled(ctx, e, target, label+": a1's Service deleted")
		op(engine.ProjectStart, "default/a1")
		in.next(ctx, "a1 healed", running("default/a1"))
		return most
	}
	with2 := oneChange("2 projects")
	if with2 == 0 || with2 > 8 {
		t.Errorf("2 projects: a pass made %d requests, want 1 to 8 (one project's LISTs)", with2)
	}

	// Four more projects, created side by side (more than one pass's
	// worth of changes at once: full re-reads meanwhile).
	var wg sync.WaitGroup
	for _, p := range []string{"a3", "a4", "a5", "a6"} {
		wg.Go(func() {
			if _, err := e.Project(ctx, engine.ProjectRequest{Target: target, Op: engine.ProjectCreate, Ref: "default/" + p, Timeout: 2 * time.Minute}); err != nil {
				t.Errorf("project create %s: %v", p, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	in.next(ctx, "six projects running", running("default/a1", "default/a2", "default/a3", "default/a4", "default/a5", "default/a6"))
	in.settled(ctx, e, target, "after four more creates")
	with6 := oneChange("6 projects")
	if with6 > with2 {
		t.Errorf("a pass after a change to one project made %d requests with 6 projects, %d with 2: it grows with the number of projects", with6, with2)
	}

	// Suspend, start and delete through kiln.
	op(engine.ProjectSuspend, "default/a2")
	in.next(ctx, "a2 suspended", func(st *engine.ClusterStatus) bool {
		p := project(st, "default/a2")
		return p != nil && p.State == "suspended"
	})
	in.settled(ctx, e, target, "after suspend")
	op(engine.ProjectStart, "default/a2")
	in.next(ctx, "a2 running again", running("default/a2"))
	in.settled(ctx, e, target, "after start")
	op(engine.ProjectDelete, "default/a3")
	in.next(ctx, "a3 gone", func(st *engine.ClusterStatus) bool { return project(st, "default/a3") == nil })
	in.settled(ctx, e, target, "after delete")

	// A failed project read: the pass reads everything instead, and the
	// change shows all the same.
	refused := "kiln.dev/project=a4"
	in.refuse.Store(&refused)
	if err := svcs.Delete(ctx, "a4", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	seen := in.next(ctx, "a4's Service gone despite the refused read", func(st *engine.ClusterStatus) bool {
		return objStatus(st, "default/a4", "Service") == engine.StatusNotFound
	})
	in.refuse.Store(nil)
	fullRead := false
	for _, d := range seen {
		for _, r := range d.reqs {
			fullRead = fullRead || strings.Contains(r, "/configmaps/kiln-config")
		}
	}
	if !fullRead {
		t.Errorf("after a refused project read, no pass read kiln-config (no full re-read)\npasses: %s", in.passLog())
	}
	in.settled(ctx, e, target, "after a refused read")
	op(engine.ProjectStart, "default/a4")
	in.next(ctx, "a4 healed", running("default/a4"))

	// A platform change (the gateway's Service deleted, then made again):
	// read in full.
	gw, err := cluster.Client.CoreV1().Services("kiln-system").Get(ctx, "kiln-gateway", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.Client.CoreV1().Services("kiln-system").Delete(ctx, "kiln-gateway", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gwStatus := func(st *engine.ClusterStatus) event.Status {
		for _, o := range st.Objects {
			if o.Kind == "Service" && o.Name == "kiln-gateway" {
				return o.Status
			}
		}
		return ""
	}
	in.next(ctx, "the gateway Service gone", func(st *engine.ClusterStatus) bool { return gwStatus(st) == engine.StatusNotFound })
	in.settled(ctx, e, target, "after the gateway Service was deleted")
	again := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: gw.Name, Namespace: gw.Namespace, Labels: gw.Labels, Annotations: gw.Annotations}, Spec: *gw.Spec.DeepCopy()}
	again.Spec.ClusterIP, again.Spec.ClusterIPs = "", nil
	for i := range again.Spec.Ports {
		again.Spec.Ports[i].NodePort = 0
	}
	if _, err := cluster.Client.CoreV1().Services("kiln-system").Create(ctx, again, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	in.next(ctx, "the gateway Service back", func(st *engine.ClusterStatus) bool {
		s := gwStatus(st)
		return s != "" && s != engine.StatusNotFound
	})
	in.settled(ctx, e, target, "after the gateway Service came back")

	stop()
	if err := <-in.done; err != nil {
		t.Fatalf("watch returned %v when its context ended, want nil", err)
	}
}

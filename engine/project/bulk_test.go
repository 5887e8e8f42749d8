package project

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/lock"
	"github.com/kilnctl/kiln/engine/readiness"
)

// logCapture records every log line a batch reports.
type logCapture struct {
	logReporter
	mu    sync.Mutex
	lines []string
}

func (r *logCapture) Logf(level event.Level, format string, args ...any) {
	r.logReporter.Logf(level, format, args...)
	r.mu.Lock()
	r.lines = append(r.lines, string(level)+": "+fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *logCapture) has(sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

// A batch: one project whose Lease another operation holds fails with exit
// 4 and is named, the others start; while the batch holds a member's Lease
// a single operation on it is refused (exit 4); suspend --all then removes
// every project's objects, verified, and releases every Lease.
func TestBulkStartSuspendFailureAndLeases(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the control plane")
	}
	o, ctx := newOps(t, "bulk")
	cs := o.Client
	names := []string{"p0", "p1", "p2", "p3", "p4"}
	for _, p := range names {
		r := Ref{Tenant: "bulk", Project: p}
		if _, err := o.writeSpec(ctx, r, "test", "test", func(*Spec) (*Spec, error) {
			st, _ := o.stack("")
			return &Spec{Stack: st, State: DesiredSuspended}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	// p3's Lease is held by another operation for the whole batch.
	held, _, err := lock.Acquire(ctx, cs, lock.Options{Namespace: "kiln-tenant-bulk", Name: LeaseName("p3"), Operation: "project start bulk/p3 (another run)"})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.WithoutCancel(ctx))

	// The first status seen of p1's Deployment stops the batch's
	// reporting there until the single operation below has been refused.
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	rep := &logCapture{logReporter: logReporter{t: t}}
	rep.w = &readiness.Watcher{Client: cs, OnChange: func(ref readiness.Ref, _ readiness.Result) {
		if ref.Kind == readiness.KindDeployment && ref.Name == "p1" {
			once.Do(func() {
				close(reached)
				<-release
			})
		}
	}}
	o.R = rep
	type res struct {
		ok, failed []string
		err        error
	}
	done := make(chan res, 1)
	go func() {
		ok, failed, err := o.Bulk(ctx, "start", "bulk", 2)
		done <- res{ok, failed, err}
	}()
	select {
	case <-reached:
	case r := <-done:
		t.Fatalf("batch ended before p1's Deployment was watched: %+v", r)
	}
	single := &Ops{Client: cs, Cluster: o.Cluster, Config: o.Config, Timeout: o.Timeout, R: &logReporter{t: t, w: &readiness.Watcher{Client: cs}}}
	err = single.Start(ctx, Ref{Tenant: "bulk", Project: "p1"})
	close(release)
	if failure.Of(err) != failure.Locked {
		t.Errorf("start bulk/p1 while the batch holds it: kind %v (%v), want locked", failure.Of(err), err)
	}
	r := <-done
	if strings.Join(r.failed, ",") != "bulk/p3" || len(r.ok) != 4 {
		t.Errorf("start --all: ok %v failed %v", r.ok, r.failed)
	}
	if failure.Of(r.err) != failure.Locked || !strings.Contains(r.err.Error(), "bulk/p3") {
		t.Errorf("start --all error: kind %v: %v", failure.Of(r.err), r.err)
	}
	if !rep.has("start --all: 4/5 running, 0 in progress, 1 failed") || !rep.has("per step: ") {
		t.Errorf("no final summary or breakdown line in %q", rep.lines)
	}
	list, err := o.List(ctx, "bulk")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range list {
		want := StateRunning
		if st.Project == "p3" {
			want = StateSuspended
		}
		if st.State != want {
			t.Errorf("%s after start --all: %s %v, want %s", st.Project, st.State, st.Reasons, want)
		}
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}

	ok, failed, err := o.Bulk(ctx, "suspend", "bulk", 3)
	if err != nil || len(ok) != 5 || len(failed) != 0 {
		t.Fatalf("suspend --all: ok %v failed %v: %v", ok, failed, err)
	}
	list, err = o.List(ctx, "bulk")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range list {
		if st.State != StateSuspended || st.Desired != DesiredSuspended {
			t.Errorf("%s after suspend --all: %s (desired %s)", st.Project, st.State, st.Desired)
		}
		for _, obj := range st.Objects {
			if (obj.Kind == readiness.KindDeployment || obj.Kind == readiness.KindService || obj.Kind == readiness.KindIngress) && obj.Status != readiness.NotFound {
				t.Errorf("%s after suspend --all: %s %s", st.Project, obj.Kind, obj.Status)
			}
		}
	}
	leases, err := cs.CoordinationV1().Leases("kiln-tenant-bulk").List(ctx, metavOpts())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Items {
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			t.Errorf("lease %s still held by %s after the batch", l.Name, *l.Spec.HolderIdentity)
		}
	}
}

func metavOpts() metav1.ListOptions { return metav1.ListOptions{LabelSelector: LabelProject} }

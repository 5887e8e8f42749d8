// Package livetest tests engine operations that need a kiln platform on a
// real control plane and span several engine packages (Engine.Watch).
package livetest

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/provider/kube"
	"github.com/kilnctl/kiln/internal/testenv/testcluster"
)

var cluster *testcluster.Cluster

// state holds what the tests' kiln platform leaves on this machine (its
// token dir, XDG_STATE_HOME), for every test of the package.
var state string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kiln-livetest-")
	if err != nil {
		panic(err)
	}
	state = dir
	code := testcluster.Main(m, testcluster.Options{}, &cluster)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// The control plane hosts one kiln platform, live1, made by the first
// test that needs it and shared by the others (they run one at a time).
var (
	platformOnce sync.Once
	platformErr  error
)

// livePlatform returns the target of platform live1, creating it the
// first time.
func livePlatform(t *testing.T) engine.Target {
	t.Helper()
	target := engine.Target{Provider: kube.New(cluster.KubeconfigPath, cluster.ContextName), Name: "live1", TokenDir: filepath.Join(state, "tokens")}
	platformOnce.Do(func() {
		platformErr = os.Setenv("XDG_STATE_HOME", filepath.Join(state, "xdg"))
		if platformErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		e := &engine.Engine{Sink: engine.SinkFunc(func(engine.Event) {})}
		platformErr = e.Create(ctx, engine.CreateRequest{Target: target, Timeout: 2 * time.Minute})
	})
	if platformErr != nil {
		t.Fatalf("create platform live1: %v", platformErr)
	}
	return target
}

type update struct {
	st  *engine.ClusterStatus
	err error
	at  time.Time
}

func project(st *engine.ClusterStatus, ref string) *engine.ProjectStatus {
	for i := range st.Projects {
		if st.Projects[i].Tenant+"/"+st.Projects[i].Project == ref {
			return &st.Projects[i]
		}
	}
	return nil
}

func objectStatus(p *engine.ProjectStatus, kind string) event.Status {
	for _, o := range p.Objects {
		if o.Kind == kind {
			return o.Status
		}
	}
	return ""
}

// TestWatchFollowsChangesWithoutPolling: Watch delivers the cluster's
// status once it has read it, then a new status after each change made by
// someone else (a project created through the engine, a Service deleted
// behind kiln's back), and returns nil when its context ends.
func TestWatchFollowsChangesWithoutPolling(t *testing.T) {
	target := livePlatform(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	quiet := engine.SinkFunc(func(engine.Event) {})
	e := &engine.Engine{Sink: quiet}

	updates := make(chan update, 64)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- (&engine.Engine{Sink: quiet}).Watch(wctx, target, func(st *engine.ClusterStatus, err error) {
			updates <- update{st: st, err: err, at: time.Now()}
		})
	}()
	// next waits for an update that satisfies ok.
	next := func(what string, ok func(*engine.ClusterStatus) bool) update {
		t.Helper()
		for {
			select {
			case u := <-updates:
				if u.err != nil {
					t.Fatalf("watch read while waiting for %s: %v", what, u.err)
				}
				if ok(u.st) {
					return u
				}
			case err := <-done:
				t.Fatalf("watch ended while waiting for %s: %v", what, err)
			case <-ctx.Done():
				t.Fatalf("no update with %s", what)
			}
		}
	}
	first := next("the platform ready", func(st *engine.ClusterStatus) bool { return st.Installed && st.Ready })
	if project(first.st, "default/web") != nil || first.st.Name != "live1" || first.st.Location != cluster.ContextName {
		t.Fatalf("first status %+v, want live1 in %s without project default/web", first.st, cluster.ContextName)
	}

	// A project created by another client appears.
	if _, err := e.Project(ctx, engine.ProjectRequest{Target: target, Op: engine.ProjectCreate, Ref: "default/web", Timeout: 2 * time.Minute}); err != nil {
		t.Fatalf("project create: %v", err)
	}
	next("default/web running", func(st *engine.ClusterStatus) bool {
		p := project(st, "default/web")
		return p != nil && p.State == "running"
	})

	// A Service deleted behind kiln's back shows within the watch, with
	// no read in between that the test asked for.
	deleted := time.Now()
	if err := cluster.Client.CoreV1().Services("kiln-tenant-default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	u := next("the web Service gone", func(st *engine.ClusterStatus) bool {
		p := project(st, "default/web")
		return p != nil && objectStatus(p, "Service") == engine.StatusNotFound && p.State != "running"
	})
	t.Logf("service deletion seen after %v (state %s, reasons %v)", u.at.Sub(deleted), project(u.st, "default/web").State, project(u.st, "default/web").Reasons)

	stop()
	if err := <-done; err != nil {
		t.Fatalf("watch returned %v when its context ended, want nil", err)
	}
}

package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Every mutating command killed with -9 at any of its steps is finished by
// running the same command again. create, upgrade, rotate-key, destroy and
// project suspend/start/rotate-token/restack/delete have their own kill
// tests; these cover project create and the bulk operations.

// projectStates reads the observed state of every project of cluster name
// from kiln project list -o json.
func projectStates(t *testing.T, e *env, name, kctx string) map[string]string {
	t.Helper()
	r := e.kiln("project", "list", "kube", name, "--context", kctx, "-o", "json")
	expect(t, r, 0)
	out := map[string]string{}
	for _, ev := range r.events(t) {
		if ev["type"] == "project" {
			out[ev["tenant"].(string)+"/"+ev["project"].(string)], _ = ev["state"].(string)
		}
	}
	return out
}

func TestProjectCreateKilledAtEveryStepIsFinishedByCreate(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	const name, kctx = "pcrash", "kiln-b"
	cleanup(t, e, name, kctx)
	expect(t, e.kiln("create", "kube", name, "--context", kctx, "--headless"), 0)
	for _, at := range []string{"after-lock", "after-secret", "after-deployment", "after-service"} {
		t.Run(at, func(t *testing.T) {
			ref := "default/" + strings.TrimPrefix(at, "after-")
			args := []string{"project", "create", "kube", name, ref, "--context", kctx, "-o", "json"}
			r := e.kilnWith([]string{"KILN_TEST_CRASH_AT=" + at}, args...)
			if !r.killed {
				t.Fatalf("project create was not killed at %s:\n%s", at, r)
			}
			expect(t, e.kiln(args...), 0)
			if st := projectStates(t, e, name, kctx)[ref]; st != "running" {
				t.Errorf("%s after a create killed at %s and run again: %q", ref, at, st)
			}
		})
	}
}

func TestBulkKilledMidwayIsFinishedByTheSameCommand(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	const name, kctx = "bcrash", "kiln-b"
	cleanup(t, e, name, kctx)
	expect(t, e.kiln("create", "kube", name, "--context", kctx, "--headless"), 0)
	refs := []string{"default/one", "default/two", "default/three"}
	for _, ref := range refs {
		expect(t, e.kiln("project", "create", "kube", name, ref, "--context", kctx, "--headless"), 0)
	}
	for _, c := range []struct{ op, at, want string }{
		{"suspend", "after-service", "suspended"},
		{"start", "after-deployment", "running"},
	} {
		args := []string{"project", c.op, "kube", name, "--all", "--context", kctx, "--yes", "-o", "json"}
		r := e.kilnWith([]string{"KILN_TEST_CRASH_AT=" + c.at}, args...)
		if !r.killed {
			t.Fatalf("%s --all was not killed at %s:\n%s", c.op, c.at, r)
		}
		expect(t, e.kiln(args...), 0)
		states := projectStates(t, e, name, kctx)
		for _, ref := range refs {
			if states[ref] != c.want {
				t.Errorf("%s --all killed at %s and run again: %s is %q, want %s", c.op, c.at, ref, states[ref], c.want)
			}
		}
	}
}

// SIGTERM, as CI systems cancel a job, is the first Ctrl-C: kiln stops at
// a safe point, releases its Lease, says what was left and exits 130; the
// same command run again finishes the work.
func TestSIGTERMStopsAtASafePointAndTheRerunFinishes(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	const name, kctx = "sigterm", "kiln-b"
	cleanup(t, e, name, kctx)
	cs := clusterB.Client

	terminate := func(point string, args ...string) result {
		t.Helper()
		var r result
		// The signal cancels kiln's context asynchronously; if the run got
		// past its next safe point first (exit 0), there is nothing to
		// check: try again at the same point of a fresh run.
		for attempt := 1; attempt <= 3; attempt++ {
			p := e.startPaused(point, args...)
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if r = p.resume(); r.code != 0 {
				return r
			}
		}
		return r
	}

	r := terminate("after-auth", "create", "kube", name, "--context", kctx, "-o", "json")
	// Three runs that all finished before the signal landed would mean
	// SIGTERM is not honoured at a safe point: a failure, not a skip.
	expect(t, r, 130)
	checkReleased(t, cs)
	if msg, _ := r.last(t, "result")["message"].(string); msg == "" {
		t.Errorf("interrupted create says nothing of what was left:\n%s", r)
	}
	expect(t, e.kiln("create", "kube", name, "--context", kctx, "--headless"), 0)

	r = terminate("after-tenants-delete", "destroy", "kube", name, "--context", kctx, "--yes", "-o", "json")
	if r.code != 0 {
		expect(t, r, 130)
		checkReleased(t, cs)
		if st := e.kiln("status", "kube", name, "--context", kctx); !strings.Contains(st.stdout, "partly removed") {
			t.Errorf("status after an interrupted destroy:\n%s", st)
		}
	}
	expect(t, e.kiln("destroy", "kube", name, "--yes", "--headless"), 0)
	waitNamespaceGone(t, cs, "kiln-system")
}

// checkReleased fails unless kiln-system's Lease is free (or gone).
func checkReleased(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := cs.CoordinationV1().Leases("kiln-system").Get(ctx, "kiln-lock", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if h := l.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("the interrupted run left the Lease held by %s", *h)
	}
}

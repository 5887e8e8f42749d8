package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kilnctl/kiln/internal/testhooks"
)

// A destroy killed after it asked for kiln-system's deletion leaves a
// terminating namespace, in which nothing — not even a Lease — can be
// created. The rerun must not fail taking the lock: it sees the
// namespace terminating and confirms it (and the tenants) gone. A
// finalizer holds kiln-system in Terminating so the rerun meets that state
// for certain.
func TestDestroyKilledAfterNamespaceDeleteFinishes(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	const name = "phoenix"
	cleanup(t, e, name, "kiln-b")
	expect(t, e.kiln("create", "kube", name, "--context", "kiln-b", "--headless"), 0)
	cs := clusterB.Client
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hold := func(add bool) {
		t.Helper()
		fin := []string{}
		if add {
			fin = []string{"kiln.test/hold"}
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": fin}})
		if _, err := cs.CoreV1().Namespaces().Patch(ctx, "kiln-system", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	hold(true)
	released := false
	t.Cleanup(func() {
		if !released {
			hold(false)
		}
	})

	r := e.kilnWith([]string{testhooks.CrashEnv + "=after-namespace-delete"}, "destroy", "kube", name, "--context", "kiln-b", "--yes", "--headless")
	if !r.killed {
		t.Fatalf("destroy was not killed at after-namespace-delete:\n%s", r)
	}
	ns, err := cs.CoreV1().Namespaces().Get(ctx, "kiln-system", metav1.GetOptions{})
	if err != nil || ns.DeletionTimestamp == nil {
		t.Fatalf("kiln-system should be terminating: %v %v", ns, err)
	}
	if _, err := cs.CoreV1().ConfigMaps("kiln-system").Get(ctx, "kiln-config", metav1.GetOptions{}); err == nil {
		t.Fatal("kiln-config outlived the namespace's deletion request")
	}

	// The rerun takes the terminating path (no lock to take) and waits.
	r = e.kiln("destroy", "kube", name, "--context", "kiln-b", "--yes", "--headless", "--timeout", "3s")
	expect(t, r, 5)
	if !strings.Contains(r.stderr, "already being deleted") || strings.Contains(r.stderr, "lease") && strings.Contains(r.stderr, "forbidden") {
		t.Fatalf("rerun on a terminating kiln-system:\n%s", r)
	}

	hold(false)
	released = true
	r = e.kiln("destroy", "kube", name, "--context", "kiln-b", "--yes", "--headless")
	if r.code != 0 && r.code != 2 {
		t.Fatalf("destroy after the namespace was released: %s", r)
	}
	waitNamespaceGone(t, cs, "kiln-system")
	waitNamespaceGone(t, cs, "kiln-tenant-default")
}

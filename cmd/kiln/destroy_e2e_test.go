package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kilnctl/kiln/internal/testenv/testhooks"
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

// A destroy killed at any of its steps is finished by running destroy
// again — with no token dir that kiln-auth trusts once kiln-auth is gone —
// and until then list and status say the cluster is partly removed, never
// absent. At the end the token dir is moved aside and the keyring entry
// is gone, as after a destroy that was never interrupted.
func TestDestroyKilledAtEveryStepIsFinishedByDestroy(t *testing.T) {
	skipShort(t)
	const name = "ember"
	cs := clusterB.Client
	for _, point := range []string{
		"destroy-marked",
		"after-tenants-delete",
		"after-kiln-config-delete",
		"after-kiln-auth-delete",
		"before-namespace-delete",
		"after-namespace-delete",
		"after-infrastructure-delete",
		"after-keyring-forget",
	} {
		t.Run(point, func(t *testing.T) {
			e := newEnv(t)
			cleanup(t, e, name, "kiln-b")
			expect(t, e.kiln("create", "kube", name, "--context", "kiln-b", "--headless"), 0)
			expect(t, e.kiln("project", "create", "kube", name, "default/site", "--headless"), 0)

			r := e.kilnWith([]string{testhooks.CrashEnv + "=" + point}, "destroy", "kube", name, "--context", "kiln-b", "--yes", "--headless")
			if !r.killed {
				t.Fatalf("destroy was not killed at %s:\n%s", point, r)
			}

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, nsErr := cs.CoreV1().Namespaces().Get(ctx, "kiln-system", metav1.GetOptions{})
			if nsErr == nil {
				// What is left says so: partly removed, never absent.
				r = e.kiln("list", "kube", "-o", "json")
				if !strings.Contains(r.stdout, `"name":"`+name+`"`) || !strings.Contains(r.stdout, `"platform":"partly-removed"`) {
					t.Errorf("kiln list after a destroy killed at %s does not say partly removed:\n%s", point, r)
				}
				r = e.kiln("status", "kube", name, "--context", "kiln-b")
				if !strings.Contains(r.stdout, "partly removed") || !strings.Contains(r.stdout, "kiln destroy kube "+name) {
					t.Errorf("kiln status after a destroy killed at %s:\n%s", point, r)
				}
			}

			r = e.kiln("destroy", "kube", name, "--yes", "--headless")
			expect(t, r, 0)
			waitNamespaceGone(t, cs, "kiln-system")
			waitNamespaceGone(t, cs, "kiln-tenant-default")
			if _, err := os.Stat(e.tokenDir(name)); !os.IsNotExist(err) {
				t.Errorf("token dir still at the default path after the rerun: %v\n%s", err, r)
			}
			aside, _ := filepath.Glob(e.tokenDir(name) + ".destroyed-*")
			if len(aside) != 1 {
				t.Errorf("want one moved-aside token dir, found %v\n%s", aside, r)
			}
			r = e.kiln("tokens", "list", "-o", "json")
			if strings.Contains(r.stdout, `"name":"`+name+`"`) {
				t.Errorf("keyring entry survived the finished destroy: %s", r.stdout)
			}
			// Nothing is left to finish: a third destroy says so (exit 2).
			expect(t, e.kiln("destroy", "kube", name, "--yes", "--headless"), 2)
		})
	}
}

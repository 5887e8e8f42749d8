package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/internal/testenv/testcluster"
)

// The API server killed with SIGKILL in the middle of a command and back
// 8 s later on the same address (a managed control plane restarting or
// failing over: every connection and watch cut at once): the same run
// completes with exit 0 and the end state of a run without the fault. A
// Lease that could not be renewed meanwhile holds the run's writes back
// rather than ending it, and nobody could take it while the server was
// gone. etcd stopped for 20 s (the API server up, answering timeouts and
// 5xx) in the middle of create, project create, bulk project start,
// upgrade and destroy: the same outcome. The cluster is this test's own:
// the restart must not disturb the other tests' control planes.
func TestCommandsSurviveAnAPIServerRestart(t *testing.T) {
	skipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := testcluster.Start(ctx, testcluster.Options{ContextName: "kiln-restart"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	e := newEnv(t)
	e.kubeconfig = c.KubeconfigPath
	const name = "phoenix2"

	// outage runs kiln paused at point, kills the API server, lets kiln go
	// on against the dead address, and starts the server again 8 s later.
	outage := func(point string, args ...string) result {
		t.Helper()
		p := e.startPaused(point, append(args, "--timeout", "3m")...)
		if err := c.KillAPIServer(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p.release, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		time.Sleep(8 * time.Second) // the outage: not a wait for a result
		if err := c.StartAPIServer(ctx); err != nil {
			t.Fatalf("restart the API server: %v", err)
		}
		r := p.resume()
		if strings.Contains(r.stdout, "holding every write back") {
			t.Logf("%s at %s: a Lease was not renewed for ⅔ of its duration; its writes were held back and resumed", args[0], point)
		}
		t.Logf("%s through an API server restart at %s: exit %d", args[0], point, r.code)
		return r
	}

	// stall runs kiln paused at point, stops etcd for 20 s (the API server
	// up, answering timeouts and 5xx), and lets kiln go on a second into
	// the stall.
	stall := func(point string, args ...string) result {
		t.Helper()
		p := e.startPaused(point, append(args, "--timeout", "3m")...)
		stalled := make(chan error, 1)
		go func() { stalled <- c.StallEtcd(ctx, 20*time.Second) }()
		time.Sleep(time.Second) // etcd stopped before the run goes on: not a wait for a result
		r := p.resume()
		if err := <-stalled; err != nil {
			t.Fatal(err)
		}
		t.Logf("%s through an etcd stall at %s: exit %d", strings.Join(args[:2], " "), point, r.code)
		return r
	}

	r := outage("after-auth", "create", "kube", name, "--context", "kiln-restart", "-o", "json")
	expect(t, r, 0)
	td, err := creds.Load(e.tokenDir(name))
	if err != nil {
		t.Fatalf("token dir after a create through a restart: %v", err)
	}
	auth, err := c.Client.CoreV1().ConfigMaps("kiln-system").Get(ctx, "kiln-auth", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	if err := json.Unmarshal([]byte(auth.Data["keys.json"]), &keys); err != nil {
		t.Fatal(err)
	}
	if _, ok := keys[td.Manifest.KeyID]; len(keys) != 1 || !ok || td.Manifest.State != "committed" {
		t.Fatalf("after a create through a restart: kiln-auth trusts %d keys, token dir key %s state %s", len(keys), td.Manifest.KeyID, td.Manifest.State)
	}

	// create --continue through a restart: the same key, nothing regenerated.
	r = outage("after-lock", "create", "kube", name, "--context", "kiln-restart", "--continue", "-o", "json")
	expect(t, r, 0)
	if got := authKeys(t, c.Client); len(got) != 1 || got[td.Manifest.KeyID] == "" {
		t.Errorf("after create --continue through a restart: kiln-auth trusts %v, want only %s", keyIDs(got), td.Manifest.KeyID)
	}

	// upgrade adding a tenant through a restart.
	cfg := writeConfig(t, "apiVersion: kiln.dev/v1alpha1\nkind: ClusterConfig\nspec:\n  tenants: [default, staging]\n")
	r = outage("upgrade-after-tenants", "upgrade", "kube", name, "--context", "kiln-restart", "-c", cfg, "--yes", "-o", "json")
	expect(t, r, 0)
	if _, err := c.Client.CoreV1().Namespaces().Get(ctx, "kiln-tenant-staging", metav1.GetOptions{}); err != nil {
		t.Errorf("after an upgrade through a restart: tenant namespace: %v", err)
	}
	if tokens := readTokens(t, e.tokenDir(name)); len(tokens["staging"]) == 0 {
		t.Errorf("after an upgrade through a restart: no token of tenant staging in the token dir")
	}

	// rotate-key through a restart, paused while both keys are trusted:
	// one key at the end, the token dir's.
	r = outage("rotate-after-trust-both", "rotate-key", "kube", name, "--context", "kiln-restart", "--yes", "-o", "json")
	expect(t, r, 0)
	rotated, err := creds.Load(e.tokenDir(name))
	if err != nil {
		t.Fatalf("token dir after a rotate-key through a restart: %v", err)
	}
	if got := authKeys(t, c.Client); len(got) != 1 || got[rotated.Manifest.KeyID] == "" || rotated.Manifest.KeyID == td.Manifest.KeyID || rotated.Manifest.State != "committed" {
		t.Errorf("after rotate-key through a restart: kiln-auth trusts %v, token dir key %s (%s), key before %s", keyIDs(got), rotated.Manifest.KeyID, rotated.Manifest.State, td.Manifest.KeyID)
	}

	refs := []string{"default/one", "default/two", "default/three"}
	for _, ref := range refs {
		expect(t, e.kiln("project", "create", "kube", name, ref, "--context", "kiln-restart", "--headless"), 0)
	}
	expect(t, e.kiln("project", "suspend", "kube", name, "--all", "--yes", "--context", "kiln-restart", "--headless"), 0)
	r = outage("after-secret", "project", "start", "kube", name, "--all", "--yes", "--context", "kiln-restart", "-o", "json")
	expect(t, r, 0)
	states := projectStates(t, e, name, "kiln-restart")
	for _, ref := range refs {
		if states[ref] != "running" {
			t.Errorf("after start --all through a restart: %s is %q", ref, states[ref])
		}
	}

	r = outage("after-deployment", "project", "restack", "kube", name, "default/one", "--stack", "default", "--context", "kiln-restart", "-o", "json")
	expect(t, r, 0)
	if st := projectStates(t, e, name, "kiln-restart")["default/one"]; st != "running" {
		t.Errorf("after a restack through a restart: %q", st)
	}

	// etcd stalled for 20 s in the middle of a project create, a bulk
	// start and an upgrade adding a tenant: each run completes with the
	// state of a run without the fault.
	r = stall("after-secret", "project", "create", "kube", name, "default/four", "--context", "kiln-restart", "-o", "json")
	expect(t, r, 0)
	if st := projectStates(t, e, name, "kiln-restart")["default/four"]; st != "running" {
		t.Errorf("after a project create through an etcd stall: %q", st)
	}
	refs = append(refs, "default/four")
	expect(t, e.kiln("project", "suspend", "kube", name, "--all", "--yes", "--context", "kiln-restart", "--headless"), 0)
	r = stall("after-secret", "project", "start", "kube", name, "--all", "--yes", "--context", "kiln-restart", "-o", "json")
	expect(t, r, 0)
	states = projectStates(t, e, name, "kiln-restart")
	for _, ref := range refs {
		if states[ref] != "running" {
			t.Errorf("after start --all through an etcd stall: %s is %q", ref, states[ref])
		}
	}
	cfg = writeConfig(t, "apiVersion: kiln.dev/v1alpha1\nkind: ClusterConfig\nspec:\n  tenants: [default, staging, prod]\n")
	r = stall("upgrade-after-tenants", "upgrade", "kube", name, "--context", "kiln-restart", "-c", cfg, "--yes", "-o", "json")
	expect(t, r, 0)
	if _, err := c.Client.CoreV1().Namespaces().Get(ctx, "kiln-tenant-prod", metav1.GetOptions{}); err != nil {
		t.Errorf("after an upgrade through an etcd stall: tenant namespace: %v", err)
	}
	checkKeys(t, c.Client, e.tokenDir(name), name)
	if tokens := readTokens(t, e.tokenDir(name)); len(tokens["prod"]) == 0 {
		t.Errorf("after an upgrade through an etcd stall: no token of tenant prod in the token dir")
	}

	r = outage("after-tenants-delete", "destroy", "kube", name, "--context", "kiln-restart", "--yes", "-o", "json")
	expect(t, r, 0)
	waitNamespaceGone(t, c.Client, "kiln-system")
	waitNamespaceGone(t, c.Client, "kiln-tenant-default")

	// A create and a destroy, each through an etcd stall: the platform as a
	// fault-free create leaves it (one trusted key, the committed token
	// dir's, every tenant token verifying), then nothing left.
	const name2 = "phoenix3"
	r = stall("after-auth", "create", "kube", name2, "--context", "kiln-restart", "-o", "json")
	expect(t, r, 0)
	checkKeys(t, c.Client, e.tokenDir(name2), name2)
	r = stall("after-tenants-delete", "destroy", "kube", name2, "--context", "kiln-restart", "--yes", "-o", "json")
	expect(t, r, 0)
	waitNamespaceGone(t, c.Client, "kiln-system")
	waitNamespaceGone(t, c.Client, "kiln-tenant-default")
}

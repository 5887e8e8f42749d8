package main

import (
	"context"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// hintPattern is how kiln writes a command it tells the user to run: in
// backquotes.
var hintPattern = regexp.MustCompile("`(kiln [^`]+)`")

// hintsIn are the commands out (a run's stdout and stderr) suggests.
func hintsIn(r result) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range hintPattern.FindAllStringSubmatch(r.stdout+"\n"+r.stderr, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			out = append(out, m[1])
		}
	}
	return out
}

// hint is the one suggested command of r that runs verb (its words after
// kiln, "project rotate-token"); the test fails when r suggests none.
func hint(t *testing.T, r result, verb string) string {
	t.Helper()
	for _, h := range hintsIn(r) {
		if strings.HasPrefix(h, "kiln "+verb+" ") {
			return h
		}
	}
	t.Fatalf("no `kiln %s ...` hint in:\n%s", verb, r)
	return ""
}

// runHint runs a printed hint as the user would, with the flags and
// environment of the test's own kiln runs (e.kiln adds --kubeconfig and
// the keyring) and extra: --headless, and --yes where the command asks
// (a hint never confirms in advance).
func (e *env) runHint(t *testing.T, h string, extra ...string) result {
	t.Helper()
	r := e.kiln(append(strings.Fields(h)[1:], extra...)...)
	if r.code == 2 {
		t.Fatalf("the hint `%s` is a usage error (exit 2):\n%s", h, r)
	}
	return r
}

// Every hint kiln prints about a cluster is a command that runs on that
// cluster and does what the message says. The test provokes each on the
// real control plane — an interrupted create, a create of an installed
// platform, a create with a differing config, an interrupted upgrade, a project whose objects
// are gone, a project whose Secret is gone, a key rotation kept open, an
// interrupted key rotation, a headless inspect, an interrupted destroy — parses the command out of
// what kiln printed and runs it.
func TestEveryHintRunsAndDoesWhatItSays(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	const name, kctx = "hinted", "kiln-b"
	cleanup(t, e, name, kctx)
	cs := clusterB.Client
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	sigterm := func(point string, args ...string) result {
		t.Helper()
		var r result
		for attempt := 1; attempt <= 3; attempt++ {
			p := e.startPaused(point, args...)
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if r = p.resume(); r.code != 0 {
				return r
			}
		}
		t.Fatalf("three runs finished before SIGTERM landed at %s:\n%s", point, r)
		return r
	}

	// 1. create interrupted once the keys are in: "create again with
	// --continue finishes it" — the hint does.
	r := sigterm("after-auth", "create", "kube", name, "--context", kctx, "--headless")
	expect(t, r, 130)
	h := hint(t, r, "create")
	if !strings.Contains(h, "--continue") || !strings.Contains(h, "--context "+kctx) {
		t.Errorf("interrupted create's hint %q lacks --continue or the context", h)
	}
	r = e.runHint(t, h, "--headless")
	expect(t, r, 0)
	if !strings.Contains(r.stderr, "is ready") {
		t.Errorf("`%s` did not finish the create:\n%s", h, r)
	}

	// 2. create of an installed platform: exit 3, and the hint continues.
	// From here on the test names no context: kiln finds the cluster,
	// and its hints name the context it found it in.
	r = e.kiln("create", "kube", name, "--headless")
	expect(t, r, 3)
	h = hint(t, r, "create")
	if !strings.Contains(h, "--context "+kctx) {
		t.Errorf("hint %q does not name the context kiln found %s in", h, name)
	}
	r = e.runHint(t, h, "--headless", "-o", "json")
	expect(t, r, 0)
	if d := r.last(t, "decision"); d["decision"] != "continue" {
		t.Errorf("`%s` decided %v, want continue", h, d)
	}

	// 3. create --continue with a config that differs: exit 2 (bad input,
	// rightly), and the hint is the upgrade that applies it.
	cfg := writeConfig(t, twoTenants)
	r = e.kiln("create", "kube", name, "--continue", "-c", cfg, "--headless")
	expect(t, r, 2)
	h = hint(t, r, "upgrade")
	expect(t, e.runHint(t, h, "--headless", "--yes"), 0)
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "kiln-tenant-staging", metav1.GetOptions{}); err != nil {
		t.Errorf("`%s` did not add tenant staging: %v", h, err)
	}

	// 3b. an upgrade interrupted once the new tenant's namespace is in:
	// its hint is the same upgrade, with the same config, and finishes it.
	three := writeConfig(t, strings.Replace(twoTenants, "[default, staging]", "[default, staging, qa]", 1))
	r = sigterm("upgrade-after-tenants", "upgrade", "kube", name, "-c", three, "--yes", "--headless")
	expect(t, r, 130)
	h = hint(t, r, "upgrade")
	if !strings.Contains(h, "-c "+three) {
		t.Errorf("interrupted upgrade's hint %q lacks its config file", h)
	}
	expect(t, e.runHint(t, h, "--headless", "--yes"), 0)
	if cm, err := cs.CoreV1().ConfigMaps("kiln-system").Get(ctx, "kiln-config", metav1.GetOptions{}); err != nil || !strings.Contains(cm.Data["config.yaml"], "qa") {
		t.Errorf("`%s` did not finish the upgrade: kiln-config %v", h, err)
	}

	// 4. a project whose Deployment, Service and route are gone: its
	// reason names the start that brings it back.
	expect(t, e.kiln("project", "create", "kube", name, "default/web", "--headless"), 0)
	del := metav1.DeleteOptions{}
	if err := cs.AppsV1().Deployments("kiln-tenant-default").Delete(ctx, "web", del); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Services("kiln-tenant-default").Delete(ctx, "web", del); err != nil {
		t.Fatal(err)
	}
	if err := cs.NetworkingV1().Ingresses("kiln-system").Delete(ctx, "default.web", del); err != nil {
		t.Fatal(err)
	}
	waitGone(t, cs, "Deployment", "kiln-tenant-default", "web")
	r = e.kiln("project", "inspect", "kube", name, "default/web", "--headless")
	h = hint(t, r, "project start")
	expect(t, e.runHint(t, h, "--headless"), 0)
	if r = e.kiln("project", "inspect", "kube", name, "default/web", "--headless", "-o", "json"); !projectState(t, r, "running") {
		t.Errorf("`%s` did not bring default/web back:\n%s", h, r)
	}

	// 5. a project whose Secret is gone: repair cannot make a token, and
	// its hint issues one.
	expect(t, e.kiln("project", "create", "kube", name, "default/site", "--headless"), 0)
	if err := cs.CoreV1().Secrets("kiln-tenant-default").Delete(ctx, "site-auth", del); err != nil {
		t.Fatal(err)
	}
	r = e.kiln("status", "kube", name, "--repair", "--headless")
	h = hint(t, r, "project rotate-token")
	if !strings.Contains(h, "default/site") {
		t.Errorf("repair's hint %q is not about default/site", h)
	}
	expect(t, e.runHint(t, h, "--headless"), 0)
	if _, err := cs.CoreV1().Secrets("kiln-tenant-default").Get(ctx, "site-auth", metav1.GetOptions{}); err != nil {
		t.Errorf("`%s` left no Secret site-auth: %v", h, err)
	}
	if r = e.kiln("project", "inspect", "kube", name, "default/site", "--headless", "-o", "json"); !projectState(t, r, "running") {
		t.Errorf("default/site after `%s`:\n%s", h, r)
	}

	// 6. a key rotation kept open: its hint ends it now.
	r = e.kiln("rotate-key", "kube", name, "--yes", "--keep-old", "1h", "--headless")
	expect(t, r, 0)
	if n := len(authKeys(t, cs)); n != 2 {
		t.Fatalf("kiln-auth during --keep-old trusts %d keys, want 2", n)
	}
	h = hint(t, r, "rotate-key")
	if !strings.Contains(h, "--finish") {
		t.Errorf("kept rotation's hint %q does not finish it", h)
	}
	expect(t, e.runHint(t, h, "--headless", "--yes"), 0)
	if n := len(authKeys(t, cs)); n != 1 {
		t.Errorf("after `%s` kiln-auth trusts %d keys, want 1", h, n)
	}

	// 6b. a rotation interrupted once both keys are trusted: it says what
	// kiln-auth trusts now, and its hint finishes the rotation.
	r = sigterm("rotate-after-trust-both", "rotate-key", "kube", name, "--yes", "--headless")
	expect(t, r, 130)
	if !strings.Contains(r.stderr, "read back: kiln-auth trusts") {
		t.Errorf("interrupted rotate-key does not say what it left:\n%s", r)
	}
	h = hint(t, r, "rotate-key")
	expect(t, e.runHint(t, h, "--headless", "--yes"), 0)
	if n := len(authKeys(t, cs)); n != 1 {
		t.Errorf("after `%s` kiln-auth trusts %d keys, want 1", h, n)
	}

	// 7. inspect without a terminal: exit 2, and its hint is the headless
	// view, which streams the cluster's status until stopped.
	r = e.kiln("inspect", "kube", name, "--context", kctx, "--headless")
	expect(t, r, 2)
	h = hint(t, r, "status")
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	p := e.startWatch(wctx, h)
	if p.code == 2 || !strings.Contains(p.stdout, "Cluster   "+name) {
		t.Errorf("`%s` did not stream the status:\n%s", h, p)
	}

	// 8. destroy interrupted after the tenants went: the result says what
	// is left and the command that finishes it; so does status.
	r = sigterm("after-tenants-delete", "destroy", "kube", name, "--yes", "--headless")
	expect(t, r, 130)
	if !strings.Contains(r.stderr, "partly removed") || !strings.Contains(r.stderr, "left: ") {
		t.Errorf("interrupted destroy does not say what is left:\n%s", r)
	}
	h = hint(t, r, "destroy")
	st := e.kiln("status", "kube", name, "--headless")
	if sh := hint(t, st, "destroy"); sh != h {
		t.Errorf("status suggests `%s`, the interrupted destroy `%s`", sh, h)
	}
	expect(t, e.runHint(t, h, "--headless", "--yes"), 0)
	waitNamespaceGone(t, cs, "kiln-system")
	waitNamespaceGone(t, cs, "kiln-tenant-default")
	waitNamespaceGone(t, cs, "kiln-tenant-staging")
	waitNamespaceGone(t, cs, "kiln-tenant-qa")
}

// projectState reports whether the project event of r has state want.
func projectState(t *testing.T, r result, want string) bool {
	t.Helper()
	ev := r.last(t, "project")
	p, _ := ev["project"].(map[string]any)
	if p == nil {
		p = ev
	}
	return p["state"] == want
}

// startWatch runs the hint h (a streaming command) until ctx ends, and
// returns what it printed.
func (e *env) startWatch(ctx context.Context, h string) result {
	e.t.Helper()
	cmd := e.command(ctx, nil, strings.Fields(h)[1:]...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(interface{ ExitCode() int }); ok {
		r.code = ee.ExitCode()
	}
	outputsMu.Lock()
	outputs = append(outputs, r.stdout, r.stderr)
	outputsMu.Unlock()
	return r
}

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kilnctl/kiln/engine/platform"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kilnctl/kiln/creds"
)

// upgradeBase is the config a platform is created with; upgradeNext adds
// tenant staging, changes the domain, runs two gateway replicas and
// changes stack web's image.
const upgradeBase = `apiVersion: kiln.dev/v1alpha1
kind: ClusterConfig
spec:
  tenants: [default]
  domain: up.example.test
  stacks:
    - {name: web, image: "nginx:1.27-alpine", port: 80, cpu: 50m, memory: 64Mi}
`

const upgradeNext = `apiVersion: kiln.dev/v1alpha1
kind: ClusterConfig
spec:
  tenants: [default, staging]
  domain: next.example.test
  gateway: {replicas: 2}
  stacks:
    - {name: web, image: "nginx:1.27.1-alpine", port: 80, cpu: 50m, memory: 64Mi}
`

// world records the resourceVersion of every kiln object of the cluster:
// the platform (Lease included) and every object of the tenant namespaces.
func world(t *testing.T, cs kubernetes.Interface) map[string]string {
	t.Helper()
	out := snapshot(t, cs, false)
	nss, err := cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=kiln"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range nss.Items {
		if ns.Name == "kiln-system" {
			continue
		}
		for k, v := range nsObjects(t, cs, ns.Name) {
			out[ns.Name+"/"+k] = v
		}
	}
	// The projects' routes live in kiln-system.
	routes, err := cs.NetworkingV1().Ingresses("kiln-system").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range routes.Items {
		out["kiln-system/ing/"+i.Name] = i.ResourceVersion
	}
	return out
}

// quietWorld is world once two reads 2 s apart agree (at most a minute):
// what kiln is then checked not to change is not still being changed by
// the cluster's controllers.
func quietWorld(t *testing.T, cs kubernetes.Interface) map[string]string {
	t.Helper()
	prev := world(t, cs)
	for range 30 {
		time.Sleep(2 * time.Second)
		cur := world(t, cs)
		if reflect.DeepEqual(prev, cur) {
			return cur
		}
		prev = cur
	}
	t.Fatal("the cluster's objects kept changing for a minute with no kiln running")
	return nil
}

// plans returns the plan events of r as "action kind namespace/name".
func plans(t *testing.T, r result) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, ev := range r.events(t) {
		if ev["type"] != "plan" {
			continue
		}
		for _, k := range []string{"action", "kind", "namespace", "name", "fields", "message", "time"} {
			if _, ok := ev[k]; !ok {
				t.Errorf("plan event without %q: %v", k, ev)
			}
		}
		out[fmt.Sprintf("%s %s %s/%s", ev["action"], ev["kind"], ev["namespace"], ev["name"])] = ev
	}
	return out
}

func hasField(ev map[string]any, field string) bool {
	fs, _ := ev["fields"].([]any)
	for _, f := range fs {
		if f == field {
			return true
		}
	}
	return false
}

func configAnnotations(t *testing.T, cs kubernetes.Interface) (map[string]string, string) {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps("kiln-system").Get(context.Background(), "kiln-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.Annotations, cm.Data["config.yaml"]
}

func TestUpgradePlanConfirmApply(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	const name, kctx = "up", "kiln-a"
	cleanup(t, e, name, kctx)
	cs := clusterA.Client
	ctx := context.Background()
	base, next := writeConfig(t, upgradeBase), writeConfig(t, upgradeNext)
	expect(t, e.kiln("create", "kube", name, "--context", kctx, "-c", base), 0)
	expect(t, e.kiln("project", "create", "kube", name, "default/blog", "--stack", "web", "--context", kctx), 0)
	keyBefore := authKeys(t, cs)
	up := func(extra ...string) result {
		return e.kiln(append([]string{"upgrade", "kube", name, "--context", kctx}, extra...)...)
	}

	t.Run("create --continue with a differing config names upgrade", func(t *testing.T) {
		r := e.kiln("create", "kube", name, "--context", kctx, "-c", next, "--continue")
		expect(t, r, 2)
		if !strings.Contains(r.stderr, "kiln upgrade kube up -c "+next) || !strings.Contains(r.stderr, "spec.domain") {
			t.Errorf("message should name kiln upgrade and the fields:\n%s", r.stderr)
		}
	})

	t.Run("dry run plans every change and writes nothing", func(t *testing.T) {
		before := world(t, cs)
		r := up("-c", next, "--dry-run", "-o", "json")
		expect(t, r, 0)
		p := plans(t, r)
		for _, want := range []string{
			"create Token /staging", "create Namespace /kiln-tenant-staging",
			"update Deployment kiln-system/kiln-gateway", "update Ingress kiln-system/default.blog",
			"update ConfigMap kiln-system/kiln-config",
			// The new tenant is fenced before the gateway changes.
			"create NetworkPolicy kiln-tenant-staging/kiln-deny-ingress",
			"create NetworkPolicy kiln-tenant-staging/kiln-allow-from-gateway",
			// The new tenant's token id is listed in the tenant table
			// before its token is written.
			"update ConfigMap kiln-system/kiln-auth",
		} {
			if p[want] == nil {
				t.Errorf("plan lacks %q; plan: %v", want, p)
			}
		}
		if len(p) != 8 {
			t.Errorf("plan has %d changes, want 8: %v", len(p), p)
		}
		if ev := p["update Deployment kiln-system/kiln-gateway"]; ev != nil && !hasField(ev, "spec.replicas") {
			t.Errorf("gateway update fields = %v, want spec.replicas", ev["fields"])
		}
		if ev := p["update ConfigMap kiln-system/kiln-config"]; ev != nil && (!hasField(ev, "spec.domain") || !hasField(ev, "spec.tenants")) {
			t.Errorf("kiln-config update fields = %v", ev["fields"])
		}
		if ev := p["update Ingress kiln-system/default.blog"]; ev != nil && !hasField(ev, "spec.rules[0].host") {
			t.Errorf("route update fields = %v", ev["fields"])
		}
		if !strings.Contains(r.stdout, "blog needs a restack") {
			t.Errorf("the project on the changed stack is not listed:\n%s", r.stdout)
		}
		if res := r.last(t, "result"); res["ok"] != true || !strings.Contains(res["message"].(string), "dry run") {
			t.Errorf("result = %v", res)
		}
		if after := world(t, cs); !reflect.DeepEqual(before, after) {
			t.Errorf("--dry-run changed the cluster (the Lease included):\nbefore %v\nafter  %v", before, after)
		}
	})

	t.Run("without --yes headless: exit 3, plan printed, nothing changed", func(t *testing.T) {
		before := world(t, cs)
		r := up("-c", next, "--headless")
		expect(t, r, 3)
		if !strings.Contains(r.stderr, "~ update deployment kiln-system/kiln-gateway: ") || !strings.Contains(r.stderr, "--yes") {
			t.Errorf("text plan or advice missing:\n%s", r.stderr)
		}
		if after := world(t, cs); !reflect.DeepEqual(before, after) {
			t.Errorf("unconfirmed upgrade changed the cluster:\nbefore %v\nafter  %v", before, after)
		}
	})

	t.Run("apply", func(t *testing.T) {
		r := up("-c", next, "--yes", "-o", "json")
		expect(t, r, 0)
		if _, err := cs.CoreV1().Namespaces().Get(ctx, "kiln-tenant-staging", metav1.GetOptions{}); err != nil {
			t.Errorf("tenant namespace: %v", err)
		}
		td, err := creds.Load(e.tokenDir(name))
		if err != nil {
			t.Fatal(err)
		}
		if !td.Manifest.HasTenant("staging") || td.Manifest.State != creds.StateCommitted {
			t.Errorf("token dir tenants %v (%s)", td.Manifest.Tenants, td.Manifest.State)
		}
		if keys := authKeys(t, cs); !reflect.DeepEqual(keys, keyBefore) {
			t.Errorf("kiln-auth changed: %v", keys)
		}
		if _, ok := keyBefore[td.Manifest.KeyID]; !ok {
			t.Errorf("token dir key %s is not the trusted key", td.Manifest.KeyID)
		}
		d, err := cs.AppsV1().Deployments("kiln-system").Get(ctx, "kiln-gateway", metav1.GetOptions{})
		if err != nil || *d.Spec.Replicas != 2 || d.Status.ReadyReplicas != 2 {
			t.Errorf("gateway not rolled out to 2 ready replicas: %v", err)
		}
		checkRoute(t, cs, "default", "blog", "blog.default.next.example.test", "")
		ann, data := configAnnotations(t, cs)
		if ann["kiln.dev/version"] != "dev" || ann["kiln.dev/schema-version"] != "1" || !strings.Contains(data, "next.example.test") {
			t.Errorf("kiln-config annotations %v, data:\n%s", ann, data)
		}
		if res := r.last(t, "result"); !strings.Contains(res["message"].(string), "restack") {
			t.Errorf("result should say a project still needs a restack: %v", res)
		}
		expect(t, e.kiln("wait", "kube", name, "--context", kctx, "--timeout", "1m"), 0)
	})

	t.Run("no changes: says so, writes only the Lease", func(t *testing.T) {
		before := world(t, cs)
		r := up("-c", next, "--yes", "-o", "json")
		expect(t, r, 0)
		if p := plans(t, r); len(p) != 0 {
			t.Errorf("plan of a converged platform: %v", p)
		}
		if res := r.last(t, "result"); !strings.Contains(res["message"].(string), "no changes") {
			t.Errorf("result = %v", res)
		}
		if after := world(t, cs); !reflect.DeepEqual(withoutLease(before), withoutLease(after)) {
			t.Errorf("no-op upgrade changed objects:\nbefore %v\nafter  %v", before, after)
		}
	})

	t.Run("--restack restacks the project onto the changed stack", func(t *testing.T) {
		r := up("-c", next, "--yes", "--restack", "-o", "json")
		expect(t, r, 0)
		if p := plans(t, r); p["update Project kiln-tenant-default/blog"] == nil || len(p) != 1 {
			t.Errorf("plan = %v", p)
		}
		d, err := cs.AppsV1().Deployments("kiln-tenant-default").Get(ctx, "blog", metav1.GetOptions{})
		if err != nil || d.Spec.Template.Spec.Containers[0].Image != "nginx:1.27.1-alpine" {
			t.Errorf("project not restacked: %v", err)
		}
	})

	t.Run("a removed tenant with projects needs --delete-projects", func(t *testing.T) {
		expect(t, e.kiln("project", "create", "kube", name, "staging/api", "--stack", "web", "--context", kctx), 0)
		back := writeConfig(t, strings.Replace(upgradeNext, "[default, staging]", "[default]", 1))
		before := world(t, cs)
		r := up("-c", back, "--yes")
		expect(t, r, 2)
		if !strings.Contains(r.stderr, "staging/api") || !strings.Contains(r.stderr, "--delete-projects") {
			t.Errorf("refusal should name the project and the flag:\n%s", r.stderr)
		}
		if after := world(t, cs); !reflect.DeepEqual(before, after) {
			t.Errorf("refused upgrade changed the cluster")
		}
		r = up("-c", back, "--yes", "--delete-projects", "-o", "json")
		expect(t, r, 0)
		if p := plans(t, r); p["delete Namespace /kiln-tenant-staging"] == nil || p["delete Token /staging"] == nil || p["delete Ingress kiln-system/staging.api"] == nil {
			t.Errorf("plan = %v", p)
		}
		waitNamespaceGone(t, cs, "kiln-tenant-staging")
		if _, err := cs.NetworkingV1().Ingresses("kiln-system").Get(ctx, "staging.api", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the removed tenant's route is left: %v", err)
		}
		td, err := creds.Load(e.tokenDir(name))
		if err != nil || td.Manifest.HasTenant("staging") || len(td.Tokens) != 1 {
			t.Errorf("staging token not removed: %v", err)
		}
	})

	t.Run("without -c: this kiln's manifests and version re-applied", func(t *testing.T) {
		// A platform an earlier kiln installed (no version record), whose
		// gateway image was changed by hand.
		cm, err := cs.CoreV1().ConfigMaps("kiln-system").Get(ctx, "kiln-config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		delete(cm.Annotations, "kiln.dev/version")
		delete(cm.Annotations, "kiln.dev/schema-version")
		if _, err := cs.CoreV1().ConfigMaps("kiln-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		d, err := cs.AppsV1().Deployments("kiln-system").Get(ctx, "kiln-gateway", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d.Spec.Template.Spec.Containers[0].Image = "example.test/old-gateway:1"
		if _, err := cs.AppsV1().Deployments("kiln-system").Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		r := up("--dry-run", "-o", "json")
		expect(t, r, 0)
		p := plans(t, r)
		if ev := p["update Deployment kiln-system/kiln-gateway"]; ev == nil || !hasField(ev, "spec.template.spec.containers[0].image") {
			t.Errorf("plan should put the gateway image back: %v", p)
		}
		if ev := p["update ConfigMap kiln-system/kiln-config"]; ev == nil || hasField(ev, "spec.domain") {
			t.Errorf("plan should record the version and nothing else on kiln-config: %v", ev)
		}
		expect(t, up("--yes"), 0)
		d, err = cs.AppsV1().Deployments("kiln-system").Get(ctx, "kiln-gateway", metav1.GetOptions{})
		if want := platform.GatewayImage("dev"); err != nil || d.Spec.Template.Spec.Containers[0].Image != want {
			t.Errorf("gateway image not put back to %s: %v", want, err)
		}
		if ann, data := configAnnotations(t, cs); ann["kiln.dev/version"] != "dev" || !strings.Contains(data, "next.example.test") {
			t.Errorf("kiln-config after upgrade without -c: %v\n%s", ann, data)
		}
	})

	t.Run("an older kiln refuses a newer platform", func(t *testing.T) {
		cm, err := cs.CoreV1().ConfigMaps("kiln-system").Get(ctx, "kiln-config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Annotations["kiln.dev/version"] = "v9.0.0"
		cm.Annotations["kiln.dev/schema-version"] = "7"
		if _, err := cs.CoreV1().ConfigMaps("kiln-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The previous subtest's upgrade rolled the gateway back to its
		// image: the controllers' last status writes of that rollout may
		// still land (seen on a loaded CI machine), so the snapshot is
		// taken once the world holds still.
		before := quietWorld(t, cs)
		for _, args := range [][]string{
			{"upgrade", "kube", name, "--context", kctx, "--yes"},
			{"create", "kube", name, "--context", kctx, "--continue"},
		} {
			r := e.kiln(args...)
			expect(t, r, 2)
			if !strings.Contains(r.stderr, "v9.0.0") || !strings.Contains(r.stderr, "this kiln is dev") {
				t.Errorf("%s: message should name both versions:\n%s", args[0], r.stderr)
			}
		}
		if after := world(t, cs); !reflect.DeepEqual(before, after) {
			var diff []string
			for k, v := range before {
				if after[k] != v {
					diff = append(diff, fmt.Sprintf("%s: %s -> %s", k, v, after[k]))
				}
			}
			for k, v := range after {
				if _, ok := before[k]; !ok {
					diff = append(diff, fmt.Sprintf("%s: (none) -> %s", k, v))
				}
			}
			sort.Strings(diff)
			t.Errorf("refused operations changed the cluster:\n%s", strings.Join(diff, "\n"))
		}
		r := e.kiln("status", "kube", name, "--context", kctx)
		expect(t, r, 0)
		if !strings.Contains(r.stdout, "Versions  platform kiln v9.0.0 (schema 7), this kiln dev (schema 1), Kubernetes v") || !strings.Contains(r.stdout, "newer than this kiln") {
			t.Errorf("status does not show the versions:\n%s", r.stdout)
		}
	})
}

// upgradeCrashPoints are the checkpoints of an upgrade where the crash hook
// kills kiln: going forward (tenant added, gateway, ingress, config) and
// back (tenant removed).
var upgradeCrashForward = []string{
	"after-plan", "upgrade-after-lock",
	// The tenant-table protocol adding a tenant: staged table, token dir
	// swapped (the staged table is then already the final one; the final
	// write, tokens-after-table, happens going back).
	"tokens-after-table-staged", "tokens-after-reissue",
	"upgrade-after-tokens", "upgrade-after-tenants",
	"upgrade-after-deployment", "after-platform", "upgrade-after-ingresses", "after-projects",
	"upgrade-after-config",
}

var upgradeCrashBack = []string{
	"tokens-after-table", "upgrade-after-tenants-removed", "upgrade-after-tokens-removed", "upgrade-after-config",
}

func TestKilledUpgradeConverges(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	const name, kctx = "upcrash", "kiln-b"
	cleanup(t, e, name, kctx)
	cs := clusterB.Client
	base, next := writeConfig(t, upgradeBase), writeConfig(t, upgradeNext)
	expect(t, e.kiln("create", "kube", name, "--context", kctx, "-c", base), 0)
	expect(t, e.kiln("project", "create", "kube", name, "default/blog", "--stack", "web", "--context", kctx), 0)
	keys := authKeys(t, cs)
	check := func(t *testing.T, domain string, tenants int) {
		t.Helper()
		if got := authKeys(t, cs); !reflect.DeepEqual(got, keys) {
			t.Errorf("kiln-auth changed: %v", got)
		}
		td, err := creds.Load(e.tokenDir(name))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := keys[td.Manifest.KeyID]; !ok || td.Manifest.State != creds.StateCommitted || len(td.Tokens) != tenants {
			t.Errorf("token dir: key %s (%s), %d tokens", td.Manifest.KeyID, td.Manifest.State, len(td.Tokens))
		}
		_, data := configAnnotations(t, cs)
		if !strings.Contains(data, domain) {
			t.Errorf("kiln-config does not hold domain %s:\n%s", domain, data)
		}
		checkRoute(t, cs, "default", "blog", "blog.default."+domain, "")
		expect(t, e.kiln("wait", "kube", name, "--context", kctx, "--timeout", "1m"), 0)
	}
	crash := func(t *testing.T, point, cfg string) {
		r := e.kilnWith([]string{"KILN_TEST_CRASH_AT=" + point}, "upgrade", "kube", name, "--context", kctx, "-c", cfg, "--yes", "-o", "json")
		if !r.killed {
			t.Fatalf("kiln was not killed at %s:\n%s", point, r)
		}
		r = e.kiln("upgrade", "kube", name, "--context", kctx, "-c", cfg, "--yes", "-o", "json")
		expect(t, r, 0)
	}
	for _, point := range upgradeCrashForward {
		t.Run("forward/"+point, func(t *testing.T) {
			crash(t, point, next)
			check(t, "next.example.test", 2)
			expect(t, e.kiln("upgrade", "kube", name, "--context", kctx, "-c", base, "--yes"), 0)
		})
	}
	for _, point := range upgradeCrashBack {
		t.Run("back/"+point, func(t *testing.T) {
			expect(t, e.kiln("upgrade", "kube", name, "--context", kctx, "-c", next, "--yes"), 0)
			crash(t, point, base)
			check(t, "up.example.test", 1)
		})
	}
}

// TestUpgradeTerminalPrompt: at a terminal, upgrade prints the plan and
// asks; "n" exits 3 having changed nothing (the Lease included), "y"
// applies it.
func TestUpgradeTerminalPrompt(t *testing.T) {
	skipShort(t)
	needTmux(t)
	const name, kctx = "upprompt", "kiln-a"
	e := newEnv(t)
	cleanup(t, e, name, kctx)
	cs := clusterA.Client
	expect(t, e.kiln("create", "kube", name, "--context", kctx, "-c", writeConfig(t, upgradeBase)), 0)
	next := writeConfig(t, upgradeNext)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const prompt = "Apply it? [y/N]"
	ask := func(answer string) string {
		x := &tmux{t: t, socket: filepath.Join(t.TempDir(), "tmux.sock"), session: "kiln"}
		defer func() { _, _ = x.run("kill-server") }()
		kiln := fmt.Sprintf("env KILN_E2E_AS_KILN=1 TERM=xterm-256color XDG_STATE_HOME=%q XDG_DATA_HOME=%q KILN_KEYRING_PASSPHRASE=e2e-passphrase %q upgrade kube %s -c %q --context %s --kubeconfig %q --keyring-backend file",
			e.state, e.data, exe, name, next, kctx, kubeconfigPath)
		x.must("new-session", "-d", "-s", x.session, "-x", "250", "-y", "50", "sh", "-c", kiln+`; echo "kiln exited with $?"; sleep 600`)
		x.waitFor(time.Minute, prompt)
		x.text(answer)
		x.keys("Enter")
		// Not waitFor: it treats the ✗ line of a refusal as a failure.
		var out string
		err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
			out, _ = x.run("capture-pane", "-p", "-J", "-S", "-5000", "-t", x.session)
			return strings.Contains(out, "kiln exited with"), nil
		})
		if err != nil {
			t.Fatalf("kiln did not exit after the answer %q:\n%s", answer, out)
		}
		return out
	}
	before := world(t, cs)
	screen := ask("n")
	if !strings.Contains(screen, "kiln exited with 3") || !strings.Contains(screen, "~ update deployment kiln-system/kiln-gateway") {
		t.Fatalf("answer n: want the plan and exit 3:\n%s", screen)
	}
	if after := world(t, cs); !reflect.DeepEqual(before, after) {
		t.Errorf("upgrade answered no changed the cluster:\nbefore %v\nafter  %v", before, after)
	}
	screen = ask("y")
	if !strings.Contains(screen, "kiln exited with 0") {
		t.Fatalf("answer y: want exit 0:\n%s", screen)
	}
	if _, err := cs.CoreV1().Namespaces().Get(context.Background(), "kiln-tenant-staging", metav1.GetOptions{}); err != nil {
		t.Errorf("upgrade answered yes did not add the tenant: %v", err)
	}
}

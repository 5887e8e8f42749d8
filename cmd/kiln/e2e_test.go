package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/platform"
)

func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: needs the control plane (run without -short)")
	}
}

// skipUnless skips t with why when ok is false, except in CI (CI set, as
// .ci/run does): there a missing prerequisite is a failure, since .ci/run
// installs every one and a skip would hide the test's result.
func skipUnless(t *testing.T, ok bool, why string) {
	t.Helper()
	switch {
	case ok:
	case os.Getenv("CI") != "":
		t.Fatalf("CI: %s", why)
	default:
		t.Skip(why)
	}
}

// needTmux skips (fails in CI) a test that drives the binary in tmux when
// tmux is not installed.
func needTmux(t *testing.T) {
	t.Helper()
	_, err := exec.LookPath("tmux")
	skipUnless(t, err == nil, "tmux is not installed: the terminal tests need it (apt-get install tmux)")
}

// snapshot records the resourceVersion of every kiln object plus
// kiln-auth's content, to prove an operation changed nothing.
func snapshot(t *testing.T, cs kubernetes.Interface, skipLease bool) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=kiln"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range nss.Items {
		out["ns/"+ns.Name] = ns.ResourceVersion
	}
	cms, err := cs.CoreV1().ConfigMaps("kiln-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		out["cm/"+cm.Name] = cm.ResourceVersion
		if cm.Name == "kiln-auth" {
			out["kiln-auth-data"] = cm.Data["keys.json"]
		}
	}
	deps, err := cs.AppsV1().Deployments("kiln-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deps.Items {
		out["deploy/"+d.Name] = d.ResourceVersion
	}
	svcs, err := cs.CoreV1().Services("kiln-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs.Items {
		out["svc/"+s.Name] = s.ResourceVersion
	}
	if !skipLease {
		leases, err := cs.CoordinationV1().Leases("kiln-system").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range leases.Items {
			out["lease/"+l.Name] = l.ResourceVersion
		}
	}
	return out
}

func authKeys(t *testing.T, cs kubernetes.Interface) map[string]string {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps("kiln-system").Get(context.Background(), "kiln-auth", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	if err := json.Unmarshal([]byte(cm.Data["keys.json"]), &keys); err != nil {
		t.Fatal(err)
	}
	return keys
}

func readTokens(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	entries, err := os.ReadDir(filepath.Join(dir, "tokens"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, "tokens", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func TestCreateWaitStatusDestroy(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "alpha", "kiln-a")
	r := e.kiln("create", "kube", "alpha", "--context", "kiln-a", "-o", "json")
	expect(t, r, 0)

	// Event stream: phases in order, a fresh decision, a successful result.
	var phases []string
	for _, ev := range r.events(t) {
		if ev["type"] == "phase" && ev["state"] != "started" {
			phases = append(phases, fmt.Sprintf("%s:%s", ev["phase"], ev["state"]))
		}
	}
	want := []string{"discover:succeeded", "plan:succeeded", "lock:succeeded", "credentials:succeeded", "infrastructure:skipped", "platform:succeeded", "readiness:succeeded"}
	if !reflect.DeepEqual(phases, want) {
		t.Errorf("phases = %v, want %v", phases, want)
	}
	if d := r.last(t, "decision"); d["decision"] != "fresh" {
		t.Errorf("decision = %v, want fresh", d)
	}
	res := r.last(t, "result")
	if res["ok"] != true || res["exit_code"] != float64(0) || res["token_dir"] != e.tokenDir("alpha") {
		t.Errorf("result = %v", res)
	}
	disc := r.last(t, "discovery")
	clusters, _ := disc["clusters"].([]any)
	var dead bool
	for _, c := range clusters {
		m := c.(map[string]any)
		if m["location"] == "kiln-dead" {
			dead = m["infra"] == "unreachable" && m["error"] != ""
		}
	}
	if !dead {
		t.Errorf("discovery does not report the unreachable context kiln-dead: %v", disc)
	}

	// In the cluster: the objects of DESIGN.md §5, with their labels.
	cs := clusterA.Client
	ctx := context.Background()
	ns, err := cs.CoreV1().Namespaces().Get(ctx, "kiln-system", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Labels["app.kubernetes.io/managed-by"] != "kiln" || ns.Labels["kiln.dev/cluster"] != "alpha" {
		t.Errorf("kiln-system labels = %v", ns.Labels)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "kiln-tenant-default", metav1.GetOptions{}); err != nil {
		t.Errorf("tenant namespace: %v", err)
	}
	cfg, err := cs.CoreV1().ConfigMaps("kiln-system").Get(ctx, "kiln-config", metav1.GetOptions{})
	if err != nil || !strings.Contains(cfg.Data["config.yaml"], "kind: ClusterConfig") {
		t.Errorf("kiln-config: %v %v", err, cfg.Data)
	}
	if _, err := cs.AppsV1().Deployments("kiln-system").Get(ctx, "kiln-gateway", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
	if _, err := cs.CoreV1().Services("kiln-system").Get(ctx, "kiln-gateway", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}

	// The token dir: committed, its key is the one kiln-auth trusts, and
	// the permissions are tight.
	td, err := creds.Load(e.tokenDir("alpha"))
	if err != nil {
		t.Fatal(err)
	}
	keys := authKeys(t, cs)
	if _, ok := keys[td.Manifest.KeyID]; !ok || len(keys) != 1 {
		t.Errorf("kiln-auth keys %v, token dir key %s", keys, td.Manifest.KeyID)
	}
	if td.Manifest.State != creds.StateCommitted {
		t.Errorf("token dir state %s", td.Manifest.State)
	}
	checkPerms(t, e.tokenDir("alpha"))

	expect(t, e.kiln("wait", "kube", "alpha", "--timeout", "1m"), 0)

	r = e.kiln("status", "kube", "alpha", "-o", "json")
	expect(t, r, 0)
	current := 0
	var frontDoor, isolation map[string]any
	for _, ev := range r.events(t) {
		if ev["type"] == "resource" {
			if ev["status"] != "Current" {
				t.Errorf("status: %v", ev)
			}
			current++
		}
		switch ev["type"] {
		case "frontdoor":
			frontDoor = ev
		case "isolation":
			isolation = ev
		}
	}
	// No IngressClass in the test cluster: kube's default front door is a
	// NodePort, at a node's InternalIP; kwok's nodes run no network plugin.
	if addr, _ := frontDoor["address"].(string); frontDoor["mode"] != "nodePort" || frontDoor["ready"] != true || !strings.Contains(addr, ":") ||
		!strings.HasPrefix(fmt.Sprint(frontDoor["dns_record"]), "*.alpha.kiln.test A ") {
		t.Errorf("status frontdoor event %v, want nodePort at NODE-IP:PORT with an A record", frontDoor)
	}
	if isolation["state"] != "unknown" || !strings.Contains(fmt.Sprint(isolation["reason"]), "no recognised network plugin") {
		t.Errorf("status isolation event %v, want unknown (no network plugin)", isolation)
	}
	// kiln-system, kiln-auth, kiln-config, one tenant namespace, two
	// NetworkPolicies in kiln-system and two in the tenant's, the
	// gateway's ServiceAccount, Deployment and Service.
	if current != 11 {
		t.Errorf("status reported %d Current objects, want 11", current)
	}
	r = e.kiln("status", "kube", "alpha")
	expect(t, r, 0)
	for _, s := range []string{"Platform  ready", "kiln-gateway", "1 ready endpoint", "trusted", "Entry     front door nodePort at ", "DNS record to create: *.alpha.kiln.test A ", "Isolation network isolation: unknown: "} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("status text lacks %q:\n%s", s, r.stdout)
		}
	}

	r = e.kiln("tokens", "list", "-o", "json")
	expect(t, r, 0)
	if !strings.Contains(r.stdout, `"name":"alpha"`) || !strings.Contains(r.stdout, td.Manifest.KeyID) {
		t.Errorf("tokens list: %s", r.stdout)
	}

	r = e.kiln("destroy", "kube", "alpha", "--yes", "-o", "json")
	expect(t, r, 0)
	waitNamespaceGone(t, cs, "kiln-system")
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "kiln-tenant-default", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("tenant namespace still there: %v", err)
	}
	aside, _ := r.last(t, "result")["token_dir"].(string)
	if !strings.Contains(aside, "tokens.destroyed-") {
		t.Fatalf("destroy result token_dir = %q", aside)
	}
	if _, err := creds.Load(aside); err != nil {
		t.Errorf("moved-aside token dir unusable: %v", err)
	}
	if _, err := os.Stat(e.tokenDir("alpha")); !os.IsNotExist(err) {
		t.Errorf("token dir still at the default path: %v", err)
	}
	r = e.kiln("tokens", "list", "-o", "json")
	if strings.Contains(r.stdout, `"name":"alpha"`) {
		t.Errorf("keyring entry survived destroy: %s", r.stdout)
	}
}

func checkPerms(t *testing.T, dir string) {
	t.Helper()
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if info.IsDir() {
			want = 0o700
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", path, info.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSecondCreateNeedsContinue(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "beta", "kiln-a")
	expect(t, e.kiln("create", "kube", "beta", "--context", "kiln-a"), 0)
	cs := clusterA.Client
	before := snapshot(t, cs, false)
	tokensBefore := readTokens(t, e.tokenDir("beta"))
	tdBefore, err := creds.Load(e.tokenDir("beta"))
	if err != nil {
		t.Fatal(err)
	}

	r := e.kiln("create", "kube", "beta", "--context", "kiln-a", "-o", "json")
	expect(t, r, 3)
	if msg := r.last(t, "result")["message"].(string); !strings.Contains(msg, "--continue") || !strings.Contains(msg, "nothing was changed") {
		t.Errorf("exit-3 message: %s", msg)
	}
	if after := snapshot(t, cs, false); !reflect.DeepEqual(before, after) {
		t.Errorf("create without --continue changed the cluster:\nbefore %v\nafter  %v", before, after)
	}

	// A different user (no token dir, empty keyring) is refused too and
	// generates nothing.
	other := newEnv(t)
	expect(t, other.kiln("create", "kube", "beta", "--context", "kiln-a"), 3)
	if _, err := os.Stat(other.tokenDir("beta")); !os.IsNotExist(err) {
		t.Errorf("refused create wrote a token dir: %v", err)
	}
	// ...and with --continue it has no trusted key: exit 1, naming the key.
	r = other.kiln("create", "kube", "beta", "--context", "kiln-a", "--continue")
	expect(t, r, 1)
	if !strings.Contains(r.stderr, tdBefore.Manifest.KeyID) || !strings.Contains(r.stderr, "--token-dir") {
		t.Errorf("exit-1 message should name the trusted key and --token-dir:\n%s", r.stderr)
	}

	r = e.kiln("create", "kube", "beta", "--context", "kiln-a", "--continue", "-o", "json")
	expect(t, r, 0)
	if d := r.last(t, "decision"); d["decision"] != "continue" {
		t.Errorf("decision %v", d)
	}
	td, err := creds.Load(e.tokenDir("beta"))
	if err != nil {
		t.Fatal(err)
	}
	if td.Manifest.KeyID != tdBefore.Manifest.KeyID {
		t.Errorf("key id changed: %s -> %s", tdBefore.Manifest.KeyID, td.Manifest.KeyID)
	}
	if !reflect.DeepEqual(tokensBefore, readTokens(t, e.tokenDir("beta"))) {
		t.Error("tokens are not byte-identical after --continue")
	}
	// Continue on a converged cluster writes nothing but the lease.
	if after := snapshot(t, cs, true); !reflect.DeepEqual(withoutLease(before), after) {
		t.Errorf("--continue on a ready cluster changed objects:\nbefore %v\nafter  %v", before, after)
	}
}

func withoutLease(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if !strings.HasPrefix(k, "lease/") {
			out[k] = v
		}
	}
	return out
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kiln.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const twoTenants = `apiVersion: kiln.dev/v1alpha1
kind: ClusterConfig
spec:
  tenants: [default, staging]
  stacks:
    - {name: web, image: "nginx:1.27-alpine", port: 80, cpu: 100m, memory: 128Mi}
`

func TestConfigFileAndContinueWithDifferentConfig(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "gamma", "kiln-b")
	cfg := writeConfig(t, twoTenants)
	expect(t, e.kiln("create", "kube", "gamma", "--context", "kiln-b", "-c", cfg), 0)
	for _, ns := range []string{"kiln-tenant-default", "kiln-tenant-staging"} {
		if _, err := clusterB.Client.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{}); err != nil {
			t.Errorf("%s: %v", ns, err)
		}
	}
	td, err := creds.Load(e.tokenDir("gamma"))
	if err != nil {
		t.Fatal(err)
	}
	if len(td.Tokens) != 2 {
		t.Errorf("tokens for %d tenants, want 2", len(td.Tokens))
	}
	// The same config continues; a different one is refused, naming fields.
	expect(t, e.kiln("create", "kube", "gamma", "--context", "kiln-b", "-c", cfg, "--continue"), 0)
	other := writeConfig(t, strings.Replace(twoTenants, "[default, staging]", "[default]", 1))
	before := snapshot(t, clusterB.Client, false)
	r := e.kiln("create", "kube", "gamma", "--context", "kiln-b", "-c", other, "--continue")
	expect(t, r, 2)
	if !strings.Contains(r.stderr, "spec.tenants") {
		t.Errorf("differing fields not listed:\n%s", r.stderr)
	}
	if after := snapshot(t, clusterB.Client, false); !reflect.DeepEqual(before, after) {
		t.Errorf("refused --continue changed the cluster")
	}
}

func TestNameIsUniqueAcrossContexts(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "delta", "kiln-a")
	expect(t, e.kiln("create", "kube", "delta", "--context", "kiln-a"), 0)
	r := e.kiln("create", "kube", "delta", "--context", "kiln-b", "--continue")
	expect(t, r, 2)
	if !strings.Contains(r.stderr, "kiln-a") {
		t.Errorf("message does not say where delta lives:\n%s", r.stderr)
	}
	if _, err := clusterB.Client.CoreV1().Namespaces().Get(context.Background(), "kiln-system", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("refused create touched kiln-b: %v", err)
	}
	// A cluster hosts one platform: another NAME on kiln-a is refused.
	r = e.kiln("create", "kube", "epsilon", "--context", "kiln-a")
	expect(t, r, 2)
	if !strings.Contains(r.stderr, "already hosts kiln cluster delta") {
		t.Errorf("message:\n%s", r.stderr)
	}
	// Operations on an existing cluster find it without --context.
	expect(t, e.kiln("status", "kube", "delta"), 0)
	r = e.kiln("status", "kube", "nosuch")
	expect(t, r, 2)
	if !strings.Contains(r.stderr, "no kiln cluster nosuch") || !strings.Contains(r.stderr, "kiln-dead") {
		t.Errorf("not-found message should name the unreachable context:\n%s", r.stderr)
	}
}

// crashPoints are the checkpoints where the crash hook kills kiln: every
// phase boundary and every step of the platform apply.
var crashPoints = []string{
	"after-discover", "after-plan", "after-namespace", "after-lease", "after-lock",
	"after-token-dir-pending", "after-credentials", "after-infrastructure",
	"after-auth", "after-config", "after-commit", "after-tenants",
	"after-serviceaccount", "after-deployment", "after-service", "after-platform",
}

func TestKilledCreateConverges(t *testing.T) {
	skipShort(t)
	// Two lanes, one per cluster, run in parallel; within a lane the crash
	// points run one after another (a cluster hosts one platform).
	for lane, context := range []string{"kiln-a", "kiln-b"} {
		t.Run(context, func(t *testing.T) {
			t.Parallel()
			for i, point := range crashPoints {
				if i%2 != lane {
					continue
				}
				t.Run(point, func(t *testing.T) { crashAndRerun(t, point, context) })
			}
		})
	}
}

func crashAndRerun(t *testing.T, point, context string) {
	e := newEnv(t)
	// NAME is unique per kubeconfig, and the two lanes share one.
	name := "crash-" + strings.TrimPrefix(context, "kiln-")
	cleanup(t, e, name, context)
	r := e.kilnWith([]string{"KILN_TEST_CRASH_AT=" + point}, "create", "kube", name, "--context", context, "-o", "json")
	if !r.killed {
		t.Fatalf("kiln was not killed at %s:\n%s", point, r)
	}
	// Run again, as automation would ("create or continue").
	r = e.kiln("create", "kube", name, "--context", context, "--continue", "-o", "json")
	expect(t, r, 0)
	cs := clientFor(context)
	keys := authKeys(t, cs)
	td, err := creds.Load(e.tokenDir(name))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 {
		t.Errorf("kiln-auth trusts %d keys, want exactly 1", len(keys))
	}
	if _, ok := keys[td.Manifest.KeyID]; !ok || td.Manifest.State != creds.StateCommitted {
		t.Errorf("token dir key %s (%s) not the trusted one %v", td.Manifest.KeyID, td.Manifest.State, keys)
	}
	// wait verifies every token against kiln-auth.
	expect(t, e.kiln("wait", "kube", name, "--context", context, "--timeout", "1m"), 0)
}

func TestConcurrentCreatesAreSerialized(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "zeta", "kiln-a")
	first := e.startPaused("after-lock", "create", "kube", "zeta", "--context", "kiln-a", "-o", "json")

	// The first holds the lock: a second create of the same cluster by
	// another user exits 4 naming the holder.
	other := newEnv(t)
	r := other.kiln("create", "kube", "zeta", "--context", "kiln-a", "--continue")
	expect(t, r, 4)
	if !strings.Contains(r.stderr, "locked by kiln create zeta") || !strings.Contains(r.stderr, "since") {
		t.Errorf("exit-4 message should name holder and time:\n%s", r.stderr)
	}
	r = other.kiln("destroy", "kube", "zeta", "--context", "kiln-a", "--yes")
	expect(t, r, 4)

	expect(t, first.resume(), 0)
	if len(authKeys(t, clusterA.Client)) != 1 {
		t.Error("more than one trusted key after concurrent creates")
	}
}

func TestInterruptedCreateExits130AndReleasesTheLock(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "eta", "kiln-b")
	p := e.startPaused("after-config", "create", "kube", "eta", "--context", "kiln-b", "-o", "json")
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r := p.resume()
	expect(t, r, 130)
	if !strings.Contains(r.stdout, `"exit_code":130`) {
		t.Errorf("no result event with exit code 130:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "interrupted during the platform phase") || !strings.Contains(r.stdout, "--continue") {
		t.Errorf("the interrupt result does not say what was left and how to finish:\n%s", r.stdout)
	}
	// The lock was released: a rerun proceeds at once and converges.
	expect(t, e.kiln("create", "kube", "eta", "--context", "kiln-b", "--continue"), 0)
}

func TestWaitTimeoutAndUnverifiableTenant(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "theta", "kiln-a")
	expect(t, e.kiln("create", "kube", "theta", "--context", "kiln-a"), 0)
	cs := clusterA.Client
	ctx := context.Background()

	// A gateway rollout that can never finish: wait times out with exit 5.
	patch := []byte(`{"spec":{"template":{"spec":{"nodeSelector":{"kiln.dev/no-such-node":"x"}}}}}`)
	if _, err := cs.AppsV1().Deployments("kiln-system").Patch(ctx, "kiln-gateway", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	r := e.kiln("wait", "kube", "theta", "--timeout", "3s")
	expect(t, r, 5)
	if !strings.Contains(r.stderr, "kiln-gateway") {
		t.Errorf("timeout message does not name the deployment:\n%s", r.stderr)
	}
	undo := []byte(`{"spec":{"template":{"spec":{"nodeSelector":null}}}}`)
	if _, err := cs.AppsV1().Deployments("kiln-system").Patch(ctx, "kiln-gateway", types.StrategicMergePatchType, undo, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, e.kiln("wait", "kube", "theta", "--timeout", "1m"), 0)

	// A tenant added to kiln-config by hand has no token: wait exits 1
	// naming it; create --continue signs it with the trusted key.
	cm, err := cs.CoreV1().ConfigMaps("kiln-system").Get(ctx, "kiln-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["config.yaml"] = strings.Replace(cm.Data["config.yaml"], "  - default\n", "  - default\n  - extra\n", 1)
	if _, err := cs.CoreV1().ConfigMaps("kiln-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = e.kiln("wait", "kube", "theta", "--timeout", "3s")
	if r.code != 5 && r.code != 1 {
		t.Fatalf("wait with a missing tenant namespace: %s", r)
	}
	keyBefore := authKeys(t, cs)
	expect(t, e.kiln("create", "kube", "theta", "--continue"), 0)
	if !reflect.DeepEqual(keyBefore, authKeys(t, cs)) {
		t.Error("continue changed kiln-auth")
	}
	td, err := creds.Load(e.tokenDir("theta"))
	if err != nil || td.Tokens["extra"] == "" {
		t.Fatalf("no token for tenant extra: %v", err)
	}
	// Now break the tenant's token by pointing the dir at a config whose
	// tenant list has one more; remove the token by rewriting the dir
	// without it: wait must name the tenant.
	cm, _ = cs.CoreV1().ConfigMaps("kiln-system").Get(ctx, "kiln-config", metav1.GetOptions{})
	cm.Data["config.yaml"] = strings.Replace(cm.Data["config.yaml"], "  - extra\n", "  - extra\n  - late\n", 1)
	if _, err := cs.CoreV1().ConfigMaps("kiln-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, nsObj("kiln-tenant-late"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// With its NetworkPolicies, so that only the token is missing.
	late := config.Default("theta")
	late.Spec.Tenants = []string{"late"}
	for _, obj := range platform.TenantPolicyObjects("theta", late) {
		if _, err := platform.Ensure(ctx, cs, obj); err != nil {
			t.Fatal(err)
		}
	}
	r = e.kiln("wait", "kube", "theta", "--timeout", "1m")
	expect(t, r, 1)
	if !strings.Contains(r.stderr, "tenant late") {
		t.Errorf("wait does not name the tenant whose token is missing:\n%s", r.stderr)
	}
}

func TestDriftIsRepairedByContinue(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "iota", "kiln-b")
	expect(t, e.kiln("create", "kube", "iota", "--context", "kiln-b"), 0)
	cs := clusterB.Client
	ctx := context.Background()
	d, err := cs.AppsV1().Deployments("kiln-system").Get(ctx, "kiln-gateway", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := d.Spec.Template.Spec.Containers[0].Image
	d.Spec.Template.Spec.Containers[0].Image = "example.test/not-the-gateway:1"
	if _, err := cs.AppsV1().Deployments("kiln-system").Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, e.kiln("create", "kube", "iota", "--continue"), 0)
	d, err = cs.AppsV1().Deployments("kiln-system").Get(ctx, "kiln-gateway", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Spec.Containers[0].Image; got != want {
		t.Errorf("gateway image %s after continue, want %s", got, want)
	}
}

func TestBadInput(t *testing.T) {
	skipShort(t)
	// A token dir of another cluster, a corrupt one, one without its key.
	e := newEnv(t)
	otherDir := filepath.Join(t.TempDir(), "other")
	key, err := creds.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	otd, err := creds.NewTokenDir("someone-else", "kube", "kiln-a", key, []string{"default"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := creds.Write(otherDir, otd); err != nil {
		t.Fatal(err)
	}
	corrupt := filepath.Join(t.TempDir(), "corrupt")
	if err := creds.Write(corrupt, otd); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(corrupt, "manifest.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	nokey := filepath.Join(t.TempDir(), "nokey")
	if err := creds.Write(nokey, otd); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(nokey, "signing-key.pem")); err != nil {
		t.Fatal(err)
	}
	unknownField := writeConfig(t, "apiVersion: kiln.dev/v1alpha1\nkind: ClusterConfig\nspec:\n  tenants: [default]\n  gatway: {}\n")
	badValue := writeConfig(t, "apiVersion: kiln.dev/v1alpha1\nkind: ClusterConfig\nspec:\n  stacks:\n    - {name: web, image: x, port: 70000}\n")

	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"uppercase name", []string{"create", "kube", "Bad_Name", "--context", "kiln-a"}, 2, []string{"NAME", "Bad_Name"}},
		{"long name", []string{"create", "kube", strings.Repeat("a", 41), "--context", "kiln-a"}, 2, []string{"NAME", "40"}},
		{"unknown provider", []string{"create", "gcp", "x1", "--context", "kiln-a"}, 2, []string{"PROVIDER", "gcp"}},
		{"missing args", []string{"create", "kube"}, 2, []string{"usage"}},
		{"bad output", []string{"status", "kube", "x1", "-o", "yaml"}, 2, []string{"--output"}},
		{"unknown context", []string{"create", "kube", "x1", "--context", "nope"}, 2, []string{"--context", "nope"}},
		{"unknown config field", []string{"create", "kube", "x1", "--context", "kiln-a", "-c", unknownField}, 2, []string{"kiln.yaml:5:3", "spec.gatway", "unknown field"}},
		{"bad config value", []string{"create", "kube", "x1", "--context", "kiln-a", "-c", badValue}, 2, []string{"kiln.yaml:5", "spec.stacks[0].port"}},
		{"missing config file", []string{"create", "kube", "x1", "--context", "kiln-a", "-c", "/nonexistent/kiln.yaml"}, 2, []string{"/nonexistent/kiln.yaml"}},
		{"token dir of another cluster", []string{"create", "kube", "x1", "--context", "kiln-a", "--token-dir", otherDir}, 2, []string{otherDir, "someone-else"}},
		{"corrupt manifest", []string{"create", "kube", "x1", "--context", "kiln-a", "--token-dir", corrupt}, 2, []string{"manifest.json"}},
		{"missing signing key", []string{"create", "kube", "x1", "--context", "kiln-a", "--token-dir", nokey}, 2, []string{"signing-key.pem"}},
		{"aws regions on kube", []string{"create", "kube", "x1", "--context", "kiln-a", "--region", "us-east-1"}, 2, []string{"--region"}},
		{"bad timeout", []string{"wait", "kube", "x1", "--timeout", "-1s"}, 2, []string{"--timeout"}},
		{"bad keyring backend", []string{"tokens", "list", "--keyring-backend", "nope"}, 2, []string{"--keyring-backend"}},
	}
	dirs := []string{otherDir, corrupt, nokey}
	before := map[string]map[string][]byte{}
	for _, d := range dirs {
		before[d] = readAll(t, d)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.kiln(tc.args...)
			expect(t, r, tc.code)
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("message lacks %q:\n%s", w, r.stderr)
				}
			}
		})
	}
	for _, d := range dirs {
		if !reflect.DeepEqual(before[d], readAll(t, d)) {
			t.Errorf("%s was modified by a refused run", d)
		}
	}
	if _, err := clusterA.Client.CoreV1().Namespaces().Get(context.Background(), "kiln-system", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a refused run created kiln-system: %v", err)
	}
}

func readAll(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		out[path] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSecretServiceKeyring(t *testing.T) {
	skipShort(t)
	skipUnless(t, os.Getenv("KILN_TEST_SECRET_SERVICE") == "1",
		"needs a Secret Service session: run under hack/with-secret-service.sh with KILN_TEST_SECRET_SERVICE=1 (make test does)")
	e := newEnv(t)
	cleanup(t, e, "kappa", "kiln-b")
	ss := "--keyring-backend=secret-service"
	expect(t, e.kiln("create", "kube", "kappa", "--context", "kiln-b", ss), 0)
	r := e.kiln("tokens", "list", "-o", "json", ss)
	expect(t, r, 0)
	var list struct {
		Backend string `json:"backend"`
		Entries []struct {
			Name     string `json:"name"`
			TokenDir string `json:"token_dir"`
		} `json:"entries"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatal(err)
	}
	if list.Backend != "secret-service" || !strings.Contains(r.stdout, e.tokenDir("kappa")) {
		t.Fatalf("tokens list: %s", r.stdout)
	}
	// The keyring finds a token dir that is not at the default path: move
	// the dir, point the keyring at it by re-creating with --token-dir.
	moved := filepath.Join(t.TempDir(), "moved")
	if err := os.Rename(e.tokenDir("kappa"), moved); err != nil {
		t.Fatal(err)
	}
	expect(t, e.kiln("create", "kube", "kappa", "--continue", "--token-dir", moved, ss), 0)
	expect(t, e.kiln("wait", "kube", "kappa", ss), 0) // found through the keyring alone
	expect(t, e.kiln("tokens", "forget", "kube", "kappa", ss), 0)
	r = e.kiln("wait", "kube", "kappa", ss, "--timeout", "10s")
	expect(t, r, 1) // forgotten: the default path is empty now
	// Put it back so cleanup's destroy finds the key.
	expect(t, e.kiln("create", "kube", "kappa", "--continue", "--token-dir", moved, ss), 0)
}

func nsObj(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func TestStatusWatchStreamsChanges(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "lambda", "kiln-a")
	expect(t, e.kiln("create", "kube", "lambda", "--context", "kiln-a"), 0)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := e.command(ctx, nil, "status", "kube", "lambda", "--watch", "-o", "json")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	var all strings.Builder
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			all.WriteString(sc.Text() + "\n")
			lines <- sc.Text()
		}
		close(lines)
	}()
	// next returns the next resource event about the gateway Deployment.
	next := func() map[string]any {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("status --watch ended early:\n%s", stderr.String())
				}
				var ev map[string]any
				if json.Unmarshal([]byte(l), &ev) == nil && ev["type"] == "resource" && ev["kind"] == "Deployment" {
					return ev
				}
			case <-ctx.Done():
				t.Fatal("no deployment event")
			}
		}
	}
	// The snapshot, then the watch's own first observation.
	if ev := next(); ev["status"] != "Current" {
		t.Fatalf("first deployment status %v", ev)
	}
	cs := clusterA.Client
	// Re-read on a conflict: the deployment controller may write between
	// the read and the update (the scale carries the resourceVersion).
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale, err := cs.AppsV1().Deployments("kiln-system").GetScale(ctx, "kiln-gateway", metav1.GetOptions{})
		if err != nil {
			return err
		}
		scale.Spec.Replicas = 2
		_, err = cs.AppsV1().Deployments("kiln-system").UpdateScale(ctx, "kiln-gateway", scale, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// The change streams in: the deployment reaches 2/2 available.
	for {
		ev := next()
		if ev["status"] == "Current" && ev["message"] == "2/2 replicas available" {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	err = cmd.Wait()
	outputsMu.Lock()
	outputs = append(outputs, all.String(), stderr.String())
	outputsMu.Unlock()
	if err != nil {
		t.Fatalf("status --watch ended with %v after Ctrl-C, want exit 0:\n%s\n%s", err, all.String(), stderr.String())
	}
}

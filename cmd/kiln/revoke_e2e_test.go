package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/platform"
)

const revokeTwo = `apiVersion: kiln.dev/v1alpha1
kind: ClusterConfig
spec:
  tenants: [default, staging]
  domain: rev.example.test
`

const revokeOne = `apiVersion: kiln.dev/v1alpha1
kind: ClusterConfig
spec:
  tenants: [default]
  domain: rev.example.test
`

// authFiles reads kiln-auth's keys.json and tenants.json ("" when absent).
func authFiles(t *testing.T, cs kubernetes.Interface) (keysJSON, tenantsJSON string) {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps("kiln-system").Get(context.Background(), "kiln-auth", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data["keys.json"], cm.Data[creds.TenantsFile]
}

// clusterVerifier is the gateway's verifier over the cluster's kiln-auth
// as it is now.
func clusterVerifier(t *testing.T, cs kubernetes.Interface, name string) *creds.Verifier {
	t.Helper()
	k, tb := authFiles(t, cs)
	v, err := creds.NewVerifier(name, []byte(k), []byte(tb))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// localGateway runs `kiln gateway` (this binary) on a copy of the
// cluster's kiln-auth laid out as the kubelet mounts it; refresh copies
// kiln-auth again with kubelet's atomic ..data swap.
type localGateway struct {
	t       *testing.T
	cs      kubernetes.Interface
	dir     string
	n       int
	addr    string
	backend string
}

func startLocalGateway(t *testing.T, e *env, cs kubernetes.Interface, name string, tenants ...string) *localGateway {
	t.Helper()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	t.Cleanup(backend.Close)
	g := &localGateway{t: t, cs: cs, dir: t.TempDir(), backend: backend.Listener.Addr().String()}
	g.refresh()
	for _, f := range []string{"keys.json", creds.TenantsFile} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(g.dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"gateway", "--listen", "127.0.0.1:0", "--auth-dir", g.dir, "--cluster", name, "--domain", "rev.example.test"}
	for _, tn := range tenants {
		args = append(args, "--backend", tn+"/web="+g.backend)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := e.command(ctx, nil, args...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	addrs := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "listening" {
				select {
				case addrs <- rec.Addr:
				default:
				}
			}
		}
	}()
	select {
	case g.addr = <-addrs:
	case <-time.After(time.Minute):
		t.Fatal("kiln gateway did not report its address")
	}
	return g
}

func (g *localGateway) refresh() {
	g.t.Helper()
	k, tb := authFiles(g.t, g.cs)
	g.n++
	ts := fmt.Sprintf("..2026_01_01_00_00_00.%d", g.n)
	if err := os.Mkdir(filepath.Join(g.dir, ts), 0o755); err != nil {
		g.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(g.dir, ts, "keys.json"), []byte(k), 0o644); err != nil {
		g.t.Fatal(err)
	}
	if tb != "" {
		if err := os.WriteFile(filepath.Join(g.dir, ts, creds.TenantsFile), []byte(tb), 0o644); err != nil {
			g.t.Fatal(err)
		}
	}
	tmp := filepath.Join(g.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		g.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(g.dir, "..data")); err != nil {
		g.t.Fatal(err)
	}
}

func (g *localGateway) code(tenant, token string) int {
	g.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+g.addr+"/t/"+tenant+"/p/web/", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// await polls until the gateway answers want (its reload is asynchronous).
func (g *localGateway) await(what, tenant, token string, want int) {
	g.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := g.code(tenant, token)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("%s: gateway answers %d, want %d", what, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tokenOf(t *testing.T, e *env, name, tenant string) string {
	t.Helper()
	td, err := creds.Load(e.tokenDir(name))
	if err != nil {
		t.Fatal(err)
	}
	return td.Tokens[tenant]
}

func gatewayTableAnnotation(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	d, err := cs.AppsV1().Deployments("kiln-system").Get(context.Background(), "kiln-gateway", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Annotations[platform.AnnotationTenantTable]
}

// TestUpgradeRevokesRemovedTenant (DESIGN §17 tenant revocation): upgrade
// removes tenant staging; from its success staging's token is refused by
// the gateway's verifier over kiln-auth and by a running gateway on
// kiln-auth's files; a tenant staging added back gets a new token, and the
// old one stays refused. --rotate-token replaces one tenant's token
// without the key changing. A platform of an earlier kiln (no table,
// tokens without aud and tid) is migrated by upgrade.
func TestUpgradeRevokesRemovedTenant(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	const name, kctx = "rev", "kiln-a"
	cleanup(t, e, name, kctx)
	cs := clusterA.Client
	two, one := writeConfig(t, revokeTwo), writeConfig(t, revokeOne)
	expect(t, e.kiln("create", "kube", name, "--context", kctx, "-c", two), 0)
	keys := authKeys(t, cs)

	v := clusterVerifier(t, cs, name)
	if v.Table == nil || v.Table.Legacy || len(v.Table.Tenants) != 2 {
		t.Fatalf("kiln-auth's tenant table after create: %+v", v.Table)
	}
	aud := v.Table.Audience
	oldDefault, oldStaging := tokenOf(t, e, name, "default"), tokenOf(t, e, name, "staging")
	for tn, tok := range map[string]string{"default": oldDefault, "staging": oldStaging} {
		if err := v.VerifyFor(tok, tn); err != nil {
			t.Fatalf("token of %s after create: %v", tn, err)
		}
		if id, _ := creds.TokenIDOf(tok); id.Audience != aud || !v.Table.Accepts(tn, id.ID) {
			t.Errorf("token of %s carries %+v, table %+v", tn, id, v.Table)
		}
	}
	if got := gatewayTableAnnotation(t, cs); got != v.Table.Digest() {
		t.Errorf("gateway pod template records table %q, want %q", got, v.Table.Digest())
	}
	gw := startLocalGateway(t, e, cs, name, "default", "staging")
	gw.await("staging's token before the upgrade", "staging", oldStaging, http.StatusOK)

	t.Run("removed tenant refused once upgrade succeeds", func(t *testing.T) {
		r := e.kiln("upgrade", "kube", name, "--context", kctx, "-c", one, "--yes", "-o", "json")
		expect(t, r, 0)
		if p := plans(t, r); p["update ConfigMap kiln-system/kiln-auth"] == nil || p["delete Token /staging"] == nil {
			t.Errorf("plan should change the tenant table and delete staging's token: %v", p)
		}
		v := clusterVerifier(t, cs, name)
		if err := v.VerifyFor(oldStaging, "staging"); !errors.Is(err, creds.ErrRevoked) {
			t.Errorf("removed tenant's token against kiln-auth: %v, want revoked", err)
		}
		if err := v.VerifyFor(oldDefault, "default"); err != nil {
			t.Errorf("default's token: %v", err)
		}
		if _, ok := v.Table.Tenants["staging"]; ok || v.Table.Audience != aud {
			t.Errorf("table after removing staging: %+v (aud must stay %s)", v.Table, aud)
		}
		if td, err := creds.Load(e.tokenDir(name)); err != nil || td.Manifest.HasTenant("staging") {
			t.Errorf("token dir still holds staging: %v", err)
		}
		if got := gatewayTableAnnotation(t, cs); got != v.Table.Digest() {
			t.Errorf("gateway not rolled with the new table: %q, want %q", got, v.Table.Digest())
		}
		gw.refresh()
		gw.await("removed tenant's token", "staging", oldStaging, http.StatusUnauthorized)
		gw.await("default's token", "default", oldDefault, http.StatusOK)
		expect(t, e.kiln("wait", "kube", name, "--context", kctx, "--timeout", "1m"), 0)
	})

	var newStaging string
	t.Run("re-added tenant gets a new token; the old stays refused", func(t *testing.T) {
		expect(t, e.kiln("upgrade", "kube", name, "--context", kctx, "-c", two, "--yes"), 0)
		newStaging = tokenOf(t, e, name, "staging")
		if newStaging == "" || newStaging == oldStaging {
			t.Fatal("staging has no new token")
		}
		v := clusterVerifier(t, cs, name)
		if err := v.VerifyFor(oldStaging, "staging"); !errors.Is(err, creds.ErrRevoked) {
			t.Errorf("old token of re-added tenant: %v, want revoked", err)
		}
		if err := v.VerifyFor(newStaging, "staging"); err != nil {
			t.Errorf("new token of re-added tenant: %v", err)
		}
		gw.refresh()
		gw.await("re-added tenant's new token", "staging", newStaging, http.StatusOK)
		gw.await("re-added tenant's old token", "staging", oldStaging, http.StatusUnauthorized)
	})

	t.Run("--rotate-token replaces one tenant's token, key unchanged", func(t *testing.T) {
		r := e.kiln("upgrade", "kube", name, "--context", kctx, "--rotate-token", "default", "--yes", "-o", "json")
		expect(t, r, 0)
		if p := plans(t, r); p["update Token /default"] == nil {
			t.Errorf("plan = %v", p)
		}
		rotated := tokenOf(t, e, name, "default")
		if rotated == oldDefault {
			t.Fatal("default's token did not change")
		}
		if got := authKeys(t, cs); len(got) != len(keys) {
			t.Errorf("kiln-auth keys changed: %v", got)
		}
		for id := range keys {
			if _, ok := authKeys(t, cs)[id]; !ok {
				t.Errorf("key %s no longer trusted", id)
			}
		}
		v := clusterVerifier(t, cs, name)
		if err := v.VerifyFor(oldDefault, "default"); !errors.Is(err, creds.ErrRevoked) {
			t.Errorf("rotated-out token: %v, want revoked", err)
		}
		if err := v.VerifyFor(rotated, "default"); err != nil {
			t.Errorf("new token: %v", err)
		}
		if err := v.VerifyFor(newStaging, "staging"); err != nil {
			t.Errorf("staging's token must not change: %v", err)
		}
		r = e.kiln("upgrade", "kube", name, "--context", kctx, "--rotate-token", "nosuch", "--yes")
		expect(t, r, 2)
		gw.refresh()
		gw.await("rotated-out token", "default", oldDefault, http.StatusUnauthorized)
		gw.await("rotated token", "default", rotated, http.StatusOK)

		// A stale token dir (the rotated-out token put back): kiln wait
		// and status judge it with the gateway's rules and say so.
		td, err := creds.Load(e.tokenDir(name))
		if err != nil {
			t.Fatal(err)
		}
		td.Tokens["default"] = oldDefault
		if err := creds.Write(td.Path, td); err != nil {
			t.Fatal(err)
		}
		r = e.kiln("wait", "kube", name, "--context", kctx, "--timeout", "10s")
		if r.code == 0 || !strings.Contains(r.stderr, `tenant default`) || !strings.Contains(r.stderr, "not current") {
			t.Errorf("wait with a stale token dir:\n%s", r)
		}
		r = e.kiln("status", "kube", name, "--context", kctx)
		if !strings.Contains(r.stdout+r.stderr, "not current") {
			t.Errorf("status does not report the stale token:\n%s", r)
		}
		td.Tokens["default"] = rotated
		if err := creds.Write(td.Path, td); err != nil {
			t.Fatal(err)
		}
		expect(t, e.kiln("wait", "kube", name, "--context", kctx, "--timeout", "1m"), 0)
	})

	t.Run("rotate-key keeps the platform id and token ids", func(t *testing.T) {
		before := clusterVerifier(t, cs, name).Table
		expect(t, e.kiln("rotate-key", "kube", name, "--context", kctx, "--yes"), 0)
		v := clusterVerifier(t, cs, name)
		if !v.Table.Equal(before) {
			t.Errorf("rotate-key changed the tenant table: %+v -> %+v", before, v.Table)
		}
		for _, tn := range []string{"default", "staging"} {
			if err := v.VerifyFor(tokenOf(t, e, name, tn), tn); err != nil {
				t.Errorf("token of %s after rotate-key: %v", tn, err)
			}
		}
		expect(t, e.kiln("wait", "kube", name, "--context", kctx, "--timeout", "1m"), 0)
	})

	// legacyize turns the platform into what an earlier kiln left:
	// kiln-auth without tenants.json, tokens without aud and tid. It
	// returns default's legacy token.
	legacyize := func(t *testing.T) string {
		t.Helper()
		cm, err := cs.CoreV1().ConfigMaps("kiln-system").Get(context.Background(), "kiln-auth", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		delete(cm.Data, creds.TenantsFile)
		if _, err := cs.CoreV1().ConfigMaps("kiln-system").Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		td, err := creds.Load(e.tokenDir(name))
		if err != nil {
			t.Fatal(err)
		}
		legacy := map[string]creds.TokenID{}
		for _, tn := range td.Manifest.Tenants {
			legacy[tn] = creds.TokenID{}
		}
		if err := td.Reissue(legacy, time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := creds.Write(td.Path, td); err != nil {
			t.Fatal(err)
		}
		return td.Tokens["default"]
	}
	// splitBrainFree: at this instant kiln-auth (with the gateway's
	// verifier) accepts every token of the committed token dir.
	splitBrainFree := func(t *testing.T, when string) {
		t.Helper()
		v := clusterVerifier(t, cs, name)
		td, err := creds.Load(e.tokenDir(name))
		if err != nil {
			t.Fatal(err)
		}
		for _, tn := range td.Manifest.Tenants {
			if err := v.VerifyFor(td.Tokens[tn], tn); err != nil {
				t.Errorf("%s: kiln-auth refuses the committed token of %s: %v", when, tn, err)
			}
		}
	}

	t.Run("migration and --rotate-token killed at every step converge, never refusing the token dir", func(t *testing.T) {
		for _, point := range []string{"tokens-after-table-staged", "tokens-after-reissue", "tokens-after-table"} {
			for _, args := range [][]string{{}, {"--rotate-token", "staging"}} {
				if len(args) == 0 {
					legacyize(t)
				}
				before := tokenOf(t, e, name, "staging")
				cmd := append([]string{"upgrade", "kube", name, "--context", kctx, "--yes", "-o", "json"}, args...)
				r := e.kilnWith([]string{"KILN_TEST_CRASH_AT=" + point}, cmd...)
				if !r.killed {
					t.Fatalf("%v: kiln was not killed at %s:\n%s", args, point, r)
				}
				splitBrainFree(t, fmt.Sprintf("%v killed at %s", args, point))
				expect(t, e.kiln(cmd...), 0)
				splitBrainFree(t, fmt.Sprintf("%v rerun after %s", args, point))
				v := clusterVerifier(t, cs, name)
				if v.Table == nil || v.Table.Legacy || len(v.Table.Tenants) != 2 {
					t.Errorf("%v after %s: table %+v", args, point, v.Table)
				}
				for _, ids := range v.Table.Tenants {
					if len(ids) != 1 {
						t.Errorf("%v after %s: a tenant keeps %d token ids", args, point, len(ids))
					}
				}
				if err := v.VerifyFor(before, "staging"); err == nil {
					t.Errorf("%v after %s: staging's previous token is still accepted", args, point)
				}
				expect(t, e.kiln("wait", "kube", name, "--context", kctx, "--timeout", "1m"), 0)
			}
		}
	})

	t.Run("a platform of an earlier kiln is migrated by upgrade", func(t *testing.T) {
		legacyDefault := legacyize(t)
		if err := clusterVerifier(t, cs, name).VerifyFor(legacyDefault, "default"); err != nil {
			t.Fatalf("legacy token on a platform without table: %v", err)
		}
		r := e.kiln("upgrade", "kube", name, "--context", kctx, "--yes", "-o", "json")
		expect(t, r, 0)
		p := plans(t, r)
		if p["update Token /default"] == nil || p["update Token /staging"] == nil || p["update ConfigMap kiln-system/kiln-auth"] == nil {
			t.Errorf("migration plan = %v", p)
		}
		v := clusterVerifier(t, cs, name)
		if v.Table == nil || v.Table.Legacy {
			t.Fatalf("table after migration: %+v", v.Table)
		}
		if err := v.VerifyFor(legacyDefault, "default"); !errors.Is(err, creds.ErrRevoked) {
			t.Errorf("legacy token after the migration: %v, want refused", err)
		}
		for _, tn := range []string{"default", "staging"} {
			tok := tokenOf(t, e, name, tn)
			if err := v.VerifyFor(tok, tn); err != nil {
				t.Errorf("migrated token of %s: %v", tn, err)
			}
		}
		if !strings.Contains(r.stdout, "no tenant table") {
			t.Errorf("the migration is not said:\n%s", r.stdout)
		}
		expect(t, e.kiln("wait", "kube", name, "--context", kctx, "--timeout", "1m"), 0)
	})

	t.Run("create --continue migrates a platform of an earlier kiln too", func(t *testing.T) {
		legacyDefault := legacyize(t)
		expect(t, e.kiln("create", "kube", name, "--context", kctx, "-c", two, "--continue"), 0)
		v := clusterVerifier(t, cs, name)
		if v.Table == nil || v.Table.Legacy || len(v.Table.Tenants) != 2 {
			t.Fatalf("table after create --continue: %+v", v.Table)
		}
		if err := v.VerifyFor(legacyDefault, "default"); err == nil {
			t.Error("legacy token accepted after create --continue migrated the platform")
		}
		splitBrainFree(t, "after create --continue")
		if got := gatewayTableAnnotation(t, cs); got != v.Table.Digest() {
			t.Errorf("gateway records table %q, want %q", got, v.Table.Digest())
		}
		// And a second run changes nothing in kiln-auth.
		before, _ := authFiles(t, cs)
		_, tbBefore := authFiles(t, cs)
		expect(t, e.kiln("create", "kube", name, "--context", kctx, "-c", two, "--continue"), 0)
		if after, tbAfter := authFiles(t, cs); after != before || tbAfter != tbBefore {
			t.Error("a converged create --continue rewrote kiln-auth")
		}
	})
}

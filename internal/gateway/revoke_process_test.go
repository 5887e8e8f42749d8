package gateway_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kilnctl/kiln/creds"
)

// newTableDir is an authDir holding kiln-auth's two keys, keys.json and
// tenants.json (the tenant table), both swapped in one atomic ..data
// rename as kubelet does (authDir.publish).
func newTableDir(t *testing.T, table *creds.TenantTable, keys ...testKey) *authDir {
	d := &authDir{t: t, path: t.TempDir()}
	d.publish(table, keys...)
	for _, f := range []string{"keys.json", creds.TenantsFile} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(d.path, f)); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func newID(t *testing.T) string {
	t.Helper()
	id, err := creds.NewRandomID()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (k testKey) boundToken(t *testing.T, cluster, tenant string, id creds.TokenID) string {
	t.Helper()
	tok, err := creds.SignTenantToken(k.priv, k.id, cluster, tenant, id, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestGatewayProcessRevokesTenantTokens performs the attacks of issue 27
// item 3 against a running `kiln gateway` and observes the refusals: a
// removed tenant's token, the same token after a tenant of that name is
// added back, another cluster's token (same NAME, same key, another
// platform id), a token without tid once the table exists; and the
// migration window in which legacy tokens are accepted.
func TestGatewayProcessRevokesTenantTokens(t *testing.T) {
	const cluster, domain = "dev1", "dev1.kiln.test"
	key := newKey(t)
	aud, tidA, tidB := newID(t), newID(t), newID(t)
	table := &creds.TenantTable{Audience: aud, Tenants: map[string][]string{"a": {tidA}, "b": {tidB}}}
	auth := newTableDir(t, table, key)
	backend := newBackend(t)
	gw := startGateway(t, "--auth-dir", auth.path, "--cluster", cluster, "--domain", domain,
		"--backend", "a/web="+backend.Listener.Addr().String(),
		"--backend", "b/web="+backend.Listener.Addr().String())
	eventually(t, "/readyz answers 200", func() bool { return gw.ready() == http.StatusOK })

	tokA := key.boundToken(t, cluster, "a", creds.TokenID{Audience: aud, ID: tidA})
	tokB := key.boundToken(t, cluster, "b", creds.TokenID{Audience: aud, ID: tidB})
	legacyA := key.token(t, cluster, "a")
	otherCluster := key.boundToken(t, cluster, "a", creds.TokenID{Audience: newID(t), ID: tidA})
	code := func(tenant, tok string) int { return gw.do(t, "", "/t/"+tenant+"/p/web/", tok).code }

	if c := code("a", tokA); c != http.StatusOK {
		t.Fatalf("tenant a's current token: %d, want 200\n%s", c, gw.log())
	}
	if c := code("b", tokB); c != http.StatusOK {
		t.Fatalf("tenant b's current token: %d, want 200", c)
	}
	if c := code("a", otherCluster); c != http.StatusUnauthorized {
		t.Errorf("a token of another cluster with the same NAME and key (another aud): %d, want 401", c)
	}
	if c := code("a", legacyA); c != http.StatusUnauthorized {
		t.Errorf("a token without aud and tid once the table exists: %d, want 401", c)
	}

	// Upgrade removes tenant b: its entry leaves the table.
	auth.publish(&creds.TenantTable{Audience: aud, Tenants: map[string][]string{"a": {tidA}}}, key)
	eventually(t, "the removed tenant's token is refused", func() bool { return code("b", tokB) == http.StatusUnauthorized })
	if c := code("a", tokA); c != http.StatusOK {
		t.Errorf("tenant a after b's removal: %d, want 200", c)
	}

	// A tenant named b is added again: a new tid.
	tidB2 := newID(t)
	auth.publish(&creds.TenantTable{Audience: aud, Tenants: map[string][]string{"a": {tidA}, "b": {tidB2}}}, key)
	tokB2 := key.boundToken(t, cluster, "b", creds.TokenID{Audience: aud, ID: tidB2})
	eventually(t, "the re-added tenant's new token is accepted", func() bool { return code("b", tokB2) == http.StatusOK })
	if c := code("b", tokB); c != http.StatusUnauthorized {
		t.Errorf("the removed tenant's old token after a tenant of its name is added back: %d, want 401", c)
	}

	// Rotating one tenant's token: both tids while the token dir is
	// swapped, then only the new one. The key stays.
	tidA2 := newID(t)
	tokA2 := key.boundToken(t, cluster, "a", creds.TokenID{Audience: aud, ID: tidA2})
	auth.publish(&creds.TenantTable{Audience: aud, Tenants: map[string][]string{"a": {tidA, tidA2}, "b": {tidB2}}}, key)
	eventually(t, "the staged token is accepted", func() bool { return code("a", tokA2) == http.StatusOK })
	if c := code("a", tokA); c != http.StatusOK {
		t.Errorf("the old token while both are staged: %d, want 200", c)
	}
	auth.publish(&creds.TenantTable{Audience: aud, Tenants: map[string][]string{"a": {tidA2}, "b": {tidB2}}}, key)
	eventually(t, "the rotated-out token is refused", func() bool { return code("a", tokA) == http.StatusUnauthorized })
	if c := code("a", tokA2); c != http.StatusOK {
		t.Errorf("the new token after the rotation: %d, want 200", c)
	}

	// A tenants.json that disappears after a table was loaded is a
	// failed load: the table in force stays, /readyz fails.
	auth.publish(nil, key)
	eventually(t, "/readyz fails once tenants.json is gone", func() bool { return gw.ready() == http.StatusServiceUnavailable })
	if c := code("a", legacyA); c != http.StatusUnauthorized {
		t.Errorf("a legacy token after tenants.json vanished: %d, want 401 (no downgrade)", c)
	}
	if c := code("b", tokB); c != http.StatusUnauthorized {
		t.Errorf("the removed tenant's token after tenants.json vanished: %d, want 401", c)
	}
}

// TestGatewayProcessMigratesLegacyTokens: a platform of an earlier kiln
// (no tenants.json) accepts legacy tokens; during the migration (legacy
// on) both kinds; after it only the bound tokens.
func TestGatewayProcessMigratesLegacyTokens(t *testing.T) {
	const cluster, domain = "dev1", "dev1.kiln.test"
	key := newKey(t)
	auth := newTableDir(t, nil, key)
	backend := newBackend(t)
	gw := startGateway(t, "--auth-dir", auth.path, "--cluster", cluster, "--domain", domain,
		"--backend", "a/web="+backend.Listener.Addr().String())
	eventually(t, "/readyz answers 200", func() bool { return gw.ready() == http.StatusOK })
	code := func(tok string) int { return gw.do(t, "", "/t/a/p/web/", tok).code }
	legacy := key.token(t, cluster, "a")
	if c := code(legacy); c != http.StatusOK {
		t.Fatalf("legacy token without a table: %d, want 200\n%s", c, gw.log())
	}
	aud, tid := newID(t), newID(t)
	bound := key.boundToken(t, cluster, "a", creds.TokenID{Audience: aud, ID: tid})
	if c := code(bound); c != http.StatusUnauthorized {
		t.Errorf("a bound token before the table is published: %d, want 401", c)
	}
	auth.publish(&creds.TenantTable{Audience: aud, Legacy: true, Tenants: map[string][]string{"a": {tid}}}, key)
	eventually(t, "the staged table is loaded", func() bool { return code(bound) == http.StatusOK })
	if c := code(legacy); c != http.StatusOK {
		t.Errorf("legacy token during the migration: %d, want 200", c)
	}
	auth.publish(&creds.TenantTable{Audience: aud, Tenants: map[string][]string{"a": {tid}}}, key)
	eventually(t, "legacy tokens are refused after the migration", func() bool { return code(legacy) == http.StatusUnauthorized })
	if c := code(bound); c != http.StatusOK {
		t.Errorf("bound token after the migration: %d, want 200", c)
	}
}

func (p *gatewayProc) ready() int {
	resp, err := http.Get(p.url("/readyz"))
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

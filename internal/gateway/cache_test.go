package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/internal/gateway"
)

// A tenant removed from the table is refused on the first request after
// the reload, although its token was verified (and cached) before: the
// verified-token cache belongs to one version of keys.json and
// tenants.json, and a reload starts an empty one (DESIGN.md §17).
func TestRemovedTenantIsRefusedAtOnceThoughItsTokenIsCached(t *testing.T) {
	const cluster = "dev1"
	key := newKey(t)
	aud, tidA, tidB := newID(t), newID(t), newID(t)
	auth := newTableDir(t, &creds.TenantTable{Audience: aud, Tenants: map[string][]string{"a": {tidA}, "b": {tidB}}}, key)
	backend := newBackend(t)
	logs := io.Discard
	g, err := gateway.New(gateway.Config{AuthDir: auth.path, Cluster: cluster, Domain: "dev1.kiln.test", LogOutput: logs,
		Backends: map[gateway.Route]string{{Tenant: "a", Project: "web"}: backend.Listener.Addr().String(), {Tenant: "b", Project: "web"}: backend.Listener.Addr().String()}})
	if err != nil {
		t.Fatal(err)
	}
	g.Reload()
	front := httptest.NewServer(g.Handler())
	t.Cleanup(front.Close)
	code := func(tenant, tok string) int {
		req, _ := http.NewRequest(http.MethodGet, front.URL+"/t/"+tenant+"/p/web/", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	tokA := key.boundToken(t, cluster, "a", creds.TokenID{Audience: aud, ID: tidA})
	tokB := key.boundToken(t, cluster, "b", creds.TokenID{Audience: aud, ID: tidB})
	for range 3 { // the first verifies, the others are answered from the cache
		if c := code("b", tokB); c != http.StatusOK {
			t.Fatalf("tenant b's token: %d, want 200", c)
		}
	}
	auth.publish(&creds.TenantTable{Audience: aud, Tenants: map[string][]string{"a": {tidA}}}, key)
	g.Reload()
	if c := code("b", tokB); c != http.StatusUnauthorized {
		t.Errorf("the removed tenant's cached token right after the reload: %d, want 401", c)
	}
	if c := code("a", tokA); c != http.StatusOK {
		t.Errorf("tenant a after b's removal: %d, want 200", c)
	}
	// The same for a key removed from keys.json (rotate-key's last step).
	key2 := newKey(t)
	tokA2 := key2.boundToken(t, cluster, "a", creds.TokenID{Audience: aud, ID: tidA})
	auth.publish(&creds.TenantTable{Audience: aud, Tenants: map[string][]string{"a": {tidA}}}, key, key2)
	g.Reload()
	if c := code("a", tokA2); c != http.StatusOK {
		t.Fatalf("a token of the added key: %d, want 200", c)
	}
	auth.publish(&creds.TenantTable{Audience: aud, Tenants: map[string][]string{"a": {tidA}}}, key)
	g.Reload()
	if c := code("a", tokA2); c != http.StatusUnauthorized {
		t.Errorf("a cached token of a removed key right after the reload: %d, want 401", c)
	}
}

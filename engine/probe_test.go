package engine

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/internal/gateway"
)

// The probe's judgement against a real gateway (in-process, the same
// handler `kiln gateway` serves): tokens of a trusted key are accepted,
// tokens of another key refused with the key named, a tenant without a
// token is not asked, and a gateway that lets anonymous requests through
// is called out rather than counted as accepting.
func TestProbeTenants(t *testing.T) {
	newKey := func() (*rsa.PrivateKey, string) {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		id, err := creds.KeyID(&k.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		return k, id
	}
	trustedKey, trustedID := newKey()
	otherKey, _ := newKey()
	pemText, err := creds.PublicKeyPEM(&trustedKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	authDir := t.TempDir()
	keysJSON, _ := json.Marshal(map[string]string{trustedID: string(pemText)})
	if err := os.WriteFile(filepath.Join(authDir, gateway.KeysFile), keysJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{
		AuthDir: authDir, Cluster: "dev1", Domain: "dev1.kiln.test",
		Backends:  map[gateway.Route]string{}, // no project: the probe route is unknown (404)
		LogOutput: io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	gw.Reload()
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()

	now := time.Now()
	tokenDir := func(key *rsa.PrivateKey, tenants ...string) *creds.TokenDir {
		td, err := creds.NewTokenDir("dev1", "kube", "ctx", key, tenants, now)
		if err != nil {
			t.Fatal(err)
		}
		td.Path = "/tokens/dev1"
		return td
	}
	client := &http.Client{Timeout: time.Minute}

	got := probeTenants(t.Context(), client, srv.URL, tokenDir(trustedKey, "default", "staging"), []string{"staging", "default", "late"}, (&Engine{}).probeAgain())
	want := map[string]bool{"default": true, "staging": true, "late": false}
	if len(got) != len(want) {
		t.Fatalf("results %+v, want one per tenant", got)
	}
	for _, r := range got {
		if r.Accepted != want[r.Tenant] {
			t.Errorf("tenant %s: accepted %v, want %v (%s)", r.Tenant, r.Accepted, want[r.Tenant], r.Detail)
		}
	}
	if got[0].Tenant != "default" || !strings.Contains(got[0].Detail, "HTTP 404") {
		t.Errorf("first result %+v, want default accepted with the gateway's 404 for the probe route", got[0])
	}
	if late := got[1]; late.Tenant != "late" || !strings.Contains(late.Detail, "no token") {
		t.Errorf("late: %+v, want not asked for lack of a token", late)
	}

	other := tokenDir(otherKey, "default")
	got = probeTenants(t.Context(), client, srv.URL, other, []string{"default"}, (&Engine{}).probeAgain())
	if len(got) != 1 || got[0].Accepted || !strings.Contains(got[0].Detail, "401") || !strings.Contains(got[0].Detail, other.Manifest.KeyID) {
		t.Errorf("untrusted key: %+v, want refused with 401 naming key %s", got, other.Manifest.KeyID)
	}

	open := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer open.Close()
	got = probeTenants(t.Context(), client, open.URL, tokenDir(trustedKey, "default"), []string{"default"}, (&Engine{}).probeAgain())
	if len(got) != 1 || got[0].Accepted || !strings.Contains(got[0].Detail, "authenticates nothing") {
		t.Errorf("a gateway without authentication: %+v, want it called out", got)
	}
	for _, r := range got {
		for _, tok := range tokenDir(trustedKey, "default").Tokens {
			if strings.Contains(r.Detail, tok) {
				t.Fatal("a result holds a token")
			}
		}
	}
}

package gateway_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnctl/kiln/creds"
)

// The attacks of issue #27 against the real `kiln gateway` process, each
// observed to be refused (DESIGN.md §17: headers over 64 KiB → 431, a
// backend without response headers → 504, limits so one tenant or slow
// clients cannot starve the others).
func TestGatewayLimitsHoldUnderAttack(t *testing.T) {
	const cluster, domain = "dev1", "dev1.kiln.test"
	key := newKey(t)
	auth := newAuthDir(t, key)

	// A backend echoing every header it received; one that never answers
	// until released.
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(r.Header)
	}))
	t.Cleanup(echo.Close)
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { free(); hang.Close() })

	gw := startGateway(t, "--auth-dir", auth.path, "--cluster", cluster, "--domain", domain,
		"--backend", "a/web="+echo.Listener.Addr().String(),
		"--backend", "a/stuck="+hang.Listener.Addr().String(),
		"--backend", "b/web="+echo.Listener.Addr().String(),
		"--backend-timeout", "1s", "--tenant-concurrency", "4")
	eventually(t, "/readyz answers 200", func() bool { return get(gw.url("/readyz")) == http.StatusOK })
	tokA, tokB := key.token(t, cluster, "a"), key.token(t, cluster, "b")

	send := func(t *testing.T, ctx context.Context, path, token string, hdr map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, gw.url(path), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	t.Run("headers over 64 KiB are 431", func(t *testing.T) {
		if code, body := send(t, t.Context(), "/t/a/p/web/", tokA, map[string]string{"X-Pad": strings.Repeat("x", 100<<10)}); code != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("100 KiB header: %d %q, want 431", code, body)
		}
		if code, _ := send(t, t.Context(), "/t/a/p/web/", tokA, map[string]string{"X-Pad": strings.Repeat("x", 32<<10)}); code != http.StatusOK {
			t.Errorf("32 KiB header: %d, want 200", code)
		}
	})

	t.Run("a backend that sends no headers is 504", func(t *testing.T) {
		start := time.Now()
		if code, body := send(t, t.Context(), "/t/a/p/stuck/", tokA, nil); code != http.StatusGatewayTimeout {
			t.Errorf("hanging backend: %d %q, want 504", code, body)
		}
		t.Logf("504 after %s (--backend-timeout 1s)", time.Since(start).Round(10*time.Millisecond))
	})

	t.Run("one tenant's hanging requests do not starve another", func(t *testing.T) {
		// Four of tenant a's requests hang on a backend (with the timeout
		// far off); the fifth is refused at once, tenant b is served.
		gw2 := startGateway(t, "--auth-dir", auth.path, "--cluster", cluster, "--domain", domain,
			"--backend", "a/stuck="+hang.Listener.Addr().String(),
			"--backend", "b/web="+echo.Listener.Addr().String(),
			"--backend-timeout", "1m", "--tenant-concurrency", "4")
		eventually(t, "/readyz answers 200", func() bool { return get(gw2.url("/readyz")) == http.StatusOK })
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, gw2.url("/t/a/p/stuck/"), nil)
				req.Header.Set("Authorization", "Bearer "+tokA)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			})
		}
		eventually(t, "tenant a's fifth request refused with 503", func() bool {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, gw2.url("/t/a/p/stuck/"), nil)
			req.Header.Set("Authorization", "Bearer "+tokA)
			c := &http.Client{Timeout: 200 * time.Millisecond}
			resp, err := c.Do(req)
			if err != nil {
				return false // not refused yet: this one hung too, and timed out
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != ""
		})
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, gw2.url("/t/b/p/web/"), nil)
		req.Header.Set("Authorization", "Bearer "+tokB)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("tenant b while tenant a is at its limit: %v %v", resp, err)
		}
		resp.Body.Close()
		cancel()
		wg.Wait()
		if !strings.Contains(get2(gw2.url("/metrics")), `kiln_gateway_tenant_limited_total{tenant="a"}`) {
			t.Errorf("the refusals are not counted in /metrics")
		}
	})

	t.Run("client forwarding headers do not reach the backend", func(t *testing.T) {
		forged := map[string]string{
			"X-Forwarded-Prefix": "/admin", "X-Real-IP": "10.0.0.1", "X-Forwarded-Port": "1", "Forwarded": "for=10.0.0.1",
			"X-Forwarded-For": "10.0.0.1", "X-Forwarded-Host": "evil.example", "X-Kiln-Tenant": "b",
		}
		code, body := send(t, t.Context(), "/t/a/p/web/", tokA, forged)
		if code != http.StatusOK {
			t.Fatalf("%d %q", code, body)
		}
		var got http.Header
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatal(err)
		}
		for _, h := range []string{"X-Real-Ip", "X-Forwarded-Port", "Forwarded"} {
			if v := got.Get(h); v != "" {
				t.Errorf("the backend received the client's %s: %q", h, v)
			}
		}
		if v := got.Get("X-Forwarded-Prefix"); v != "/t/a/p/web" {
			t.Errorf("X-Forwarded-Prefix = %q, want the gateway's /t/a/p/web", v)
		}
		if v := got.Get("X-Kiln-Tenant"); v != "a" {
			t.Errorf("X-Kiln-Tenant = %q, want the verified tenant a", v)
		}
		if v := got.Values("X-Forwarded-For"); len(v) != 1 || strings.Contains(v[0], "10.0.0.1") {
			t.Errorf("X-Forwarded-For = %q, want only the client's real address", v)
		}
		if v := got.Get("X-Forwarded-Host"); v == "evil.example" {
			t.Errorf("X-Forwarded-Host is the client's forged value")
		}
	})

	t.Run("an unreadable keys.json makes the gateway unready, and a weak key is refused", func(t *testing.T) {
		weak, err := rsa.GenerateKey(rand.Reader, 1024)
		if err != nil {
			t.Fatal(err)
		}
		der, _ := x509.MarshalPKIXPublicKey(&weak.PublicKey)
		weakID, _ := creds.KeyID(&weak.PublicKey)
		weakPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
		writeKeys(t, auth, map[string]string{key.id: key.pem, weakID: weakPEM})
		eventually(t, "the weak key is refused in the log", func() bool { return strings.Contains(gw.log(), "RSA key shorter than the minimum") })
		weakTok, err := creds.SignToken(weak, weakID, cluster, "a", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if code, _ := send(t, t.Context(), "/t/a/p/web/", weakTok, nil); code != http.StatusUnauthorized {
			t.Errorf("a token of a 1024-bit key: %d, want 401", code)
		}

		writeRaw(t, auth, []byte("{not json"))
		eventually(t, "/readyz answers 503 while keys.json is broken", func() bool { return get(gw.url("/readyz")) == http.StatusServiceUnavailable })
		if m := get2(gw.url("/metrics")); !strings.Contains(m, "kiln_gateway_keys_file_ok 0") {
			t.Errorf("/metrics does not say keys.json is broken")
		}
		auth.set(key)
		eventually(t, "/readyz answers 200 again", func() bool { return get(gw.url("/readyz")) == http.StatusOK })
	})
}

func get(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func get2(url string) string {
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// writeKeys swaps in a keys.json with exactly keys (id -> PEM).
func writeKeys(t *testing.T, d *authDir, keys map[string]string) {
	t.Helper()
	data, err := json.Marshal(keys)
	if err != nil {
		t.Fatal(err)
	}
	writeRaw(t, d, data)
}

// writeRaw swaps in keys.json with these bytes, the way kubelet does.
func writeRaw(t *testing.T, d *authDir, data []byte) {
	t.Helper()
	d.n++
	ts := fmt.Sprintf("..2026_01_01_00_00_00.%d", d.n)
	if err := os.Mkdir(filepath.Join(d.path, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.path, ts, "keys.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(d.path, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(d.path, "..data")); err != nil {
		t.Fatal(err)
	}
}

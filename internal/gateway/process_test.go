package gateway_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kilnctl/kiln/creds"
)

// testVersion is the version stamped into the kiln the tests build.
const testVersion = "1.2.3-test"

// buildKiln builds cmd/kiln once per test binary run, as the release does
// (static, trimmed, version stamped), so the image test can put the same
// binary in an image with nothing else.
var buildKiln = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "kiln-gateway-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "kiln")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+testVersion, "-o", bin, "../../cmd/kiln")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/kiln: %v\n%s", err, out)
	}
	return bin, nil
})

// testKey is a signing key with its id. 2048 bits: the gateway does not
// care about the size, and 3072-bit keys are slow to generate.
type testKey struct {
	priv *rsa.PrivateKey
	id   string
	pem  string
}

func newKey(t *testing.T) testKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	id, err := creds.KeyID(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	p, err := creds.PublicKeyPEM(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return testKey{k, id, string(p)}
}

func (k testKey) token(t *testing.T, cluster, tenant string) string {
	t.Helper()
	tok, err := creds.SignToken(k.priv, k.id, cluster, tenant, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// authDir is a directory laid out like a kubelet ConfigMap volume:
//
//	..2026_01_01_00_00_00.N/keys.json
//	..data -> ..2026_01_01_00_00_00.N
//	keys.json -> ..data/keys.json
//
// set swaps it the way kubelet's atomic writer does: a new timestamped
// directory, a ..data_tmp symlink to it renamed over ..data, the old
// directory removed.
type authDir struct {
	t    *testing.T
	path string
	n    int
	old  string
}

func newAuthDir(t *testing.T, keys ...testKey) *authDir {
	d := &authDir{t: t, path: t.TempDir()}
	d.set(keys...)
	if err := os.Symlink(filepath.Join("..data", "keys.json"), filepath.Join(d.path, "keys.json")); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *authDir) set(keys ...testKey) { d.publish(nil, keys...) }

// publish swaps in keys and, unless nil, the tenant table (tenants.json),
// both in one ..data version.
func (d *authDir) publish(table *creds.TenantTable, keys ...testKey) {
	d.t.Helper()
	m := map[string]string{}
	for _, k := range keys {
		m[k.id] = k.pem
	}
	data, err := json.Marshal(m)
	if err != nil {
		d.t.Fatal(err)
	}
	d.n++
	ts := fmt.Sprintf("..2026_01_01_00_00_00.%d", d.n)
	if err := os.Mkdir(filepath.Join(d.path, ts), 0o755); err != nil {
		d.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.path, ts, "keys.json"), data, 0o644); err != nil {
		d.t.Fatal(err)
	}
	if table != nil {
		tb, err := table.Marshal()
		if err != nil {
			d.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d.path, ts, creds.TenantsFile), tb, 0o644); err != nil {
			d.t.Fatal(err)
		}
	}
	tmp := filepath.Join(d.path, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		d.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(d.path, "..data")); err != nil {
		d.t.Fatal(err)
	}
	if d.old != "" {
		if err := os.RemoveAll(filepath.Join(d.path, d.old)); err != nil {
			d.t.Fatal(err)
		}
	}
	d.old = ts
}

// seen is what the backend received.
type seen struct {
	Path, Query, Auth, Prefix, Tenant, ForwardedHost string
}

func newBackend(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(seen{
			Path: r.URL.Path, Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization"),
			Prefix: r.Header.Get("X-Forwarded-Prefix"), Tenant: r.Header.Get("X-Kiln-Tenant"),
			ForwardedHost: r.Header.Get("X-Forwarded-Host"),
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// gatewayProc is a running `kiln gateway`.
type gatewayProc struct {
	cmd    *exec.Cmd
	addr   string
	mu     sync.Mutex
	stderr strings.Builder
	done   chan error
	addrs  chan string
}

func startGateway(t *testing.T, args ...string) *gatewayProc {
	t.Helper()
	bin, err := buildKiln()
	if err != nil {
		t.Fatal(err)
	}
	return startProc(t, bin, append([]string{"gateway", "--listen", "127.0.0.1:0"}, args...)...)
}

// startProc starts bin with args and waits until it logs the first
// address it listens on (more arrive in p.addrs).
func startProc(t *testing.T, bin string, args ...string) *gatewayProc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &gatewayProc{cmd: cmd, done: make(chan error, 1), addrs: make(chan string, 4)}
	addrc := p.addrs
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.stderr.WriteString(line + "\n")
			p.mu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" {
				addrc <- rec.Addr
			}
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	select {
	case p.addr = <-addrc:
	case err := <-p.done:
		t.Fatalf("kiln gateway exited before listening: %v\n%s", err, p.log())
	case <-time.After(time.Minute):
		t.Fatalf("kiln gateway did not report its address\n%s", p.log())
	}
	return p
}

func (p *gatewayProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

func (p *gatewayProc) url(path string) string { return "http://" + p.addr + path }

type result struct {
	code int
	hdr  http.Header
	body string
	seen seen
}

func (p *gatewayProc) do(t *testing.T, host, path, token string) result {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, p.url(path), nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	r := result{code: resp.StatusCode, hdr: resp.Header, body: string(body)}
	if resp.StatusCode == http.StatusOK {
		_ = json.Unmarshal(body, &r.seen)
	}
	return r
}

// eventually polls cond until it holds or the test's deadline nears:
// key reloads are asynchronous, so the tests wait for their effect.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx := t.Context()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-5*time.Second))
		defer cancel()
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting: %s", what)
		case <-tick.C:
		}
	}
}

func TestGatewayProcess(t *testing.T) {
	const cluster, domain = "dev1", "dev1.kiln.test"
	oldKey, newKeyV := newKey(t), newKey(t)
	auth := newAuthDir(t, oldKey)
	backend := newBackend(t)
	// A backend that refuses connections: a Service with no ready endpoints.
	down := httptest.NewServer(http.NotFoundHandler())
	downAddr := down.Listener.Addr().String()
	down.Close()

	gw := startGateway(t, "--auth-dir", auth.path, "--cluster", cluster, "--domain", domain,
		"--backend", "default/web="+backend.Listener.Addr().String(),
		"--backend", "staging/web="+backend.Listener.Addr().String(),
		"--backend", "default/down="+downAddr)
	eventually(t, "/readyz answers 200", func() bool {
		resp, err := http.Get(gw.url("/readyz"))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	tokDefault := oldKey.token(t, cluster, "default")
	tokStaging := oldKey.token(t, cluster, "staging")
	tokOtherCluster := oldKey.token(t, "prod", "default")
	untrusted := newKey(t).token(t, cluster, "default")
	parts := strings.Split(tokDefault, ".")
	sig := []byte(parts[2])
	sig[len(sig)/2] ^= 'A' ^ 'B'
	if sig[len(sig)/2] == parts[2][len(sig)/2] {
		t.Fatal("tamper did nothing")
	}
	tampered := parts[0] + "." + parts[1] + "." + string(sig)
	secrets := []string{tokDefault, tokStaging, tokOtherCluster, untrusted, tampered, parts[2]}

	t.Run("path form", func(t *testing.T) {
		r := gw.do(t, "", "/t/default/p/web/hello/world?x=1", tokDefault)
		if r.code != http.StatusOK {
			t.Fatalf("code %d, want 200: %s", r.code, r.body)
		}
		want := seen{Path: "/hello/world", Query: "x=1", Prefix: "/t/default/p/web", Tenant: "default", ForwardedHost: gw.addr}
		if r.seen != want {
			t.Errorf("backend saw %+v, want %+v (the token must not reach it)", r.seen, want)
		}
		if r := gw.do(t, "", "/t/default/p/web", tokDefault); r.code != http.StatusOK || r.seen.Path != "/" {
			t.Errorf("bare prefix: code %d, path %q; want 200, /", r.code, r.seen.Path)
		}
	})
	t.Run("host form", func(t *testing.T) {
		r := gw.do(t, "web.staging."+domain+":8080", "/index.html", tokStaging)
		if r.code != http.StatusOK || r.seen.Path != "/index.html" || r.seen.Tenant != "staging" || r.seen.Auth != "" {
			t.Fatalf("code %d, backend saw %+v; want 200 and /index.html for staging without the token", r.code, r.seen)
		}
	})
	cases := []struct {
		name, host, path, token string
		code                    int
		challenge               string
	}{
		{"missing token", "", "/t/default/p/web/", "", http.StatusUnauthorized, `Bearer realm="kiln"`},
		{"tampered token", "", "/t/default/p/web/", tampered, http.StatusUnauthorized, `Bearer realm="kiln", error="invalid_token"`},
		{"untrusted key", "", "/t/default/p/web/", untrusted, http.StatusUnauthorized, `Bearer realm="kiln", error="invalid_token"`},
		{"other cluster", "", "/t/default/p/web/", tokOtherCluster, http.StatusUnauthorized, `Bearer realm="kiln", error="invalid_token"`},
		{"garbage token", "", "/t/default/p/web/", "not-a-jwt", http.StatusUnauthorized, `Bearer realm="kiln", error="invalid_token"`},
		{"other tenant, path form", "", "/t/default/p/web/", tokStaging, http.StatusForbidden, ""},
		{"other tenant, host form", "web.default." + domain, "/", tokStaging, http.StatusForbidden, ""},
		// Another tenant's project is refused before anyone learns whether it exists.
		{"other tenant, unknown project", "", "/t/default/p/nope/", tokStaging, http.StatusForbidden, ""},
		{"unknown project", "", "/t/default/p/nope/", tokDefault, http.StatusNotFound, ""},
		{"unknown project, host form", "nope.default." + domain, "/", tokDefault, http.StatusNotFound, ""},
		{"no route", "", "/somewhere", tokDefault, http.StatusNotFound, ""},
		{"bad host form", "a.b.default." + domain, "/", tokDefault, http.StatusNotFound, ""},
		{"bad path form", "", "/t/default/x/web/", tokDefault, http.StatusNotFound, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := gw.do(t, c.host, c.path, c.token)
			if r.code != c.code {
				t.Fatalf("code %d, want %d: %s", r.code, c.code, r.body)
			}
			if got := r.hdr.Get("WWW-Authenticate"); got != c.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, c.challenge)
			}
			// No detail that helps an attacker: one fixed line per code.
			for _, leak := range []string{"kid", "sha256", "signature", "iss", "sub", "tenant", "key"} {
				if strings.Contains(strings.ToLower(r.body), leak) {
					t.Errorf("body %q says %q", r.body, leak)
				}
			}
		})
	}
	t.Run("no ready endpoints", func(t *testing.T) {
		r := gw.do(t, "", "/t/default/p/down/", tokDefault)
		if r.code != http.StatusServiceUnavailable || r.hdr.Get("Retry-After") == "" {
			t.Fatalf("code %d, Retry-After %q; want 503 with Retry-After", r.code, r.hdr.Get("Retry-After"))
		}
	})

	// Rotation (rotate-key --keep-old): the new key is trusted alongside
	// the old, tokens are re-signed, then the old key is removed.
	tokNew := newKeyV.token(t, cluster, "default")
	secrets = append(secrets, tokNew)
	if r := gw.do(t, "", "/t/default/p/web/", tokNew); r.code != http.StatusUnauthorized {
		t.Fatalf("a token of a key not trusted yet: code %d, want 401", r.code)
	}
	auth.set(oldKey, newKeyV)
	eventually(t, "the new key is accepted after the kubelet-style swap", func() bool {
		return gw.do(t, "", "/t/default/p/web/", tokNew).code == http.StatusOK
	})
	if r := gw.do(t, "", "/t/default/p/web/", tokDefault); r.code != http.StatusOK {
		t.Fatalf("old key while both are trusted: code %d, want 200", r.code)
	}
	auth.set(newKeyV)
	eventually(t, "the removed key is refused", func() bool {
		return gw.do(t, "", "/t/default/p/web/", tokDefault).code == http.StatusUnauthorized
	})
	if r := gw.do(t, "", "/t/default/p/web/", tokNew); r.code != http.StatusOK {
		t.Fatalf("new key after the old was removed: code %d, want 200", r.code)
	}

	t.Run("metrics", func(t *testing.T) {
		resp, err := http.Get(gw.url("/metrics"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{
			`kiln_gateway_requests_total{tenant="default",code="200"}`,
			`kiln_gateway_requests_total{tenant="staging",code="403"}`,
			`kiln_gateway_requests_total{tenant="",code="401"}`,
			`kiln_gateway_request_duration_seconds_bucket{le="+Inf"}`,
			`kiln_gateway_key_reloads_total{result="success"} 3`,
			"kiln_gateway_trusted_keys 1",
		} {
			if !strings.Contains(string(body), want) {
				t.Errorf("/metrics lacks %s:\n%s", want, body)
			}
		}
	})

	// SIGTERM: a graceful exit, status 0.
	if err := gw.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-gw.done:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v, want status 0\n%s", err, gw.log())
		}
	case <-time.After(time.Minute):
		t.Fatal("kiln gateway did not exit after SIGTERM")
	}

	// The access log: JSON lines, one per request, never a token.
	logText := gw.log()
	for _, s := range secrets {
		if strings.Contains(logText, s) {
			t.Fatalf("the log contains a token or signature")
		}
	}
	var forbidden int
	for _, line := range strings.Split(strings.TrimSpace(logText), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if rec["msg"] == "request" && rec["code"] == float64(403) && rec["tenant"] == "staging" && rec["route"] == "default/web" {
			forbidden++
		}
	}
	if forbidden != 2 {
		t.Errorf("%d access log lines for staging's 403 on default/web, want 2:\n%s", forbidden, logText)
	}
}

func TestGatewayProcessBadInput(t *testing.T) {
	bin, err := buildKiln()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, args := range map[string][]string{
		"no auth dir":      {"--cluster", "dev1", "--domain", "d.test"},
		"missing auth dir": {"--auth-dir", filepath.Join(dir, "nope"), "--cluster", "dev1", "--domain", "d.test"},
		"bad backend":      {"--auth-dir", dir, "--cluster", "dev1", "--domain", "d.test", "--backend", "default/web"},
		"bad cluster":      {"--auth-dir", dir, "--cluster", "Dev_1", "--domain", "d.test"},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := exec.Command(bin, append([]string{"gateway"}, args...)...).CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("exit %v, want 2:\n%s", err, out)
			}
		})
	}
}

package engine

import (
	"bufio"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/project"
	"github.com/kilnctl/kiln/internal/gateway"
)

// The verdict is a pure function of the gateway's two answers.
func TestJudgeReach(t *testing.T) {
	refused := errors.New("connection refused")
	for _, tt := range []struct {
		name         string
		anon, authed answer
		want         string
		why          string
	}{
		{"app answers", answer{code: 401}, answer{code: 200}, ReachYes, "HTTP 200"},
		{"app redirects", answer{code: 401}, answer{code: 302}, ReachYes, "HTTP 302"},
		{"app's 404", answer{code: 401}, answer{code: 404}, ReachYes, "HTTP 404"},
		{"token refused", answer{code: 401}, answer{code: 401}, ReachNo, "refused the tenant's token"},
		{"other tenant", answer{code: 401}, answer{code: 403}, ReachNo, "HTTP 403"},
		{"no endpoints", answer{code: 401}, answer{code: 503}, ReachNo, "no ready endpoint"},
		{"backend silent", answer{code: 401}, answer{code: 504}, ReachNo, "HTTP 504"},
		{"backend broken", answer{code: 401}, answer{code: 502}, ReachNo, "HTTP 502"},
		{"gateway down", answer{err: refused}, answer{err: refused}, ReachNo, "no answer from the gateway"},
		{"authed request failed", answer{code: 401}, answer{err: refused}, ReachNo, "with the tenant's token"},
		{"no authentication", answer{code: 200}, answer{code: 200}, ReachNotChecked, "not 401"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, why := judgeReach(tt.anon, tt.authed)
			if v != tt.want || !strings.Contains(why, tt.why) {
				t.Errorf("judgeReach = %q (%s), want %q containing %q", v, why, tt.want, tt.why)
			}
		})
	}
	if got := (Reach{Verdict: ReachNotChecked, Why: "x"}).String(); got != "reachable: not checked (x)" {
		t.Errorf("String = %q", got)
	}
}

// The HTTP half of the probe against a real `kiln gateway` process with
// real backends: a project that answers is reachable, one whose backend
// refuses connections is not (the gateway's 503, still so after the
// settle time), one whose backend starts listening only after the first
// try is reachable (asked again), a token of a key the gateway does not
// trust is refused, a tenant without a token is not checked; no result
// holds a token.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestReachThroughGatewayProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs kiln")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "kiln")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/kiln").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kiln: %v\n%s", err, out)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	id, err := creds.KeyID(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pemText, err := creds.PublicKeyPEM(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	authDir := filepath.Join(dir, "auth")
	if err := os.Mkdir(authDir, 0o700); err != nil {
		t.Fatal(err)
	}
	keysJSON, _ := json.Marshal(map[string]string{id: string(pemText)})
	if err := os.WriteFile(filepath.Join(authDir, gateway.KeysFile), keysJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	hosts := make(chan string, 8)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hosts <- r.Header.Get("X-Forwarded-Host")
		w.WriteHeader(http.StatusOK)
	}))
	defer app.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	downAddr := down.Listener.Addr().String()
	down.Close()
	// late: refused until the probe has tried at least once, then an app.
	reserved, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lateAddr := reserved.Addr().String()
	reserved.Close()
	lateTried := make(chan struct{})
	var lateOnce sync.Once
	lateUp := make(chan *httptest.Server, 1)
	defer func() {
		select {
		case srv := <-lateUp:
			srv.Close()
		default:
		}
	}()
	pace := reachPace{settle: 3 * time.Second, every: 200 * time.Millisecond}

	const cluster, domain = "dev1", "dev1.kiln.test"
	cmd := exec.Command(bin, "gateway", "--listen", "127.0.0.1:0", "--auth-dir", authDir, "--cluster", cluster, "--domain", domain,
		"--backend", "default/web="+app.Listener.Addr().String(), "--backend", "default/down="+downAddr,
		"--backend", "default/late="+lateAddr)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "listening" {
				select {
				case addr <- rec.Addr:
				default:
				}
			}
		}
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(time.Minute):
		t.Fatal("the gateway never said where it listens")
	}

	td, err := creds.NewTokenDir(cluster, "kube", "ctx", key, []string{"default"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	td.Path = "/tokens/dev1"
	client := &http.Client{Timeout: time.Minute}
	refs := []project.Ref{{Tenant: "default", Project: "web"}, {Tenant: "default", Project: "down"}, {Tenant: "staging", Project: "web"}, {Tenant: "default", Project: "late"}}
	// The late backend starts once the gateway has refused it once (its
	// 503 seen by the probe: the first round is over).
	go func() {
		<-lateTried
		l, err := net.Listen("tcp", lateAddr)
		if err != nil {
			t.Errorf("listen %s: %v", lateAddr, err)
			return
		}
		srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusTeapot)
		})}}
		srv.Start()
		lateUp <- srv
	}()
	wrapped := &http.Client{Timeout: time.Minute, Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err == nil && req.Host == "late.default."+domain && req.Header.Get("Authorization") != "" && resp.StatusCode == http.StatusServiceUnavailable {
			lateOnce.Do(func() { close(lateTried) })
		}
		return resp, err
	})}
	got := reachProjects(t.Context(), wrapped, pace, base, domain, td, refs)
	want := []struct{ verdict, why string }{
		{ReachYes, "HTTP 200"},
		{ReachNo, "HTTP 503); the same after"},
		{ReachNotChecked, "no token of tenant staging"},
		{ReachYes, "HTTP 418"},
	}
	if len(got) != len(want) {
		t.Fatalf("results %+v", got)
	}
	for i, w := range want {
		if got[i].Ref != refs[i] || got[i].Verdict != w.verdict || !strings.Contains(got[i].Why, w.why) {
			t.Errorf("%s: %s, want %s containing %q", refs[i], got[i], w.verdict, w.why)
		}
	}
	// The app saw the request for the project's host, once: the anonymous
	// one never got past the gateway.
	select {
	case h := <-hosts:
		if h != "web.default."+domain {
			t.Errorf("the app saw host %q", h)
		}
	default:
		t.Error("the app never saw the authenticated request")
	}
	if len(hosts) != 0 {
		t.Errorf("the app saw %d more requests: the anonymous one got through", len(hosts))
	}

	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	untrusted, err := creds.NewTokenDir(cluster, "kube", "ctx", other, []string{"default"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, reachProjects(t.Context(), client, pace, base, domain, untrusted, refs[:1])...)
	if r := got[len(got)-1]; r.Verdict != ReachNo || !strings.Contains(r.Why, "401") {
		t.Errorf("untrusted token: %s, want no (401)", r)
	}
	for _, r := range got {
		for _, tok := range []string{td.Tokens["default"], untrusted.Tokens["default"]} {
			if strings.Contains(fmt.Sprint(r), tok) {
				t.Fatal("a result holds a token")
			}
		}
	}
}

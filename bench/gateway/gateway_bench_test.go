// Package gateway benchmarks `kiln gateway` on loopback against the nginx
// it replaced as the platform's gateway, both proxying to the same
// backend: requests per second and latency percentiles, with the
// gateway's token verification on. Not run in CI (benchmarks run only
// with -bench); bench/gateway.sh runs it and prints the table.
//
//	go test -run '^$' -bench Gateway -benchtime=1x ./bench/gateway/
//
// KILN_BENCH_GATEWAY_SECONDS (default 10) is the load per peer,
// KILN_BENCH_GATEWAY_CONCURRENCY (default 16) the clients in flight.
package gateway

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kilnctl/kiln/creds"
)

// maxRequests bounds each load run whatever its duration.
const maxRequests = 2_000_000

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// freePort returns a loopback port nobody listens on right now.
func freePort(b *testing.B) int {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitListening waits until addr accepts connections or the process exits.
func waitListening(b *testing.B, addr string, done <-chan struct{}) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			b.Fatalf("the server for %s exited", addr)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("nothing listens on %s", addr)
}

// pinned runs name on the CPUs of the environment variable cpusVar (a
// taskset list such as "0" or "0,1") when it is set.
func pinned(cpusVar, name string, args ...string) *exec.Cmd {
	if cpus := os.Getenv(cpusVar); cpus != "" {
		return exec.Command("taskset", append([]string{"-c", cpus, name}, args...)...)
	}
	return exec.Command(name, args...)
}

// start runs name with args on the proxies' CPUs (KILN_BENCH_GATEWAY_PROXY_CPUS)
// until the benchmark ends.
func start(b *testing.B, name string, args ...string) <-chan struct{} {
	b.Helper()
	cmd := pinned("KILN_BENCH_GATEWAY_PROXY_CPUS", name, args...)
	done := startCmd(b, filepath.Base(name), cmd)
	proxyGroup = cmd.Process.Pid
	b.Cleanup(func() { proxyGroup = 0 })
	return done
}

// proxyGroup is the process group of the proxy under load (its own, as
// startCmd starts it; nginx's master and workers), 0 for none.
var proxyGroup int

// groupCPU is the CPU time the processes of group pg have used so far
// (user and system, in clock ticks of 10 ms), 0 for no group.
func groupCPU(pg int) time.Duration {
	if pg == 0 {
		return 0
	}
	dirs, _ := os.ReadDir("/proc")
	var ticks int64
	for _, d := range dirs {
		if d.Name()[0] < '0' || d.Name()[0] > '9' {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// After the command's name in parentheses: state ppid pgrp ...;
		// utime and stime are the 14th and 15th fields of the line.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 13 || f[2] != strconv.Itoa(pg) {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + s
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// reportCPU reports the proxy's CPU time per request over the measured
// run (from cpu0, groupCPU before it): with the proxy not the bottleneck
// on a small machine, what it costs per request compares proxies where
// requests per second cannot.
func reportCPU(b *testing.B, cpu0 time.Duration, requests float64) {
	if proxyGroup == 0 || requests == 0 {
		return
	}
	b.ReportMetric(float64((groupCPU(proxyGroup)-cpu0).Microseconds())/requests, "cpu-us/req")
}

// startCmd starts cmd as start does, on the CPUs it was given, its output
// in a log file named after logName.
func startCmd(b *testing.B, logName string, cmd *exec.Cmd) <-chan struct{} {
	b.Helper()
	logf, err := os.Create(filepath.Join(b.TempDir(), logName+".log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// A process group of its own, killed whole: nginx's workers outlive a
	// master killed alone and keep serving (an earlier run left them
	// behind). Pdeathsig ends the peer if the benchmark itself dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	b.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		logf.Close()
	})
	return done
}

// load sends GETs to url with token from conc clients for d (at most
// maxRequests) and reports requests/s and latency percentiles. With
// KILN_BENCH_GATEWAY_LOAD=wrk the load generator is wrk (C, event loop;
// not the bottleneck the Go client can be), run on the CPUs of
// KILN_BENCH_GATEWAY_LOAD_CPUS when set.
func load(b *testing.B, url, token string, conc int, d time.Duration) {
	b.Helper()
	if os.Getenv("KILN_BENCH_GATEWAY_LOAD") == "wrk" {
		loadWrk(b, url, token, conc, d)
		return
	}
	tr := &http.Transport{MaxIdleConns: conc, MaxIdleConnsPerHost: conc, Proxy: nil, DisableKeepAlives: newConnPerRequest()}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	get := func() (time.Duration, error) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		return time.Since(t0), nil
	}
	// Warm up: connections, caches (the gateway's verified-token cache).
	for range conc * 10 {
		if _, err := get(); err != nil {
			b.Fatalf("warm-up GET %s: %v", url, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var mu sync.Mutex
	var all []time.Duration
	var sent, failed int
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0 := groupCPU(proxyGroup)
	t0 := time.Now()
	for range conc {
		wg.Go(func() {
			var lat []time.Duration
			var bad int
			for ctx.Err() == nil {
				mu.Lock()
				if sent >= maxRequests {
					mu.Unlock()
					break
				}
				sent++
				mu.Unlock()
				l, err := get()
				if err != nil {
					bad++
					continue
				}
				lat = append(lat, l)
			}
			mu.Lock()
			all = append(all, lat...)
			failed += bad
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(t0)
	b.StopTimer()
	if failed > 0 {
		b.Fatalf("%d of %d requests failed", failed, sent)
	}
	slices.Sort(all)
	pct := func(p float64) float64 {
		return float64(all[int(p*float64(len(all)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "req/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(len(all)), "requests")
	reportCPU(b, cpu0, float64(len(all)))
}

// oauth2Proxy benchmarks oauth2-proxy (github.com/oauth2-proxy/oauth2-proxy,
// the Go proxy users put in front of services to check tokens) as a peer:
// OIDC provider, every request with a bearer JWT it verifies
// (--skip-jwt-bearer-tokens), RS256 with an RSA key of kiln's size whose
// JWKS a local server publishes, request log to a file. Its binary is
// KILN_BENCH_OAUTH2_PROXY or oauth2-proxy on PATH
// (go install github.com/oauth2-proxy/oauth2-proxy/v7@v7.15.6).
func oauth2Proxy(b *testing.B, backendAddr string, conc int, dur time.Duration) {
	bin := os.Getenv("KILN_BENCH_OAUTH2_PROXY")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("oauth2-proxy"); err != nil {
			b.Skip("oauth2-proxy not installed (go install github.com/oauth2-proxy/oauth2-proxy/v7@v7.15.6)")
		}
	}
	key, err := rsa.GenerateKey(rand.Reader, creds.KeyBits)
	if err != nil {
		b.Fatal(err)
	}
	b64 := base64.RawURLEncoding
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "use": "sig", "alg": "RS256", "kid": "bench",
		"n": b64.EncodeToString(key.N.Bytes()), "e": b64.EncodeToString(big.NewInt(int64(key.E)).Bytes()),
	}}})
	jl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	js := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jwks)
	})}
	go func() { _ = js.Serve(jl) }()
	b.Cleanup(func() { _ = js.Close() })
	issuer := "http://" + jl.Addr().String()
	header, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": "bench"})
	now := time.Now()
	claims, _ := json.Marshal(map[string]any{"iss": issuer, "aud": "kiln-bench", "sub": "default", "email": "default@bench.kiln.test",
		"email_verified": true, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	signing := b64.EncodeToString(header) + "." + b64.EncodeToString(claims)
	digest := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	if err != nil {
		b.Fatal(err)
	}
	token := signing + "." + b64.EncodeToString(sig)
	port := freePort(b)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cookie := make([]byte, 32)
	_, _ = rand.Read(cookie)
	done := start(b, bin, "--http-address", addr, "--upstream", "http://"+backendAddr+"/",
		"--provider", "oidc", "--oidc-issuer-url", issuer, "--skip-oidc-discovery",
		"--oidc-jwks-url", issuer+"/jwks", "--login-url", issuer+"/login", "--redeem-url", issuer+"/token",
		"--client-id", "kiln-bench", "--client-secret", "unused", "--cookie-secret", b64.EncodeToString(cookie),
		"--email-domain", "*", "--skip-jwt-bearer-tokens", "--bearer-token-login-fallback=false",
		"--skip-provider-button", "--request-logging", "--auth-logging=false", "--standard-logging=false")
	waitListening(b, addr, done)
	load(b, "http://"+addr+"/", token, conc, dur)
}

// newConnPerRequest: KILN_BENCH_GATEWAY_NEWCONN=1 loads with a new
// connection per request (Connection: close), as one-shot clients and
// proxies without keep-alive do: accepting and closing costs then.
func newConnPerRequest() bool { return os.Getenv("KILN_BENCH_GATEWAY_NEWCONN") == "1" }

// loadWrk is load with wrk: one thread, conc connections, --latency for
// the percentiles. Non-2xx answers fail the benchmark.
func loadWrk(b *testing.B, url, token string, conc int, d time.Duration) {
	b.Helper()
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		b.Skip("wrk not installed (apt-get install wrk)")
	}
	var headers []string
	if token != "" {
		headers = append(headers, "-H", "Authorization: Bearer "+token)
	}
	if newConnPerRequest() {
		headers = append(headers, "-H", "Connection: close")
	}
	args := append([]string{"-t1", fmt.Sprintf("-c%d", conc), fmt.Sprintf("-d%ds", int(d.Seconds())), "--latency"}, headers...)
	// Warm-up: connections and the gateway's verified-token cache.
	warm := pinned("KILN_BENCH_GATEWAY_LOAD_CPUS", wrk, append([]string{"-t1", fmt.Sprintf("-c%d", conc), "-d1s", url}, headers...)...)
	if out, err := warm.CombinedOutput(); err != nil {
		b.Fatalf("wrk warm-up: %v\n%s", err, out)
	}
	b.ResetTimer()
	cpu0 := groupCPU(proxyGroup)
	out, err := pinned("KILN_BENCH_GATEWAY_LOAD_CPUS", wrk, append(args, url)...).CombinedOutput()
	b.StopTimer()
	if err != nil {
		b.Fatalf("wrk: %v\n%s", err, out)
	}
	var rps, p50, p99, requests float64
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "Requests/sec:":
			rps, _ = strconv.ParseFloat(f[1], 64)
		case len(f) == 2 && f[0] == "50%":
			p50 = wrkMillis(f[1])
		case len(f) == 2 && f[0] == "99%":
			p99 = wrkMillis(f[1])
		case len(f) >= 5 && f[1] == "requests" && f[2] == "in":
			requests, _ = strconv.ParseFloat(f[0], 64)
		case strings.HasPrefix(strings.TrimSpace(line), "Non-2xx"), strings.HasPrefix(strings.TrimSpace(line), "Socket errors"):
			b.Fatalf("wrk: %s\n%s", strings.TrimSpace(line), out)
		}
	}
	if rps == 0 || p99 == 0 {
		b.Fatalf("wrk output not understood:\n%s", out)
	}
	b.ReportMetric(rps, "req/s")
	b.ReportMetric(p50, "p50-ms")
	b.ReportMetric(p99, "p99-ms")
	b.ReportMetric(requests, "requests")
	reportCPU(b, cpu0, requests)
}

// wrkMillis parses a wrk latency ("812.00us", "1.20ms", "1.01s").
func wrkMillis(s string) float64 {
	for _, u := range []struct {
		suffix string
		ms     float64
	}{{"us", 0.001}, {"ms", 1}, {"m", 60000}, {"s", 1000}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f * u.ms
		}
	}
	return 0
}

// BenchmarkGatewayProxy: the same backend behind nothing, behind nginx
// (plain proxying, as the platform's old gateway; and once more without
// its access log and with unlimited keep-alive, the fastest nginx, as a
// control), behind oauth2-proxy and behind kiln gateway (every request
// authenticated with a tenant token, routed by path).
//
// KILN_BENCH_GATEWAY_BACKEND picks the backend: "go" (the default), a Go
// net/http server in the benchmark's process, or "nginx", nginx answering
// the same bytes from memory, one worker per CPU, no log: a backend that
// costs little and has no collector, so that what the proxies add shows.
func BenchmarkGatewayProxy(b *testing.B) {
	conc := envInt("KILN_BENCH_GATEWAY_CONCURRENCY", 16)
	dur := time.Duration(envInt("KILN_BENCH_GATEWAY_SECONDS", 10)) * time.Second

	// The answer: a small fixed body, like a project's index page.
	body := strings.Repeat("kiln ", 120)
	var backendAddr string
	switch be := os.Getenv("KILN_BENCH_GATEWAY_BACKEND"); be {
	case "", "go":
		bl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		backend := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, body)
		})}
		go func() { _ = backend.Serve(bl) }()
		b.Cleanup(func() { _ = backend.Close() })
		backendAddr = bl.Addr().String()
	case "nginx":
		backendAddr = nginxBackend(b, body)
	default:
		b.Fatalf("KILN_BENCH_GATEWAY_BACKEND=%q: want go or nginx", be)
	}

	b.Run("direct", func(b *testing.B) {
		load(b, "http://"+backendAddr+"/", "", conc, dur)
	})
	b.Run("nginx", func(b *testing.B) { nginxProxy(b, backendAddr, false, conc, dur) })
	b.Run("nginx-lean", func(b *testing.B) { nginxProxy(b, backendAddr, true, conc, dur) })

	b.Run("oauth2-proxy", func(b *testing.B) {
		oauth2Proxy(b, backendAddr, conc, dur)
	})

	// The gateway as it runs (on Linux its fast path on event loops,
	// fast_loop_linux.go), then its fast path with a goroutine per
	// connection, then net/http only: the same binary, so the last two
	// rows are the references of each step's gain.
	b.Run("kiln-gateway", func(b *testing.B) { kilnGateway(b, backendAddr, conc, dur) })
	b.Run("kiln-gateway-goroutines", func(b *testing.B) { kilnGateway(b, backendAddr, conc, dur, "--no-event-loop") })
	b.Run("kiln-gateway-net-http", func(b *testing.B) { kilnGateway(b, backendAddr, conc, dur, "--net-http-only") })
}

// nginxPaths are the directives that keep nginx's files in dir.
const nginxPaths = `pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
`

const nginxTemp = `  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
`

// runNginx starts nginx with the configuration conf(dir, port) (its files
// in dir, a directory of the benchmark's; port free), on the proxies' CPUs
// when pinned or on any, and returns the address it listens on.
func runNginx(b *testing.B, pinned bool, logName string, conf func(dir string, port int) string) string {
	b.Helper()
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		b.Skip("nginx not installed (apt-get install nginx-light)")
	}
	dir := b.TempDir()
	port := freePort(b)
	cf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(cf, []byte(conf(dir, port)), 0o600); err != nil {
		b.Fatal(err)
	}
	var done <-chan struct{}
	if pinned {
		done = start(b, nginx, "-p", dir, "-c", cf)
	} else {
		done = startCmd(b, logName, exec.Command(nginx, "-p", dir, "-c", cf))
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitListening(b, addr, done)
	return addr
}

// nginxProxy loads nginx as a plain reverse proxy to backendAddr: as
// Debian configures it (an access log, keep-alive connections closed
// after 1,000 requests), or lean: no access log and keep-alive
// connections never closed, the most requests nginx serves here.
func nginxProxy(b *testing.B, backendAddr string, lean bool, conc int, dur time.Duration) {
	addr := runNginx(b, true, "nginx", func(dir string, port int) string {
		logging := "access_log " + dir + "/access.log;"
		upstream := "keepalive 128;"
		if lean {
			logging = "access_log off; keepalive_requests 1000000;"
			upstream = "keepalive 128; keepalive_requests 1000000;"
		}
		return fmt.Sprintf(`worker_processes %[4]d;
daemon off;
`+nginxPaths+`events { worker_connections 4096; }
http {
  %[5]s
`+nginxTemp+`  upstream backend { server %[2]s; %[6]s }
  server {
    listen 127.0.0.1:%[3]d;
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
`, dir, backendAddr, port, proxyCPUs(), logging, upstream)
	})
	load(b, "http://"+addr+"/", "", conc, dur)
}

// nginxBackend starts nginx answering body to every request (one worker
// per CPU, on any CPU, no log, keep-alive connections never closed, as a
// Go server's) and returns its address. reuseport: each worker has a
// listening socket of its own and the kernel spreads the proxies'
// connections over them by hash, not by which worker woke first.
func nginxBackend(b *testing.B, body string) string {
	return runNginx(b, false, "nginx-backend", func(dir string, port int) string {
		return fmt.Sprintf(`worker_processes %[3]d;
daemon off;
`+nginxPaths+`events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
`+nginxTemp+`  server {
    listen 127.0.0.1:%[2]d reuseport;
    location / { default_type text/plain; return 200 "%[4]s"; }
  }
}
`, dir, port, runtime.NumCPU(), body)
	})
}

// kilnGateway loads `kiln gateway` with extra args in front of backendAddr.
func kilnGateway(b *testing.B, backendAddr string, conc int, dur time.Duration, extra ...string) {
	dir := b.TempDir()
	// KILN_BENCH_GATEWAY_BIN: a kiln built once for all rounds (or
	// another version of it, to compare).
	bin := os.Getenv("KILN_BENCH_GATEWAY_BIN")
	if bin == "" {
		bin = filepath.Join(dir, "kiln")
		build := exec.Command("go", "build", "-trimpath", "-o", bin, "../../cmd/kiln")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			b.Fatalf("go build: %v\n%s", err, out)
		}
	}
	key, err := rsa.GenerateKey(rand.Reader, creds.KeyBits) // as kiln generates
	if err != nil {
		b.Fatal(err)
	}
	id, _ := creds.KeyID(&key.PublicKey)
	pemText, _ := creds.PublicKeyPEM(&key.PublicKey)
	keys, _ := json.Marshal(map[string]string{id: string(pemText)})
	auth := filepath.Join(dir, "auth")
	if err := os.Mkdir(auth, 0o700); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(auth, "keys.json"), keys, 0o600); err != nil {
		b.Fatal(err)
	}
	token, err := creds.SignToken(key, id, "bench", "default", time.Now())
	if err != nil {
		b.Fatal(err)
	}
	port, mport := freePort(b), freePort(b)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	args := append([]string{"gateway", "--listen", addr, "--metrics-listen", fmt.Sprintf("127.0.0.1:%d", mport),
		"--auth-dir", auth, "--cluster", "bench", "--domain", "bench.kiln.test",
		"--backend", "default/web=" + backendAddr}, extra...)
	done := start(b, bin, args...)
	waitListening(b, addr, done)
	load(b, "http://"+addr+"/t/default/p/web/", token, conc, dur)
}

// proxyCPUs is the number of CPUs the proxies run on: nginx gets one worker
// per CPU (as worker_processes auto would on a machine of that size), the
// gateway as many Go threads (Go reads the affinity itself).
func proxyCPUs() int {
	cpus := os.Getenv("KILN_BENCH_GATEWAY_PROXY_CPUS")
	if cpus == "" {
		return runtime.NumCPU()
	}
	n := 0
	for _, part := range strings.Split(cpus, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, _ := strconv.Atoi(lo)
		z := a
		if isRange {
			z, _ = strconv.Atoi(hi)
		}
		n += z - a + 1
	}
	return max(n, 1)
}

// BenchmarkVerifyTenantToken is what a token costs the first time the
// gateway sees it (later requests with the same token hit its cache).
func BenchmarkVerifyTenantToken(b *testing.B) {
	key, err := rsa.GenerateKey(rand.Reader, creds.KeyBits)
	if err != nil {
		b.Fatal(err)
	}
	id, _ := creds.KeyID(&key.PublicKey)
	token, err := creds.SignToken(key, id, "bench", "default", time.Now())
	if err != nil {
		b.Fatal(err)
	}
	trusted := map[string]*rsa.PublicKey{id: &key.PublicKey}
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := creds.VerifyTenantToken(token, trusted, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

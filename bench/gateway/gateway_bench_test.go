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
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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

func start(b *testing.B, name string, args ...string) <-chan struct{} {
	b.Helper()
	cmd := exec.Command(name, args...)
	logf, err := os.Create(filepath.Join(b.TempDir(), filepath.Base(name)+".log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		logf.Close()
	})
	return done
}

// load sends GETs to url with token from conc clients for d (at most
// maxRequests) and reports requests/s and latency percentiles.
func load(b *testing.B, url, token string, conc int, d time.Duration) {
	b.Helper()
	tr := &http.Transport{MaxIdleConns: conc, MaxIdleConnsPerHost: conc, Proxy: nil}
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
}

// BenchmarkGatewayProxy: the same backend behind nothing, behind nginx
// (plain proxying, as the platform's old gateway), and behind kiln gateway
// (every request authenticated with a tenant token, routed by path).
func BenchmarkGatewayProxy(b *testing.B) {
	conc := envInt("KILN_BENCH_GATEWAY_CONCURRENCY", 16)
	dur := time.Duration(envInt("KILN_BENCH_GATEWAY_SECONDS", 10)) * time.Second

	// The backend: a small fixed answer, like a project's index page.
	body := []byte(strings.Repeat("kiln ", 120))
	bl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	backend := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(body)
	})}
	go func() { _ = backend.Serve(bl) }()
	b.Cleanup(func() { _ = backend.Close() })
	backendAddr := bl.Addr().String()

	b.Run("direct", func(b *testing.B) {
		load(b, "http://"+backendAddr+"/", "", conc, dur)
	})

	b.Run("nginx", func(b *testing.B) {
		nginx, err := exec.LookPath("nginx")
		if err != nil {
			b.Skip("nginx not installed (apt-get install nginx-light)")
		}
		dir := b.TempDir()
		port := freePort(b)
		conf := fmt.Sprintf(`worker_processes auto;
daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 4096; }
http {
  access_log %[1]s/access.log;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  upstream backend { server %[2]s; keepalive 128; }
  server {
    listen 127.0.0.1:%[3]d;
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
`, dir, backendAddr, port)
		cf := filepath.Join(dir, "nginx.conf")
		if err := os.WriteFile(cf, []byte(conf), 0o600); err != nil {
			b.Fatal(err)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		done := start(b, nginx, "-p", dir, "-c", cf)
		waitListening(b, addr, done)
		load(b, "http://"+addr+"/", "", conc, dur)
	})

	b.Run("kiln-gateway", func(b *testing.B) {
		dir := b.TempDir()
		bin := filepath.Join(dir, "kiln")
		build := exec.Command("go", "build", "-trimpath", "-o", bin, "../../cmd/kiln")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			b.Fatalf("go build: %v\n%s", err, out)
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
		done := start(b, bin, "gateway", "--listen", addr, "--metrics-listen", fmt.Sprintf("127.0.0.1:%d", mport),
			"--auth-dir", auth, "--cluster", "bench", "--domain", "bench.kiln.test",
			"--backend", "default/web="+backendAddr)
		waitListening(b, addr, done)
		load(b, "http://"+addr+"/t/default/p/web/", token, conc, dur)
	})
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

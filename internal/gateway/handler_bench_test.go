package gateway_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/internal/gateway"
)

// BenchmarkHandler is one authenticated, routed request through the
// gateway's handler (served by net/http on loopback, a cached token, the
// JSON access log to a file) to a loopback backend, for CPU and
// allocation profiles of the gateway's own work:
//
//	go test -run '^$' -bench Handler -benchmem -cpuprofile cpu.out ./internal/gateway/
func BenchmarkHandler(b *testing.B) {
	body := []byte(strings.Repeat("kiln ", 120))
	backend := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(body)
	})}
	bl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = backend.Serve(bl) }()
	b.Cleanup(func() { _ = backend.Close() })

	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	id, _ := creds.KeyID(&priv.PublicKey)
	pemText, _ := creds.PublicKeyPEM(&priv.PublicKey)
	keys, _ := json.Marshal(map[string]string{id: string(pemText)})
	auth := b.TempDir()
	if err := os.WriteFile(filepath.Join(auth, "keys.json"), keys, 0o600); err != nil {
		b.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(b.TempDir(), "access.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer logf.Close()
	g, err := gateway.New(gateway.Config{
		AuthDir: auth, Cluster: "bench", Domain: "bench.kiln.test",
		Backends:  map[gateway.Route]string{{Tenant: "default", Project: "web"}: bl.Addr().String()},
		LogOutput: logf,
	})
	if err != nil {
		b.Fatal(err)
	}
	g.Reload()
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	front := &http.Server{Handler: g.Handler()}
	go func() { _ = front.Serve(gl) }()
	b.Cleanup(func() { _ = front.Shutdown(context.Background()) })

	token, err := creds.SignToken(priv, id, "bench", "default", time.Now())
	if err != nil {
		b.Fatal(err)
	}
	url := "http://" + gl.Addr().String() + "/t/default/p/web/"
	tr := &http.Transport{MaxIdleConnsPerHost: 64, Proxy: nil}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	b.ReportAllocs()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		for pb.Next() {
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("HTTP %d", resp.StatusCode)
				return
			}
		}
	})
}

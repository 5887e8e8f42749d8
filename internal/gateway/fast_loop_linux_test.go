package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnctl/kiln/internal/gateway"
)

// More requests at once than a pool keeps idle backend connections for
// (gateway.MaxIdlePerBackend): after a burst every connection it opened
// stays for the next burst, which dials none (before, the pools closed
// those beyond the bound the moment they went idle and redialed them on
// the next burst: 2,000 dials a second at 256 clients); once idle for the
// trim time, those beyond the bound close and the bound stays open. The
// backend counts what it accepted and what closed. Each event loop has a
// pool (and the loops must share the clients: one holding them all
// would trim more); the goroutine path has one.
func TestFastPathKeepsBurstBackendConnections(t *testing.T) {
	gateway.SetIdleTrimAfter(t, 500*time.Millisecond)
	loops := gateway.LoopCount()
	t.Run("event loops", func(t *testing.T) {
		testBurst(t, gateway.Config{}, loops*(gateway.MaxIdlePerBackend+40), loops)
	})
	t.Run("goroutines", func(t *testing.T) {
		testBurst(t, gateway.Config{NoEventLoop: true}, gateway.MaxIdlePerBackend+80, 1)
	})
}

func testBurst(t *testing.T, cfg gateway.Config, clients, pools int) {

	// The backend answers a wave only when all its requests are in, so
	// that each request holds a backend connection of its own.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var accepted, closed atomic.Int64
	var mu sync.Mutex
	waiting := []chan struct{}{}
	arrive := func() chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		ch := make(chan struct{})
		waiting = append(waiting, ch)
		if len(waiting) == clients {
			for _, w := range waiting {
				close(w)
			}
			waiting = nil
		}
		return ch
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer closed.Add(1)
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					select {
					case <-arrive():
					case <-t.Context().Done():
						return
					}
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
			}()
		}
	}()

	key := newKey(t)
	auth := newAuthDir(t, key)
	cfg.AuthDir, cfg.Cluster, cfg.Domain = auth.path, "bench", "bench.kiln.test"
	cfg.TenantConcurrency = 4 * clients
	cfg.Backends = map[gateway.Route]string{{Tenant: "default", Project: "web"}: ln.Addr().String()}
	addr := startInProcess(t, cfg)
	tok := key.token(t, "bench", "default")
	conns := make([]net.Conn, clients)
	readers := make([]*bufio.Reader, clients)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(60 * time.Second))
		conns[i], readers[i] = c, bufio.NewReader(c)
	}
	wave := func(n int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		for i, c := range conns {
			wg.Go(func() {
				req := fmt.Sprintf("GET /t/default/p/web/w%d/c%d HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\n\r\n", n, i, tok)
				if _, err := io.WriteString(c, req); err != nil {
					errs <- err
					return
				}
				resp, err := http.ReadResponse(readers[i], nil)
				if err != nil {
					errs <- fmt.Errorf("client %d: %v", i, err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || string(b) != "ok" {
					errs <- fmt.Errorf("client %d: %d %q, want 200 ok", i, resp.StatusCode, b)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("wave %d: %v", n, err)
		}
	}

	wave(1)
	if got := accepted.Load(); got != int64(clients) {
		t.Fatalf("after the first wave of %d requests at once the backend accepted %d connections, want %d", clients, got, clients)
	}
	wave(2)
	wave(3)
	if got, c := accepted.Load(), closed.Load(); got != int64(clients) || c != 0 {
		t.Fatalf("two more waves of %d requests at once: the backend accepted %d connections in all and saw %d close, want %d and 0 (the burst's connections kept)",
			clients, got, c, clients)
	}

	// Idle now: beyond the bound, each pool's connections close.
	want := int64(clients - pools*gateway.MaxIdlePerBackend)
	deadline := time.Now().Add(20 * time.Second)
	for closed.Load() < want && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // more sweeps: nothing more may close
	if c := closed.Load(); c != want {
		t.Fatalf("idle after the bursts: %d backend connections closed, want %d (those beyond %d per pool, %d pools)", c, want, gateway.MaxIdlePerBackend, pools)
	}
	wave(4) // the bound serves; the rest are dialed again
	if got := accepted.Load(); got != int64(clients)+want {
		t.Fatalf("a wave after the trim: the backend accepted %d connections in all, want %d", got, int64(clients)+want)
	}
}

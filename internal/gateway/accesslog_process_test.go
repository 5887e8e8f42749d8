package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The access log is written in batches by a goroutine of its own; on
// SIGTERM the gateway writes every pending line before it exits: one line
// per request answered, none lost — those of requests that were still in
// flight when the signal came (their lines are the last, logged after the
// drain) included.
func TestGatewayProcessAccessLogIsCompleteAfterShutdown(t *testing.T) {
	const cluster, domain = "dev1", "dev1.kiln.test"
	key := newKey(t)
	auth := newAuthDir(t, key)
	backend := newBackend(t)
	arrived, release := make(chan struct{}, 64), make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		arrived <- struct{}{}
		<-release
		_, _ = w.Write([]byte("late\n"))
	}))
	t.Cleanup(slow.Close)
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	gw := startGateway(t, "--auth-dir", auth.path, "--cluster", cluster, "--domain", domain,
		"--backend", "default/web="+backend.Listener.Addr().String(), "--backend", "default/slow="+slow.Listener.Addr().String())
	tok := key.token(t, cluster, "default")
	const clients, each = 8, 250
	var wg sync.WaitGroup
	var mu sync.Mutex
	answered := 0
	for range clients {
		wg.Go(func() {
			for range each {
				req, _ := http.NewRequest(http.MethodGet, gw.url("/t/default/p/web/"), nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("HTTP %d, want 200", resp.StatusCode)
					return
				}
				mu.Lock()
				answered++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// Requests in flight at SIGTERM: they finish during the drain.
	const inFlight = 8
	var slowWG sync.WaitGroup
	slowCodes := make(chan int, inFlight)
	for range inFlight {
		slowWG.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, gw.url("/t/default/p/slow/"), nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			slowCodes <- resp.StatusCode
		})
	}
	for range inFlight {
		<-arrived
	}
	if err := gw.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the gateway logs that it is shutting down", func() bool { return strings.Contains(gw.log(), `"msg":"shutting down"`) })
	releaseOnce.Do(func() { close(release) })
	slowWG.Wait()
	close(slowCodes)
	for c := range slowCodes {
		if c != http.StatusOK {
			t.Errorf("a request in flight at SIGTERM: HTTP %d, want 200", c)
		}
	}
	select {
	case err := <-gw.done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("kiln gateway did not exit after SIGTERM")
	}
	lines, slowLines := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(gw.log()), "\n") {
		var rec struct{ Msg, Path string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if rec.Msg == "request" && rec.Path == "/t/default/p/web/" {
			lines++
		}
		if rec.Msg == "request" && rec.Path == "/t/default/p/slow/" {
			slowLines++
		}
		if strings.Contains(line, "dropped") {
			t.Errorf("lines dropped: %s", line)
		}
	}
	if lines != answered || answered != clients*each {
		t.Fatalf("%d access log lines for %d requests answered (of %d sent)", lines, answered, clients*each)
	}
	if slowLines != inFlight {
		t.Fatalf("%d access log lines for the %d requests in flight at SIGTERM", slowLines, inFlight)
	}
}

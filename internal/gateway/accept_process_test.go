package gateway_test

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A gateway out of file descriptors (its RLIMIT_NOFILE reached by idle
// clients) backs off accepting — it neither spins nor exits — and
// accepts again once clients leave, on the event loops and on the
// goroutine path.
func TestGatewayOutOfDescriptors(t *testing.T) {
	key := newKey(t)
	auth := newAuthDir(t, key)
	be := newBackend(t)
	tok := key.token(t, "bench", "default")
	bin, err := buildKiln()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []struct {
		name  string
		extra []string
	}{{"event loops", nil}, {"goroutines", []string{"--no-event-loop"}}} {
		t.Run(mode.name, func(t *testing.T) {
			// Both limits (Go raises the soft one to the hard one).
			args := append([]string{"-c", `ulimit -n 64 && exec "$0" "$@"`, bin, "gateway", "--listen", "127.0.0.1:0",
				"--auth-dir", auth.path, "--cluster", "bench", "--domain", "bench.kiln.test",
				"--backend", "default/web=" + be.Listener.Addr().String()}, mode.extra...)
			gw := startProc(t, "/bin/sh", args...)
			get := func() int {
				req, _ := http.NewRequest(http.MethodGet, gw.url("/t/default/p/web/"), nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				req.Close = true
				c := &http.Client{Timeout: 30 * time.Second}
				resp, err := c.Do(req)
				if err != nil {
					return 0
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			eventually(t, "the gateway answers", func() bool { return get() == http.StatusOK })

			// More idle clients than the gateway has descriptors.
			var idle []net.Conn
			for range 100 {
				c, err := net.Dial("tcp", gw.addr)
				if err != nil {
					t.Fatal(err)
				}
				idle = append(idle, c)
			}
			defer func() {
				for _, c := range idle {
					c.Close()
				}
			}()
			eventually(t, "the gateway logs running out of descriptors", func() bool {
				return strings.Contains(gw.log(), "too many open files")
			})
			// A spinning accept would log every failure; backing off
			// (5 ms doubling to 1 s) logs a dozen in the same time.
			time.Sleep(2 * time.Second)
			if n := strings.Count(gw.log(), "accept failed"); n > 50 {
				t.Errorf("%d accept failures logged in about 2 s: accepting does not back off", n)
			}
			select {
			case err := <-gw.done:
				t.Fatalf("the gateway exited: %v\n%s", err, gw.log())
			default:
			}
			for _, c := range idle {
				c.Close()
			}
			idle = nil
			eventually(t, "the gateway answers again after its clients left", func() bool { return get() == http.StatusOK })
		})
	}
}

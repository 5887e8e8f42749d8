package gateway

import (
	"net"
	"net/http"
	"sync"
)

// limitListener accepts at most max connections at once: past it Accept
// waits for one to close (the others wait in the kernel's backlog), so a
// flood of slow or idle connections cannot take every file descriptor and
// the memory behind them.
func limitListener(ln net.Listener, max int) net.Listener {
	return &limited{Listener: ln, slots: make(chan struct{}, max)}
}

type limited struct {
	net.Listener
	slots chan struct{}
}

func (l *limited) Accept() (net.Conn, error) {
	l.slots <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, free: func() { <-l.slots }}, nil
}

type limitedConn struct {
	net.Conn
	once sync.Once
	free func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	return err
}

// tenantLimit bounds each tenant's requests in flight, so one tenant's
// hanging backend or burst holds at most max of the gateway's requests.
type tenantLimit struct {
	max      int
	mu       sync.Mutex
	inflight map[string]int
}

// acquire takes a slot for tenant; ok false when it has max in flight.
func (t *tenantLimit) acquire(tenant string) (release func(), ok bool) {
	if !t.take(tenant) {
		return nil, false
	}
	var once sync.Once
	return func() { once.Do(func() { t.give(tenant) }) }, true
}

// take takes a slot for tenant, false when it has max in flight; give
// returns it.
func (t *tenantLimit) take(tenant string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.inflight == nil {
		t.inflight = map[string]int{}
	}
	if t.inflight[tenant] >= t.max {
		return false
	}
	t.inflight[tenant]++
	return true
}

func (t *tenantLimit) give(tenant string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.inflight[tenant]--; t.inflight[tenant] == 0 {
		delete(t.inflight, tenant)
	}
}

// loopbackOnly answers 403 to clients that are not on this machine.
func loopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			http.Error(w, "forbidden: /metrics is served to this machine only (--metrics-listen serves it on an address of its own)", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

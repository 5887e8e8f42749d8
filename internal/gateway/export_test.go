package gateway

import (
	"testing"
	"time"
)

// SetClientTimeouts shortens the client-side timeouts for t (restored
// when t ends; set them before the gateway starts).
func SetClientTimeouts(t *testing.T, header, idle time.Duration) {
	h, i := readHeaderTimeout, idleTimeout
	readHeaderTimeout, idleTimeout = header, idle
	t.Cleanup(func() { readHeaderTimeout, idleTimeout = h, i })
}

// SetIdleTrimAfter shortens how long an event loop keeps a burst's idle
// backend connections beyond the steady bound, for t.
func SetIdleTrimAfter(t *testing.T, d time.Duration) {
	old := idleTrimAfter
	idleTrimAfter = d
	t.Cleanup(func() { idleTrimAfter = old })
}

// MaxIdlePerBackend is the steady bound on idle backend connections.
const MaxIdlePerBackend = maxIdlePerBackend

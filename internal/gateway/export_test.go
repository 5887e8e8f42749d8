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

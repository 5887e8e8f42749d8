package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"syscall"
	"testing"
)

// Backend failures in cluster DNS mode: a name that does not resolve is an
// unknown project, a refused connection a Service without ready endpoints.
func TestProxyErrorCodes(t *testing.T) {
	cases := []struct {
		name       string
		err        error
		code       int
		retryAfter bool
	}{
		{"NXDOMAIN", &net.DNSError{Err: "no such host", Name: "web.kiln-tenant-default.svc", IsNotFound: true}, http.StatusNotFound, false},
		{"DNS timeout", &net.DNSError{Err: "i/o timeout", IsTimeout: true}, http.StatusBadGateway, false},
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, http.StatusServiceUnavailable, true},
		{"dial timeout", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("i/o timeout")}, http.StatusServiceUnavailable, true},
		{"reset mid-response", fmt.Errorf("read: %w", syscall.ECONNRESET), http.StatusBadGateway, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			info := &reqInfo{}
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r = r.WithContext(context.WithValue(r.Context(), infoKey{}, info))
			w := httptest.NewRecorder()
			proxyError(w, r, c.err)
			if w.Code != c.code {
				t.Errorf("code %d, want %d", w.Code, c.code)
			}
			if got := w.Header().Get("Retry-After") != ""; got != c.retryAfter {
				t.Errorf("Retry-After present %v, want %v", got, c.retryAfter)
			}
			if info.reason == "" {
				t.Error("no reason for the access log")
			}
		})
	}
}

func TestParseBackend(t *testing.T) {
	r, addr, err := ParseBackend("default/web=127.0.0.1:9000")
	if err != nil || r != (Route{"default", "web"}) || addr != "127.0.0.1:9000" {
		t.Fatalf("ParseBackend = %v, %q, %v", r, addr, err)
	}
	for _, bad := range []string{"default/web", "default=1.2.3.4:5", "Default/web=h:1", "a/b=h", "a/b=h:0", "a/b=:80", "a/b/c=h:1"} {
		if _, _, err := ParseBackend(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

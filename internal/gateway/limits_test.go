package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The gateway dials a project by its fully qualified name with the root
// dot: with the pod's DNS search path (kiln-system.svc.cluster.local
// svc.cluster.local cluster.local), the relative name
// web.kiln-tenant-a.svc would first be tried as
// web.kiln-tenant-a.svc.kiln-system.svc.cluster.local and
// web.kiln-tenant-a.svc.svc.cluster.local — the latter is Service
// kiln-tenant-a of a namespace named "svc", which anyone who can create
// that namespace controls. A name ending in a dot is never searched.
func TestBackendIsDialledByItsFullyQualifiedName(t *testing.T) {
	if got, want := BackendHost(Route{Tenant: "a", Project: "web"}, "cluster.local"), "web.kiln-tenant-a.svc.cluster.local."; got != want {
		t.Fatalf("BackendHost = %q, want %q", got, want)
	}
	// Through the proxy: the address handed to the dialer is the FQDN
	// (the stub dialer stands in for the resolver and records it).
	var dialled []string
	stub := func(_ context.Context, _, addr string) (net.Conn, error) {
		dialled = append(dialled, addr)
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("stub: connection refused")}
	}
	g := &Gateway{cfg: Config{ClusterDomain: "corp.example", Domain: "dev1.kiln.test"}, tenants: tenantLimit{max: 4}, metrics: newMetrics()}
	g.cfg.Dial = stub
	g.proxy = newProxy(g.cfg)
	info := &reqInfo{route: Route{Tenant: "a", Project: "web"}, path: "/", addr: net.JoinHostPort(BackendHost(Route{Tenant: "a", Project: "web"}, g.cfg.ClusterDomain), "80")}
	r := httptest.NewRequest(http.MethodGet, "http://web.a.dev1.kiln.test/", nil)
	w := httptest.NewRecorder()
	g.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), infoKey{}, info)))
	if len(dialled) == 0 || dialled[0] != "web.kiln-tenant-a.svc.corp.example.:80" {
		t.Fatalf("dialled %v, want web.kiln-tenant-a.svc.corp.example.:80", dialled)
	}
}

func TestMetricsOnTheTenantAddressAnswerLoopbackOnly(t *testing.T) {
	h := loopbackOnly(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	for addr, want := range map[string]int{"127.0.0.1:5000": 200, "[::1]:5000": 200, "10.244.0.7:5000": 403, "203.0.113.5:1": 403} {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		r.RemoteAddr = addr
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("/metrics from %s: %d, want %d", addr, w.Code, want)
		}
	}
}

func TestTenantLimitIsPerTenant(t *testing.T) {
	l := tenantLimit{max: 2}
	r1, ok1 := l.acquire("a")
	_, ok2 := l.acquire("a")
	_, ok3 := l.acquire("a")
	_, okB := l.acquire("b")
	if !ok1 || !ok2 || ok3 || !okB {
		t.Fatalf("acquire a, a, a, b = %v %v %v %v; want true true false true", ok1, ok2, ok3, okB)
	}
	r1()
	r1() // releasing twice frees one slot only
	if _, ok := l.acquire("a"); !ok {
		t.Fatal("a slot freed by release was not given again")
	}
	if _, ok := l.acquire("a"); ok {
		t.Fatal("a double release freed two slots")
	}
}

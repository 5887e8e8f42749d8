package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Answers carry no detail that would help an attacker: which check failed
// goes to the access log only.
const (
	bodyUnauthorized = "unauthorized\n"
	bodyForbidden    = "forbidden\n"
	bodyNotFound     = "not found\n"
	bodyUnavailable  = "no ready backend; retry later\n"
	bodyBadGateway   = "bad gateway\n"
	bodyTimeout      = "the project did not answer in time\n"
	bodyBusy         = "too many requests in flight for this tenant; retry later\n"

	challenge        = `Bearer realm="kiln"`
	challengeInvalid = `Bearer realm="kiln", error="invalid_token"`
)

// reqInfo travels with one request through the proxy: where it goes and
// what the access log says about it.
type reqInfo struct {
	route  Route
	addr   string // backend HOST:PORT
	path   string // path after the /t/T/p/P prefix (path form)
	raw    string // the same, escaped, when it differs
	prefix string // the stripped prefix, "" for the host form
	tenant string // of the verified token
	reason string // why the request was refused or failed
}

type infoKey struct{}

// Handler is the proxy; without MetricsListen it also serves /healthz,
// /readyz and /metrics for requests that are not routed to a project.
func (g *Gateway) Handler() http.Handler {
	var admin http.Handler
	if g.cfg.MetricsListen == "" {
		admin = g.AdminHandler()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := &reqInfo{}
		routed, ok := g.route(r, info)
		if !routed && admin != nil && isAdminPath(r.URL.Path) {
			admin.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		defer func() { g.finish(rec, r, info, start) }()
		if !ok {
			info.reason = "no route"
			deny(rec, http.StatusNotFound, bodyNotFound)
			return
		}
		if no := g.admit([]byte(r.Header.Get("Authorization")), (*keySet).verifyBytes, g.backendAddr, info); no != nil {
			no.write(rec)
			return
		}
		release, ok := g.tenants.acquire(info.route.Tenant)
		if !ok {
			info.reason = "tenant over its concurrency limit"
			g.metrics.limited(info.route.Tenant)
			w.Header().Set("Retry-After", strconv.Itoa(RetryAfter))
			deny(rec, http.StatusServiceUnavailable, bodyBusy)
			return
		}
		defer release()
		g.proxy.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), infoKey{}, info)))
	})
}

// BackendHost is the fully qualified name the gateway dials for route r:
// P.kiln-tenant-T.svc.DOMAIN. with the root dot, so the resolver's search
// path never applies (a namespace named "svc" holding a Service named
// kiln-tenant-T would otherwise answer for P.kiln-tenant-T.svc).
func BackendHost(r Route, clusterDomain string) string {
	return r.Project + "." + TenantNamespace(r.Tenant) + ".svc." + clusterDomain + "."
}

// TenantNamespace is the namespace of tenant (DESIGN.md §5).
func TenantNamespace(tenant string) string { return "kiln-tenant-" + tenant }

func isAdminPath(p string) bool { return p == "/healthz" || p == "/readyz" || p == "/metrics" }

// route finds the project a request is for. routed: the request is in one
// of the two forms (Host under the domain, or a /t/ path); ok: it names a
// valid tenant and project.
func (g *Gateway) route(r *http.Request, info *reqInfo) (routed, ok bool) {
	return g.routeOf(r.Host, r.URL.Path, r.URL.RawPath, info)
}

// routeOf is route of a request's Host, path and escaped path (rawPath,
// "" when the path needs no escaping).
func (g *Gateway) routeOf(reqHost, path, rawPath string, info *reqInfo) (routed, ok bool) {
	host := strings.ToLower(reqHost)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(host, ".")
	if sub, found := strings.CutSuffix(host, "."+g.cfg.Domain); found {
		p, t, two := strings.Cut(sub, ".")
		if !two || !validName(p) || !validName(t) {
			return true, false
		}
		info.route = Route{Tenant: t, Project: p}
		info.path, info.raw = path, rawPath
		return true, true
	}
	rest, found := strings.CutPrefix(path, "/t/")
	if !found {
		return false, false
	}
	// t/T/p/P, then nothing or /rest.
	t, rest, ok1 := strings.Cut(rest, "/")
	pp, rest, ok2 := strings.Cut(rest, "/")
	p, tail, more := strings.Cut(rest, "/")
	if !ok1 || !ok2 || pp != "p" || !validName(t) || !validName(p) {
		return true, false
	}
	info.route = Route{Tenant: t, Project: p}
	// The prefix as sent: /t/T/p/P is path[:len] of its own length.
	info.prefix = path[:len("/t/")+len(t)+len("/p/")+len(p)]
	info.path = "/"
	if more {
		info.path = path[len(info.prefix):]
		if tail == "" {
			info.path = "/"
		}
	}
	// Names are DNS labels, so the prefix is the same escaped or not.
	if rawPath != "" {
		info.raw = strings.TrimPrefix(rawPath, info.prefix)
		if info.raw == "" {
			info.raw = "/"
		}
	}
	return true, true
}

// refusal is an answer the gateway gives itself (deny's), with at most
// one header of its own (WWW-Authenticate, Retry-After).
type refusal struct {
	code          int
	body          string
	header, value string
}

func (no *refusal) write(w http.ResponseWriter) {
	if no.header != "" {
		w.Header().Set(no.header, no.value)
	}
	deny(w, no.code, no.body)
}

// admit runs the checks of a routed request, in order, for both proxies:
// a bearer token (401 without a valid one, 503 while no keys are
// loaded), of the route's tenant (403), for a project with a backend
// (404). On success info has the tenant and the backend's address; a
// refusal leaves the reason in info. verify checks a token against a key
// set (the fast path remembers its connection's last one); addr gives a
// route's backend address, false for an unknown project.
func (g *Gateway) admit(auth []byte, verify func(*keySet, []byte) (string, error), addr func(Route) (string, bool), info *reqInfo) *refusal {
	scheme, token, _ := cutByte(auth, ' ')
	token = trimOWS(token)
	if !eqFold(scheme, "bearer") || len(token) == 0 {
		info.reason = "no bearer token"
		return &refusal{http.StatusUnauthorized, bodyUnauthorized, "WWW-Authenticate", challenge}
	}
	set := g.keys.current()
	if set == nil || len(set.keys) == 0 {
		info.reason = "no trusted keys loaded"
		return &refusal{http.StatusServiceUnavailable, bodyUnavailable, "Retry-After", strconv.Itoa(RetryAfter)}
	}
	tenant, err := verify(set, token)
	if err != nil {
		info.reason = err.Error() // names kid and claim, never token text
		return &refusal{http.StatusUnauthorized, bodyUnauthorized, "WWW-Authenticate", challengeInvalid}
	}
	info.tenant = tenant
	if tenant != info.route.Tenant {
		info.reason = "token of another tenant"
		return &refusal{code: http.StatusForbidden, body: bodyForbidden}
	}
	a, found := addr(info.route)
	if !found {
		info.reason = "unknown project"
		return &refusal{code: http.StatusNotFound, body: bodyNotFound}
	}
	info.addr = a
	return nil
}

// backendAddr is route's backend: from --backend when given (false for a
// project not listed), else the project's Service by cluster DNS.
func (g *Gateway) backendAddr(r Route) (string, bool) {
	if g.cfg.Backends != nil {
		a, found := g.cfg.Backends[r]
		return a, found
	}
	return net.JoinHostPort(BackendHost(r, g.cfg.ClusterDomain), strconv.Itoa(ProjectPort)), true
}

func deny(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}

func newProxy(cfg Config) http.Handler {
	dial := cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	tr := &http.Transport{
		// Never through an HTTP proxy from the environment: backends are
		// cluster-internal.
		Proxy:                 nil,
		DialContext:           dial,
		ResponseHeaderTimeout: cfg.BackendTimeout,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   128,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		// Pass the client's Accept-Encoding through as it is: without
		// this the Transport asks a backend for gzip on its own and
		// decompresses the answer, work no client asked for.
		DisableCompression: true,
	}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			info := pr.In.Context().Value(infoKey{}).(*reqInfo)
			pr.Out.URL.Path, pr.Out.URL.RawPath = info.path, info.raw
			pr.SetURL(&url.URL{Scheme: "http", Host: info.addr})
			// The proxy drops X-Forwarded-For/-Host/-Proto itself; a
			// client's other forwarding headers are dropped here, so a
			// backend trusts only what the gateway sets.
			for _, h := range clientForwarding {
				pr.Out.Header.Del(h)
			}
			pr.SetXForwarded()
			if info.prefix != "" {
				pr.Out.Header.Set("X-Forwarded-Prefix", info.prefix)
			}
			// The tenant token is the tenant's credential for the gateway,
			// not for the project: it goes no further.
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Set("X-Kiln-Tenant", info.tenant)
		},
		Transport:    tr,
		ErrorHandler: proxyError,
		// Without a pool the proxy allocates a 32 KiB copy buffer per request.
		BufferPool: &bufferPool{p: sync.Pool{New: func() any { return make([]byte, 32<<10) }}},
	}
}

// clientForwarding are forwarding headers a client may forge.
var clientForwarding = []string{"Forwarded", "X-Forwarded-Prefix", "X-Forwarded-Port", "X-Forwarded-Server", "X-Forwarded-Ssl", "X-Forwarded-Scheme", "X-Real-Ip", "X-Original-Forwarded-For", "X-Kiln-Tenant"}

type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte  { return b.p.Get().([]byte) }
func (b *bufferPool) Put(x []byte) { b.p.Put(x) }

// proxyError answers a failed backend request (backendFailure says how).
func proxyError(w http.ResponseWriter, r *http.Request, err error) {
	info, _ := r.Context().Value(infoKey{}).(*reqInfo)
	if errors.Is(err, context.Canceled) {
		// The client went away; nobody reads an answer.
		if info != nil {
			info.reason = "client went away"
		}
		w.WriteHeader(499)
		return
	}
	f := backendFailure(err)
	if info != nil {
		info.reason = f.reason
	}
	if f.retry {
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfter))
	}
	deny(w, f.code, f.body)
}

// failure is the answer to a request whose backend failed.
type failure struct {
	code   int
	body   string
	reason string // for the access log
	retry  bool   // with Retry-After
}

// backendFailure says how to answer a failed backend request: the
// project's Service name does not resolve → 404; no response headers
// within the backend timeout → 504; nothing accepts connections (a Service
// without ready endpoints refuses them) → 503 with Retry-After; else 502.
func backendFailure(err error) failure {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var netErr net.Error
	switch {
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return failure{http.StatusNotFound, bodyNotFound, "unknown project (no such Service)", false}
	case errors.As(err, &netErr) && netErr.Timeout() && !errors.As(err, &opErr) && !errors.As(err, &dnsErr):
		// The backend accepted the request and hangs.
		return failure{http.StatusGatewayTimeout, bodyTimeout, "backend timed out: " + err.Error(), false}
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.As(err, &opErr) && opErr.Op == "dial":
		return failure{http.StatusServiceUnavailable, bodyUnavailable, err.Error(), true}
	default:
		return failure{http.StatusBadGateway, bodyBadGateway, err.Error(), false}
	}
}

// finish writes the access log line and the metrics of one request.
func (g *Gateway) finish(rec *recorder, r *http.Request, info *reqInfo, start time.Time) {
	g.logRequest(start, r.Method, r.Host, r.URL.Path, rec.status(), rec.bytes, r.RemoteAddr, info)
}

// logRequest writes the access log line and the metrics of one request
// that started at start and answered code with bytes of body; it returns
// the time it ended.
func (g *Gateway) logRequest(start time.Time, method, host, path string, code int, bytes int64, remote string, info *reqInfo) time.Time {
	now := time.Now()
	d := now.Sub(start)
	g.metrics.request(info.tenant, code, d)
	// The line is encoded into a pooled buffer and handed to the log's
	// writer, which copies it: no system call and no allocation here.
	bp := lineBuffers.Get().(*[]byte)
	// path without the query: it is the caller's, and may hold anything.
	b := appendAccessLine((*bp)[:0], now, method, host, path, code, bytes, d, remote, info.route, info.tenant, info.reason)
	_, _ = g.logs.Write(b)
	if cap(b) <= 64<<10 {
		*bp = b
		lineBuffers.Put(bp)
	}
	return now
}

var lineBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// recorder notes the status and size of a response.
type recorder struct {
	http.ResponseWriter
	code  int
	bytes int64
}

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}

// Unwrap lets http.ResponseController (the proxy's flushes) reach the
// connection's writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Package gateway is `kiln gateway` (DESIGN.md §16): the platform's
// default gateway. It accepts a request only with a tenant token that
// verifies against the mounted kiln-auth keys, and routes it to the
// project Service of that tenant:
//
//	Host: P.T.DOMAIN        -> Service P in kiln-tenant-T
//	/t/T/p/P/rest           -> Service P in kiln-tenant-T, path /rest
//
// It needs no Kubernetes API access: keys come from the ConfigMap volume
// (reloaded when kubelet swaps it), backends from cluster DNS.
package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kilnctl/kiln/engine/config"
)

// Defaults of Config.
const (
	DefaultListen          = ":8080"
	DefaultReloadInterval  = time.Second
	DefaultShutdownTimeout = 10 * time.Second
	// DefaultMaxHeaderBytes bounds a request's headers: past it the
	// answer is 431 Request Header Fields Too Large (DESIGN.md §17).
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultBackendTimeout bounds the wait for a backend's response
	// headers: past it the answer is 504.
	DefaultBackendTimeout = 30 * time.Second
	// DefaultMaxConns bounds the connections the gateway holds open at
	// once; more wait in the listen backlog.
	DefaultMaxConns = 2048
	// DefaultTenantConcurrency bounds one tenant's requests in flight:
	// past it that tenant gets 503, and the others are not starved.
	DefaultTenantConcurrency = 256
	// DefaultClusterDomain is the cluster's DNS domain for backends.
	DefaultClusterDomain = "cluster.local"
	// ProjectPort is the port of a project's Service (engine/project).
	ProjectPort = 80
	// RetryAfter is the Retry-After (seconds) of a 503.
	RetryAfter = 5
)

// Route names a project of a tenant.
type Route struct{ Tenant, Project string }

func (r Route) String() string { return r.Tenant + "/" + r.Project }

// Config is one gateway.
type Config struct {
	// Listen is the address of the proxy (and, without MetricsListen, of
	// /healthz, /readyz and /metrics).
	Listen string
	// MetricsListen, when set, serves /healthz, /readyz and /metrics on a
	// separate address and not on Listen, so tenants reaching the gateway
	// Service cannot read other tenants' request counts.
	MetricsListen string
	// AuthDir holds keys.json (the mounted kiln-auth ConfigMap).
	AuthDir string
	// Cluster is NAME: tokens must have iss kiln:NAME.
	Cluster string
	// Domain is the cluster's domain: Host P.T.DOMAIN routes to T/P.
	Domain string
	// Backends, when not empty, replace cluster DNS: a route not in the map
	// is an unknown project.
	Backends map[Route]string
	// TLSCert and TLSKey, when set, make Listen serve HTTPS with this PEM
	// certificate (chain) and key, reloaded when the files change (the
	// mounted kubernetes.io/tls Secret of spec.gateway.tls).
	TLSCert, TLSKey string
	// ReloadInterval is how often keys.json (and the certificate) are
	// checked besides file events.
	ReloadInterval time.Duration
	// ShutdownTimeout bounds the drain of requests in flight on shutdown.
	ShutdownTimeout time.Duration
	// LogOutput receives the log — the access log, key reloads — as JSON
	// lines (default: standard error), written in batches by a goroutine of
	// its own so that no request waits for it (logBuffer); Run writes what
	// is pending before it returns.
	LogOutput io.Writer
	// LogBufferBytes bounds the log lines waiting for LogOutput (0:
	// DefaultLogBufferBytes); past it lines are dropped and counted.
	LogBufferBytes int
	// MaxHeaderBytes, BackendTimeout, MaxConns and TenantConcurrency are
	// the limits (0: the Default* values).
	MaxHeaderBytes    int
	BackendTimeout    time.Duration
	MaxConns          int
	TenantConcurrency int
	// ClusterDomain is the cluster's DNS domain: project P of tenant T is
	// dialled as P.kiln-tenant-T.svc.DOMAIN. — fully qualified, so no
	// search path can turn it into another name.
	ClusterDomain string
	// MetricsPublic serves /metrics on Listen to clients that are not on
	// loopback (without MetricsListen); otherwise only loopback may read it.
	MetricsPublic bool
	// NetHTTPOnly serves every request of Listen through net/http, the
	// fast path off (fast.go): the reference the fast path is tested and
	// measured against.
	NetHTTPOnly bool
	// NoEventLoop serves the fast path with a goroutine per connection
	// on Linux too, instead of its event loops (fast_loop_linux.go).
	NoEventLoop bool
	// Dial, when set, replaces the backend dialer (tests).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// validName: s is a DNS label as tenant and project names are
// (engine/config): lowercase letters, digits and '-', neither first nor
// last. By hand, not by regexp: it runs twice per request.
func validName(s string) bool {
	if s == "" || len(s) > config.MaxNameLength || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// ParseBackend parses a --backend value T/P=HOST:PORT.
func ParseBackend(s string) (Route, string, error) {
	route, addr, ok := strings.Cut(s, "=")
	t, p, ok2 := strings.Cut(route, "/")
	if !ok || !ok2 || !validName(t) || !validName(p) {
		return Route{}, "", fmt.Errorf("--backend %q: want TENANT/PROJECT=HOST:PORT with tenant and project names of lowercase letters, digits and '-'", s)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return Route{}, "", fmt.Errorf("--backend %q: the address must be HOST:PORT", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return Route{}, "", fmt.Errorf("--backend %q: port %q is not a port number", s, port)
	}
	return Route{t, p}, addr, nil
}

// Gateway serves one Config.
type Gateway struct {
	cfg     Config
	keys    *keyStore
	certs   *certStore // nil without TLS
	metrics *metrics
	proxy   http.Handler
	logs    *logBuffer
	log     *slog.Logger
	closing atomic.Bool
	tenants tenantLimit
}

// New checks cfg and builds the gateway. It reads no keys yet (Run does).
func New(cfg Config) (*Gateway, error) {
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.ReloadInterval <= 0 {
		cfg.ReloadInterval = DefaultReloadInterval
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if cfg.BackendTimeout <= 0 {
		cfg.BackendTimeout = DefaultBackendTimeout
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.TenantConcurrency <= 0 {
		cfg.TenantConcurrency = DefaultTenantConcurrency
	}
	cfg.ClusterDomain = strings.Trim(strings.ToLower(cfg.ClusterDomain), ".")
	if cfg.ClusterDomain == "" {
		cfg.ClusterDomain = DefaultClusterDomain
	}
	if cfg.LogOutput == nil {
		cfg.LogOutput = os.Stderr
	}
	if cfg.Cluster == "" || !validName(cfg.Cluster) {
		return nil, fmt.Errorf("--cluster %q: want the cluster NAME (lowercase letters, digits and '-')", cfg.Cluster)
	}
	cfg.Domain = strings.TrimSuffix(strings.ToLower(cfg.Domain), ".")
	if cfg.Domain == "" {
		return nil, errors.New("--domain: want the cluster's domain (kiln-config spec.domain)")
	}
	fi, err := os.Stat(cfg.AuthDir)
	if err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("--auth-dir %q: not a directory; mount the kiln-auth ConfigMap there (or point it at a directory holding %s)", cfg.AuthDir, KeysFile)
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return nil, errors.New("--tls-cert and --tls-key: give both (HTTPS) or neither (HTTP)")
	}
	m := newMetrics()
	logs := newLogBuffer(cfg.LogOutput, cfg.LogBufferBytes)
	m.logDropped = logs.Dropped
	log := slog.New(slog.NewJSONHandler(logs, nil))
	g := &Gateway{cfg: cfg, metrics: m, logs: logs, log: log, keys: newKeyStore(cfg.AuthDir, cfg.Cluster, cfg.ReloadInterval, log, m), tenants: tenantLimit{max: cfg.TenantConcurrency}}
	if cfg.TLSCert != "" {
		g.certs = newCertStore(cfg.TLSCert, cfg.TLSKey, cfg.ReloadInterval, log)
	}
	g.proxy = newProxy(cfg)
	return g, nil
}

// Logger is the gateway's log (JSON lines on Config.LogOutput).
func (g *Gateway) Logger() *slog.Logger { return g.log }

// Ready reports whether the gateway has keys to verify tokens with.
func (g *Gateway) Ready() bool {
	s := g.keys.current()
	return s != nil && len(s.keys) > 0 && !g.closing.Load() && !g.keys.broken.Load()
}

// Reload reads keys.json now. Run does it at start and on every change;
// a caller serving Handler without Run (a test) calls it itself, and never
// while Run runs (the loader's bookkeeping is not shared).
func (g *Gateway) Reload() { g.keys.load() }

// Run loads the keys, serves until ctx ends, then drains requests in
// flight for up to ShutdownTimeout. Listening failures are returned.
func (g *Gateway) Run(ctx context.Context) error {
	// Every line logged so far is written before Run returns.
	defer g.logs.Close()
	g.keys.load()
	if g.certs != nil {
		// Without a certificate there is nothing to serve: fail at start,
		// where the error is seen, rather than on every handshake.
		if err := g.certs.load(); err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
	}
	ln, err := net.Listen("tcp", g.cfg.Listen)
	if err != nil {
		return fmt.Errorf("gateway: listen on %s: %w", g.cfg.Listen, err)
	}
	ln = limitListener(ln, g.cfg.MaxConns)
	servers := []*http.Server{}
	lns := []net.Listener{ln}
	if g.cfg.MetricsListen != "" {
		mln, err := net.Listen("tcp", g.cfg.MetricsListen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("gateway: listen on %s: %w", g.cfg.MetricsListen, err)
		}
		lns = append(lns, mln)
		servers = append(servers, g.server(g.Handler()), g.server(g.AdminHandler()))
	} else {
		servers = append(servers, g.server(g.Handler()))
	}
	kctx, stopKeys := context.WithCancel(ctx)
	defer stopKeys()
	go g.keys.run(kctx)
	if g.certs != nil {
		go g.certs.run(kctx)
	}

	// Plain HTTP on Listen goes through the fast path, which hands what
	// it does not take to servers[0] (fast.go).
	var fast *fastServer
	if g.certs == nil && !g.cfg.NetHTTPOnly {
		fast = g.newFastServer(servers[0], ln.Addr())
	}
	errc := make(chan error, len(servers)+1)
	for i, s := range servers {
		if i == 0 && fast != nil {
			g.log.Info("listening", "addr", lns[i].Addr().String())
			go func() { errc <- fast.Serve(lns[i]) }()
			go func() { errc <- s.Serve(fast.hand) }()
			continue
		}
		if i == 0 && g.certs != nil {
			// HTTPS on Listen only: probes and metrics stay plain HTTP.
			s.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: g.certs.getCertificate}
			g.log.Info("listening", "addr", lns[i].Addr().String(), "tls", true)
			go func() { errc <- s.ServeTLS(lns[i], "", "") }()
			continue
		}
		g.log.Info("listening", "addr", lns[i].Addr().String())
		go func() { errc <- s.Serve(lns[i]) }()
	}
	select {
	case err := <-errc:
		if fast != nil {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			_ = fast.Shutdown(ctx)
		}
		for _, s := range servers {
			_ = s.Close()
		}
		return fmt.Errorf("gateway: serve: %w", err)
	case <-ctx.Done():
	}
	// Not ready from now on, so the Service stops sending new requests
	// while the ones in flight finish.
	g.closing.Store(true)
	g.log.Info("shutting down", "drain", g.cfg.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.ShutdownTimeout)
	defer cancel()
	var firstErr error
	if fast != nil {
		if err := fast.Shutdown(sctx); err != nil {
			firstErr = fmt.Errorf("gateway: shutdown: %w", err)
		}
	}
	for _, s := range servers {
		if err := s.Shutdown(sctx); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("gateway: shutdown: %w", err)
		}
	}
	return firstErr
}

func (g *Gateway) server(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    g.cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	}
}

// AdminHandler serves /healthz, /readyz and /metrics.
func (g *Gateway) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !g.Ready() {
			why := "no trusted keys loaded"
			if g.keys.broken.Load() {
				why = "keys.json cannot be read or parsed (see the log); the last keys read stay in force"
			}
			http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	metrics := http.Handler(g.metrics)
	if g.cfg.MetricsListen == "" && !g.cfg.MetricsPublic {
		// On the tenants' address, only this machine reads request counts.
		metrics = loopbackOnly(metrics)
	}
	mux.Handle("GET /metrics", metrics)
	return mux
}

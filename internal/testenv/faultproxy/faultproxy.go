// Package faultproxy is a TLS reverse proxy in front of a Kubernetes API
// server that fails a seeded, random share of the requests the way loaded
// API servers do: a 500, a 429 with Retry-After, a connection reset before
// the request is forwarded, a write that reached the server whose answer is
// lost, and a watch stream cut after 0.2–2 s. Tests and benchmarks point
// clients at it (Kubeconfig writes a kubeconfig for it) to prove that an
// operation completes, and ends where it would have, through such faults.
//
// It speaks HTTP/1.1 by default, so a reset is a real TCP reset; with HTTP2
// set, a reset is a reset of the request's stream. The client's own
// Authorization header is forwarded, so every user keeps its permissions.
package faultproxy

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Kind is one kind of injected fault.
type Kind string

const (
	// InternalError answers 500 with a Status, without forwarding.
	InternalError Kind = "500"
	// TooManyRequests answers 429 with Retry-After, without forwarding.
	TooManyRequests Kind = "429"
	// ResetBeforeRequest resets the connection without forwarding.
	ResetBeforeRequest Kind = "reset"
	// AnswerLost forwards the request, reads the server's whole answer and
	// then resets the connection: the write landed, the client never hears.
	AnswerLost Kind = "answer-lost"
	// WatchCut forwards a watch and cuts its stream after WatchCutMin to
	// WatchCutMax.
	WatchCut Kind = "watch-cut"
	// WatchGone answers a watch, without forwarding it, as the API server
	// answers one whose resourceVersion it no longer has: 200 and a
	// single ERROR event holding a 410 Expired Status, then the end of the
	// stream. At rate 1 every watch is refused so: a relist storm.
	WatchGone Kind = "watch-gone"
)

// Kinds is every fault kind, in a fixed order.
var Kinds = []Kind{InternalError, TooManyRequests, ResetBeforeRequest, AnswerLost, WatchCut, WatchGone}

// Uniform spreads a total fault rate over the kinds that apply to each
// request: 500, 429 and reset apply to all; answer-lost to every request but
// a watch, watch-cut only to watches. Either way a request meets a fault
// with probability rate.
func Uniform(rate float64) map[Kind]float64 {
	q := rate / 4
	return map[Kind]float64{InternalError: q, TooManyRequests: q, ResetBeforeRequest: q, AnswerLost: q, WatchCut: q}
}

// Mix spreads a total fault rate over every kind, watch-gone included:
// 500, 429 and reset rate/4 each on every request, answer-lost rate/4 on
// every request but a watch, watch-cut and watch-gone rate/8 each on
// watches. Either way a request meets a fault with probability rate.
func Mix(rate float64) map[Kind]float64 {
	q := rate / 4
	return map[Kind]float64{InternalError: q, TooManyRequests: q, ResetBeforeRequest: q, AnswerLost: q, WatchCut: q / 2, WatchGone: q / 2}
}

// Options configure a proxy.
type Options struct {
	// Upstream is the API server and how to reach it (its CA). Its
	// credentials are used only for requests that carry none.
	Upstream *rest.Config
	// Seed makes the sequence of decisions repeatable (given the same
	// sequence of requests).
	Seed uint64
	// Rates is the probability of each kind per request it applies to
	// (see Uniform). Empty: no faults (a counting proxy).
	Rates map[Kind]float64
	// RetryAfter is the Retry-After of a 429 (default 1 s).
	RetryAfter time.Duration
	// WatchCutMin and WatchCutMax bound when a cut watch is cut (default
	// 0.2 s and 2 s).
	WatchCutMin, WatchCutMax time.Duration
	// HTTP2 serves HTTP/2 as well as HTTP/1.1.
	HTTP2 bool
	// AtLeastOnce names kinds that a run must see: a kind the dice have
	// not injected yet is injected into the next request it applies to
	// that the dice leave unfaulted. A fixed Seed with few requests of a
	// kind (watches) can otherwise leave it out of a whole run.
	AtLeastOnce []Kind
	// Script, if set, decides the first requests in order ("" for none),
	// before Rates apply: for tests that need one fault at one point.
	Script []Kind
	// Observe, if set, sees every request before a fault is decided.
	Observe func(*http.Request)
	// Refuse, if set, answers 403 Forbidden to every request it returns
	// true for, without forwarding, before any other fault: for tests
	// that need one kind of request to fail for as long as they say.
	Refuse func(*http.Request) bool
	// Expire, if set, answers 410 Gone (reason Expired, as the API server
	// answers a LIST whose continue token names a compacted
	// resourceVersion) to every request it returns true for, without
	// forwarding, after Refuse.
	Expire func(*http.Request) bool
	// Latency delays every request before it is forwarded or answered (a
	// slow control plane); SetLatency changes it.
	Latency time.Duration
}

// Proxy is a running fault-injecting proxy.
type Proxy struct {
	// URL is the proxy's https address.
	URL string

	opts    Options
	srv     *httptest.Server
	rp      *httputil.ReverseProxy
	mu      sync.Mutex
	rng     *rand.Rand
	rates   map[Kind]float64
	counts  map[Kind]int
	total   int
	latency time.Duration
}

// Start starts a proxy in front of opts.Upstream.
func Start(opts Options) (*Proxy, error) {
	if opts.Upstream == nil {
		return nil, errors.New("faultproxy: no upstream")
	}
	target, err := url.Parse(opts.Upstream.Host)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: upstream %q: %w", opts.Upstream.Host, err)
	}
	// The client's Accept-Encoding goes to the API server as it is, and
	// the answer comes back as the server sent it: a Transport that
	// compressed on its own would have the server gzip answers for a
	// client that asked for none (and unzip them here), so a client's
	// choice (kiln turns compression off on loopback) would not be what
	// the server sees.
	up := rest.CopyConfig(opts.Upstream)
	up.DisableCompression = true
	transport, err := rest.TransportFor(up)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: upstream transport: %w", err)
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = time.Second
	}
	if opts.WatchCutMin <= 0 {
		opts.WatchCutMin = 200 * time.Millisecond
	}
	if opts.WatchCutMax < opts.WatchCutMin {
		opts.WatchCutMax = max(2*time.Second, opts.WatchCutMin)
	}
	p := &Proxy{
		opts:    opts,
		rng:     newRand(opts.Seed),
		rates:   maps.Clone(opts.Rates),
		counts:  map[Kind]int{},
		latency: opts.Latency,
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target); r.Out.Host = target.Host },
		Transport:     transport,
		FlushInterval: -1,                         // watches stream event by event
		ErrorLog:      log.New(io.Discard, "", 0), // cut watches are the point, not news
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				// The client went away, or a watch cut fired before the
				// answer began: end the exchange without one.
				panic(http.ErrAbortHandler)
			}
			writeStatus(w, http.StatusBadGateway, "ServiceUnavailable", "fault proxy: "+err.Error())
		},
	}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	p.srv.EnableHTTP2 = opts.HTTP2
	p.srv.Config.ErrorLog = nil
	p.srv.StartTLS()
	p.URL = p.srv.URL
	return p, nil
}

// Close stops the proxy and drops its connections.
func (p *Proxy) Close() {
	p.srv.CloseClientConnections()
	p.srv.Close()
}

// SetRates changes the fault rates from now on (nil: no faults).
func (p *Proxy) SetRates(rates map[Kind]float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rates = maps.Clone(rates)
}

// SetLatency changes the delay of every request from now on.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = d
}

// Counts returns how many faults of each kind were injected.
func (p *Proxy) Counts() map[Kind]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.counts)
}

// Injected is the number of faults injected so far.
func (p *Proxy) Injected() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.counts {
		n += c
	}
	return n
}

// Requests is the number of requests the proxy has seen.
func (p *Proxy) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

// String summarizes requests and faults, e.g. "412 requests, 41 faults
// (500 ×9, 429 ×12, reset ×8, answer-lost ×7, watch-cut ×5)".
func (p *Proxy) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var parts []string
	n := 0
	for _, k := range Kinds {
		n += p.counts[k]
		parts = append(parts, fmt.Sprintf("%s ×%d", k, p.counts[k]))
	}
	return fmt.Sprintf("%d requests, %d faults (%s)", p.total, n, strings.Join(parts, ", "))
}

// CAData is the PEM certificate clients verify the proxy with.
func (p *Proxy) CAData() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
}

// Kubeconfig writes a kubeconfig at path whose context contextName reaches
// the API server through the proxy as the upstream's user.
func (p *Proxy) Kubeconfig(path, contextName string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[contextName] = &clientcmdapi.Cluster{Server: p.URL, CertificateAuthorityData: p.CAData()}
	cfg.AuthInfos[contextName] = &clientcmdapi.AuthInfo{
		Token:                 p.opts.Upstream.BearerToken,
		ClientCertificateData: p.opts.Upstream.CertData,
		ClientKeyData:         p.opts.Upstream.KeyData,
	}
	cfg.Contexts[contextName] = &clientcmdapi.Context{Cluster: contextName, AuthInfo: contextName}
	cfg.CurrentContext = contextName
	return clientcmd.WriteToFile(*cfg, path)
}

// RESTConfig is a client config that reaches the API server through the
// proxy as the upstream's user.
func (p *Proxy) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:            p.URL,
		BearerToken:     p.opts.Upstream.BearerToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: p.CAData(), CertData: p.opts.Upstream.CertData, KeyData: p.opts.Upstream.KeyData},
	}
}

func isWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return r.Method == http.MethodGet && (w == "true" || w == "1")
}

// decide draws the fault, if any, for one request.
func (p *Proxy) decide(r *http.Request) (Kind, time.Duration) {
	watch := isWatch(r)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total++
	if len(p.opts.Script) > 0 {
		k := p.opts.Script[0]
		p.opts.Script = p.opts.Script[1:]
		if k == "" {
			return "", 0
		}
		p.counts[k]++
		return k, p.opts.WatchCutMin
	}
	u := p.rng.Float64()
	for _, k := range Kinds {
		if !applies(k, watch) {
			continue
		}
		rate := p.rates[k]
		if u < rate {
			p.counts[k]++
			var cut time.Duration
			if k == WatchCut {
				cut = p.opts.WatchCutMin + time.Duration(p.rng.Int64N(int64(p.opts.WatchCutMax-p.opts.WatchCutMin)+1))
			}
			return k, cut
		}
		u -= rate
	}
	for _, k := range p.opts.AtLeastOnce {
		if p.counts[k] == 0 && applies(k, watch) {
			p.counts[k]++
			return k, p.opts.WatchCutMin
		}
	}
	return "", 0
}

// applies says whether a fault of kind k can answer a request: the watch
// faults only a watch, a lost answer only a request that is not one.
func applies(k Kind, watch bool) bool {
	if watch {
		return k != AnswerLost
	}
	return k != WatchCut && k != WatchGone
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	if p.opts.Observe != nil {
		p.opts.Observe(r)
	}
	p.mu.Lock()
	delay := p.latency
	p.mu.Unlock()
	if delay > 0 {
		select {
		case <-r.Context().Done():
			panic(http.ErrAbortHandler)
		case <-time.After(delay):
		}
	}
	if p.opts.Refuse != nil && p.opts.Refuse(r) {
		writeStatus(w, http.StatusForbidden, "Forbidden", "injected fault: refused by the test")
		return
	}
	if p.opts.Expire != nil && p.opts.Expire(r) {
		writeStatus(w, http.StatusGone, "Expired", "injected fault: The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
		return
	}
	kind, cut := p.decide(r)
	switch kind {
	case InternalError:
		writeStatus(w, http.StatusInternalServerError, "InternalError", "injected fault: etcdserver: leader changed")
	case TooManyRequests:
		w.Header().Set("Retry-After", strconv.Itoa(int((p.opts.RetryAfter+time.Second-1)/time.Second)))
		writeStatus(w, http.StatusTooManyRequests, "TooManyRequests", "injected fault: too many requests, please try again later")
	case ResetBeforeRequest:
		reset(w)
	case AnswerLost:
		p.rp.ServeHTTP(&discard{h: http.Header{}}, r)
		reset(w)
	case WatchGone:
		ev, _ := json.Marshal(map[string]any{"type": "ERROR", "object": map[string]any{
			"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
			"status": "Failure", "reason": "Expired", "code": http.StatusGone,
			"message": "injected fault: too old resource version",
		}})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(append(ev, '\n'))
	case WatchCut:
		// The clock starts once the answer's headers are on their way to
		// the client: a cut then always ends an open stream, however slow
		// the upstream was to answer (a reset before any answer is the
		// reset fault's job).
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		cw := &cutWriter{ResponseWriter: w, cut: cut, cancel: cancel}
		defer cw.stop()
		p.rp.ServeHTTP(cw, r.WithContext(ctx))
		// The stream ended; if the server ended it, it ended cleanly, else
		// the copy error has already aborted the connection.
	default:
		p.rp.ServeHTTP(w, r)
	}
}

// reset drops the client's connection: a TCP reset on HTTP/1.1, a stream
// reset on HTTP/2.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	raw := conn
	if tc, ok := conn.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	if tcp, ok := raw.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0) // close with RST, as a crashed or overloaded peer does
	}
	_ = raw.Close()
}

// writeStatus writes a metav1.Status answer, as the API server does.
func writeStatus(w http.ResponseWriter, code int, reason, msg string) {
	body, _ := json.Marshal(map[string]any{
		"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "message": msg, "reason": reason, "code": code,
	})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// cutWriter passes an answer through and, once its headers are flushed to
// the client, cancels the upstream request after cut.
type cutWriter struct {
	http.ResponseWriter
	cut    time.Duration
	cancel context.CancelFunc
	timer  *time.Timer
}

func (c *cutWriter) WriteHeader(code int) {
	c.ResponseWriter.WriteHeader(code)
	_ = http.NewResponseController(c.ResponseWriter).Flush()
	if c.timer == nil {
		c.timer = time.AfterFunc(c.cut, c.cancel)
	}
}

func (c *cutWriter) Write(b []byte) (int, error) {
	if c.timer == nil {
		c.WriteHeader(http.StatusOK)
	}
	return c.ResponseWriter.Write(b)
}

func (c *cutWriter) stop() {
	if c.timer != nil {
		c.timer.Stop()
	}
}

// Unwrap lets http.ResponseController (the reverse proxy's flushes) reach
// the connection's own writer.
func (c *cutWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// discard is a ResponseWriter that forgets the answer.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}
func (d *discard) Flush()                      {}

func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

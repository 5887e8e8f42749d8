package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnctl/kiln/internal/gateway"
)

// The fast path (fast.go) is checked against net/http, the reference:
// every request below goes, as raw bytes, through a gateway with the fast
// path and through one with --net-http-only, both in front of the same
// backend; what the backend received (parsed by net/http's
// http.ReadRequest) and what the client got back (parsed by
// http.ReadResponse, the parser Go's own client uses) must be the same.
// The requests include the shapes the fast path hands to net/http, bad
// and smuggling-shaped heads, and pipelines that mix both.

// rawBackend answers by the request's path with canned bytes (some of
// which net/http's server cannot be made to send), recording every request
// it parsed.
type rawBackend struct {
	ln   net.Listener
	mu   sync.Mutex
	seen []backendSeen
}

type backendSeen struct {
	Method, URI, Host, Proto string
	Header                   http.Header
	Body                     string
	ContentLength            int64
}

const hangPath = "/hang"

func newRawBackend(t *testing.T) *rawBackend {
	b := &rawBackend{}
	b.ln = b.listen(t, 0)
	return b
}

// listen serves b on another address too, writing each answer trickle
// bytes at a time (all at once when 0), so the gateway reads response
// heads and bodies in parts.
func (b *rawBackend) listen(t *testing.T, trickle int) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if trickle > 0 {
				c = &tricklingConn{Conn: c, n: trickle}
			}
			go b.serve(t.Context(), c)
		}
	}()
	return ln
}

// tricklingConn writes n bytes at a time, pausing between them.
type tricklingConn struct {
	net.Conn
	n int
}

func (c *tricklingConn) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		k := min(c.n, len(p)-done)
		if _, err := c.Conn.Write(p[done : done+k]); err != nil {
			return done, err
		}
		if done += k; done < len(p) && done < 2000 {
			time.Sleep(100 * time.Microsecond) // the rest of a large body at once
		}
	}
	return done, nil
}

func (b *rawBackend) take() []backendSeen {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.seen
	b.seen = nil
	return s
}

func (b *rawBackend) serve(ctx context.Context, c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, _ := io.ReadAll(req.Body)
		h := req.Header.Clone()
		h.Del("Content-Length") // framing: ContentLength says it
		b.mu.Lock()
		b.seen = append(b.seen, backendSeen{req.Method, req.RequestURI, req.Host, req.Proto, h, string(body), req.ContentLength})
		b.mu.Unlock()
		path := req.URL.Path
		var out string
		closeAfter := false
		switch {
		case strings.HasSuffix(path, "/chunked"):
			out = "HTTP/1.1 200 OK\r\nTrailer: X-Sum\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\nX-A: 1\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Sum: 11\r\n\r\n"
		case strings.HasSuffix(path, "/chunkedstray"):
			// A chunked answer longer than a read buffer, then bytes
			// nobody asked for (a whole fake answer) in the same write:
			// the connection must not serve the next request.
			chunk := strings.Repeat("c", 6000)
			out = fmt.Sprintf("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(chunk), chunk) +
				"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nstray"
		case strings.HasSuffix(path, "/close"):
			out, closeAfter = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-B: 2\r\n\r\nthe body ends with the connection", true
		case strings.HasSuffix(path, "/http10"):
			out, closeAfter = "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\nold!", true
		case strings.HasSuffix(path, "/hop"):
			out = "HTTP/1.1 200 OK\r\nConnection: X-Secret, keep-alive\r\nX-Secret: s\r\nKeep-Alive: timeout=5\r\nProxy-Authenticate: Basic\r\nUpgrade: h2c\r\nX-Keep: k\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"
		case strings.HasSuffix(path, "/204"):
			out = "HTTP/1.1 204 No Content\r\nX-C: 3\r\n\r\n"
		case strings.HasSuffix(path, "/304"):
			out = "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n"
		case strings.HasSuffix(path, "/103"):
			out = "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nfinal"
		case strings.HasSuffix(path, "/bad"):
			out, closeAfter = "HTTP/1.1 200 OK\r\nBad Header: x\r\n\r\n", true
		case strings.HasSuffix(path, "/2cl"):
			out, closeAfter = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", true
		case strings.HasSuffix(path, "/big"):
			body := strings.Repeat("0123456789", 10000)
			out = fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		case path == hangPath:
			<-ctx.Done()
			return
		default:
			msg := "echo " + req.Method + " " + req.RequestURI + " " + string(body)
			out = fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\nContent-Length: %d\r\n\r\n", len(msg))
			if req.Method != http.MethodHead {
				out += msg
			}
		}
		if _, err := io.WriteString(c, out); err != nil || closeAfter {
			return
		}
	}
}

// answer is what a client parsed from the gateway.
type answer struct {
	Interim []int // 1xx codes before the final answer
	Code    int
	Header  http.Header
	Body    string
	Trailer http.Header
	Err     string // the response could not be read (connection closed)
}

// exchangeRaw writes raw to addr in one write and reads one answer per
// method in methods (HEAD answers carry no body).
func exchangeRaw(t *testing.T, addr, raw string, methods ...string) []answer {
	a, _ := exchangeRawTrickled(t, addr, raw, 0, methods...)
	return a
}

// exchangeRawTrickled is exchangeRaw writing raw in pieces of trickle
// bytes (all at once when 0) with a pause between them, so the gateway
// reads heads in parts; closing says an answer closed the connection.
func exchangeRawTrickled(t *testing.T, addr, raw string, trickle int, methods ...string) (out []answer, closing bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	for rest := raw; len(rest) > 0; {
		n := len(rest)
		if trickle > 0 && n > trickle {
			n = trickle
		}
		if _, err := io.WriteString(c, rest[:n]); err != nil {
			if trickle > 0 {
				break // answered and closed before the rest (a 400): read what came
			}
			t.Fatal(err)
		}
		if rest = rest[n:]; len(rest) > 0 {
			time.Sleep(200 * time.Microsecond)
		}
	}
	br := bufio.NewReader(c)
	for _, m := range methods {
		var a answer
		for {
			resp, err := http.ReadResponse(br, &http.Request{Method: m})
			if err != nil {
				a.Err = "no answer"
				break
			}
			if resp.StatusCode >= 100 && resp.StatusCode < 200 {
				a.Interim = append(a.Interim, resp.StatusCode)
				continue
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				a.Err = "body cut: " + err.Error()
			}
			closing = closing || resp.Close
			h := resp.Header.Clone()
			// Framing and the clock: not what the comparison is about.
			for _, k := range []string{"Date", "Content-Length", "Transfer-Encoding", "Connection"} {
				h.Del(k)
			}
			a.Code, a.Header, a.Body, a.Trailer = resp.StatusCode, h, string(body), resp.Trailer
			break
		}
		out = append(out, a)
		if a.Err != "" {
			break
		}
	}
	if closing && len(out) > 0 && out[len(out)-1].Err == "" {
		// An answer said Connection: close: the connection must close
		// after it (EOF, or a reset for bytes sent after the request),
		// with nothing more on it.
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var one [1]byte
		if n, err := br.Read(one[:]); n > 0 || err == nil || timedOut(err) {
			out = append(out, answer{Err: fmt.Sprintf("said Connection: close, then the connection stayed open (read %d bytes, %v)", n, err)})
		}
	}
	return out, closing
}

func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// startInProcess runs a gateway in this process and returns its address.
func startInProcess(t *testing.T, cfg gateway.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = ln.Addr().String()
	_ = ln.Close()
	var logs bytes.Buffer
	cfg.LogOutput = &lockedWriter{w: &logs}
	g, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway Run: %v", err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", cfg.Listen)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway not listening on %s", cfg.Listen)
		}
		time.Sleep(10 * time.Millisecond)
	}
	deadline = time.Now().Add(10 * time.Second)
	for !g.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("gateway never ready (keys not loaded)")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cfg.Listen
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestFastPathMatchesNetHTTP(t *testing.T) {
	key := newKey(t)
	auth := newAuthDir(t, key)
	be := newRawBackend(t)
	slow := be.listen(t, 7)
	tok := key.token(t, "bench", "default")
	other := key.token(t, "bench", "other")
	base := gateway.Config{
		AuthDir: auth.path, Cluster: "bench", Domain: "bench.kiln.test",
		Backends: map[gateway.Route]string{
			{Tenant: "default", Project: "web"}:   be.ln.Addr().String(),
			{Tenant: "default", Project: "slow"}:  slow.Addr().String(), // answers 7 bytes at a time
			{Tenant: "other", Project: "web"}:     be.ln.Addr().String(),
			{Tenant: "default", Project: "stuck"}: "127.0.0.1:1", // refuses
		},
		BackendTimeout: 500 * time.Millisecond,
		MaxHeaderBytes: 4096,
	}
	fastCfg, goCfg, stdCfg := base, base, base
	goCfg.NoEventLoop = true
	stdCfg.NetHTTPOnly = true
	fast, goFast, std := startInProcess(t, fastCfg), startInProcess(t, goCfg), startInProcess(t, stdCfg)
	// The fast path as Linux serves it (its event loops, handing over to
	// goroutines what they do not copy), as it is served elsewhere or with
	// --no-event-loop (a goroutine per connection), and the event loop
	// again with every request written a few bytes at a time, and (short
	// ones) a byte at a time.
	paths := []struct {
		name    string
		addr    string
		trickle int
	}{{"fast path", fast, 0}, {"goroutine fast path", goFast, 0}, {"fast path, trickled", fast, 13}, {"fast path, byte by byte", fast, 1}}

	bearer := "Authorization: Bearer " + tok + "\r\n"
	get := func(target string, extra ...string) string {
		return "GET " + target + " HTTP/1.1\r\nHost: gw.example\r\n" + bearer + strings.Join(extra, "") + "\r\n"
	}
	// fast502: the one intended difference. A backend's answer with a
	// malformed header line is a 502 on the fast path; net/http drops
	// the line and passes the rest on.
	fast502 := map[string]bool{"malformed answer": true}
	cases := []struct {
		name    string
		raw     string
		methods []string
	}{
		{"path form with query and forwarding headers a client forged", get("/t/default/p/web/a/b?q=1&r=%20x",
			"User-Agent: tester\r\nX-Custom: one\r\nx-custom: two\r\nX-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Host: evil\r\nX-Forwarded-Proto: https\r\nForwarded: for=6.6.6.6\r\nX-Real-Ip: 6.6.6.6\r\nX-Kiln-Tenant: other\r\nX-Forwarded-Prefix: /x\r\nKeep-Alive: 300\r\nProxy-Authorization: Basic eA==\r\nProxy-Connection: keep-alive\r\n"), nil},
		{"path form, bare prefix", get("/t/default/p/web"), nil},
		{"path form, empty query", get("/t/default/p/web/x?"), nil},
		{"host form", "GET /p?x=1 HTTP/1.1\r\nHost: web.default.bench.kiln.test:8080\r\n" + bearer + "\r\n", nil},
		{"host form, upper case", "GET / HTTP/1.1\r\nHost: WEB.Default.bench.kiln.test.\r\n" + bearer + "\r\n", nil},
		{"POST with a body", "POST /t/default/p/web/form HTTP/1.1\r\nHost: gw\r\n" + bearer + "Content-Type: text/plain\r\nContent-Length: 11\r\n\r\nhello world", nil},
		{"PUT with an empty body", "PUT /t/default/p/web/x HTTP/1.1\r\nHost: gw\r\n" + bearer + "Content-Length: 0\r\n\r\n", nil},
		{"HEAD", "HEAD /t/default/p/web/ HTTP/1.1\r\nHost: gw\r\n" + bearer + "\r\n", []string{"HEAD"}},
		{"chunked answer with extension and trailer", get("/t/default/p/web/chunked"), nil},
		{"answer ended by close", get("/t/default/p/web/close"), nil},
		{"HTTP/1.0 answer", get("/t/default/p/web/http10"), nil},
		{"hop-by-hop headers in the answer", get("/t/default/p/web/hop"), nil},
		{"204", get("/t/default/p/web/204"), nil},
		{"304", get("/t/default/p/web/304"), nil},
		{"103 then 200", get("/t/default/p/web/103"), nil},
		{"malformed answer", get("/t/default/p/web/bad"), nil},
		{"two Content-Lengths in the answer", get("/t/default/p/web/2cl"), nil},
		{"large answer", get("/t/default/p/web/big"), nil},
		{"backend hangs", get(hangPath[0:0] + "/t/default/p/web" + hangPath), nil},
		{"backend refuses", get("/t/default/p/stuck/"), nil},
		{"no token", "GET /t/default/p/web/ HTTP/1.1\r\nHost: gw\r\n\r\n", nil},
		{"not a bearer token", "GET /t/default/p/web/ HTTP/1.1\r\nHost: gw\r\nAuthorization: Basic dTpw\r\n\r\n", nil},
		{"bad token", "GET /t/default/p/web/ HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer abc.def.ghi\r\n\r\n", nil},
		{"bad token on HEAD", "HEAD /t/default/p/web/ HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer abc.def.ghi\r\n\r\n", []string{"HEAD"}},
		{"another tenant's token", "GET /t/default/p/web/ HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + other + "\r\n\r\n", nil},
		{"unknown project", get("/t/default/p/nope/"), nil},
		{"denied POST with a body, then a request", "POST /t/default/p/web/ HTTP/1.1\r\nHost: gw\r\nContent-Length: 3\r\n\r\nabc" + get("/t/default/p/web/after"), []string{"POST", "GET"}},
		{"not routed", get("/elsewhere"), nil},
		{"bad names", get("/t/Default/p/web/"), nil},
		{"probe path", get("/healthz"), nil},
		// Shapes the fast path hands to net/http.
		{"HTTP/1.0 request", "GET /t/default/p/web/ HTTP/1.0\r\nHost: gw\r\n" + bearer + "\r\n", nil},
		{"escaped path", get("/t/default/p/web/a%2Fb%20c"), nil},
		{"path net/url would escape", get("/t/default/p/web/a!b'c*d(e)"), nil},
		{"query with a semicolon", get("/t/default/p/web/?a=1;b=2"), nil},
		{"query with a bad escape", get("/t/default/p/web/?a=%zz"), nil},
		{"chunked upload", "POST /t/default/p/web/up HTTP/1.1\r\nHost: gw\r\n" + bearer + "Transfer-Encoding: chunked\r\n\r\n4\r\nwiki\r\n0\r\n\r\n", nil},
		{"Expect 100-continue", "POST /t/default/p/web/up HTTP/1.1\r\nHost: gw\r\n" + bearer + "Expect: 100-continue\r\nContent-Length: 2\r\n\r\nhi", nil},
		{"TE: trailers", get("/t/default/p/web/", "TE: trailers\r\n"), nil},
		{"OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: gw\r\n" + bearer + "\r\n", nil},
		{"absolute form", "GET http://gw/t/default/p/web/ HTTP/1.1\r\nHost: gw\r\n" + bearer + "\r\n", nil},
		{"unknown method", "PURGE /t/default/p/web/ HTTP/1.1\r\nHost: gw\r\n" + bearer + "\r\n", nil},
		{"no Host", "GET /t/default/p/web/ HTTP/1.1\r\n" + bearer + "\r\n", nil},
		{"two Hosts", get("/t/default/p/web/", "Host: other\r\n"), nil},
		{"two Authorizations", get("/t/default/p/web/", "Authorization: Bearer x\r\n"), nil},
		{"headers over the limit", get("/t/default/p/web/", "X-Big: "+strings.Repeat("a", 5000)+"\r\n"), nil},
		{"a line longer than the read buffer", get("/t/default/p/web/", "X-Long: "+strings.Repeat("b", 3500)+"\r\n"), nil},
		{"leading empty line", "\r\n" + get("/t/default/p/web/"), nil},
		// Smuggling shapes: each must reach the backend as net/http
		// parses it, or not at all.
		{"Content-Length and Transfer-Encoding", "POST /t/default/p/web/ HTTP/1.1\r\nHost: gw\r\n" + bearer + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + get("/t/default/p/web/smuggled"), []string{"POST", "GET"}},
		{"two different Content-Lengths", "POST /t/default/p/web/ HTTP/1.1\r\nHost: gw\r\n" + bearer + "Content-Length: 3\r\nContent-Length: 30\r\n\r\nabc" + get("/t/default/p/web/smuggled"), []string{"POST", "GET"}},
		{"two equal Content-Lengths", "POST /t/default/p/web/ HTTP/1.1\r\nHost: gw\r\n" + bearer + "Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc" + get("/t/default/p/web/after"), []string{"POST", "GET"}},
		{"signed Content-Length", "POST /t/default/p/web/ HTTP/1.1\r\nHost: gw\r\n" + bearer + "Content-Length: +3\r\n\r\nabc", nil},
		{"space before the colon", "POST /t/default/p/web/ HTTP/1.1\r\nHost: gw\r\n" + bearer + "Content-Length : 3\r\n\r\nabc", nil},
		{"folded header", get("/t/default/p/web/", "X-Fold: a\r\n b\r\n"), nil},
		{"bare LF lines", "GET /t/default/p/web/ HTTP/1.1\nHost: gw\n" + strings.TrimSuffix(bearer, "\r\n") + "\n\n", nil},
		{"control character in a value", get("/t/default/p/web/", "X-Ctl: a\x01b\r\n"), nil},
		{"Transfer-Encoding identity", "POST /t/default/p/web/ HTTP/1.1\r\nHost: gw\r\n" + bearer + "Transfer-Encoding: identity\r\nContent-Length: 3\r\n\r\nabc", nil},
		// Pipelines: the fast path, then a request it hands off (the
		// connection goes to net/http with the bytes read so far).
		{"pipeline of fast requests", get("/t/default/p/web/1") + get("/t/default/p/web/2") + "HEAD /t/default/p/web/3 HTTP/1.1\r\nHost: gw\r\n" + bearer + "\r\n" + get("/t/default/p/web/4"), []string{"GET", "GET", "HEAD", "GET"}},
		{"pipeline handed off midway", get("/t/default/p/web/1") + get("/t/default/p/web/a%2Fb") + get("/t/default/p/web/3"), []string{"GET", "GET", "GET"}},
		// Pipelines that leave the event loop midway: an answer it hands
		// over with the request in progress, then more requests.
		{"pipeline after a chunked answer", get("/t/default/p/web/chunked") + get("/t/default/p/web/2"), []string{"GET", "GET"}},
		{"pipeline after a chunked answer with stray bytes", get("/t/default/p/web/chunkedstray") + get("/t/default/p/web/2"), []string{"GET", "GET"}},
		{"pipeline after an interim answer", get("/t/default/p/web/103") + get("/t/default/p/web/2"), []string{"GET", "GET"}},
		{"pipeline after a refusal", "GET /t/default/p/web/ HTTP/1.1\r\nHost: gw\r\n\r\n" + get("/t/default/p/web/2") + get("/t/default/p/web/big"), []string{"GET", "GET", "GET"}},
		{"pipeline after a failed backend", get("/t/default/p/stuck/") + get("/t/default/p/web/2"), []string{"GET", "GET"}},
		// Connection: close (and keep-alive) from the client: the fast
		// path answers with Connection: close and closes, whatever the
		// answer; other tokens go to net/http.
		{"Connection: close", get("/t/default/p/web/", "Connection: close\r\n"), nil},
		{"Connection: keep-alive", get("/t/default/p/web/", "Connection: keep-alive\r\n") + get("/t/default/p/web/2"), []string{"GET", "GET"}},
		{"Connection: Keep-Alive, CLOSE", get("/t/default/p/web/", "Connection:  Keep-Alive ,, CLOSE \r\n"), nil},
		{"two Connection lines", get("/t/default/p/web/", "Connection: keep-alive\r\nX-Custom: 1\r\nConnection: close\r\n"), nil},
		{"Connection naming a header", get("/t/default/p/web/", "Connection: x-drop\r\nX-Drop: 1\r\nX-Keep: 2\r\n"), nil},
		{"Connection: close naming a header", get("/t/default/p/web/", "Connection: close, x-drop\r\nX-Drop: 1\r\n"), nil},
		{"Connection: upgrade", get("/t/default/p/web/", "Connection: upgrade\r\n"), nil},
		{"Connection: close, then a request", get("/t/default/p/web/1", "Connection: close\r\n") + get("/t/default/p/web/2"), []string{"GET", "GET"}},
		{"Connection: close on a pipeline's second request", get("/t/default/p/web/1") + get("/t/default/p/web/2", "Connection: close\r\n") + get("/t/default/p/web/3"), []string{"GET", "GET", "GET"}},
		{"Connection: close, HEAD", "HEAD /t/default/p/web/ HTTP/1.1\r\nHost: gw\r\n" + bearer + "Connection: close\r\n\r\n", []string{"HEAD"}},
		{"Connection: close, no token", "GET /t/default/p/web/ HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n", nil},
		{"Connection: close, denied POST with a body", "POST /t/default/p/web/ HTTP/1.1\r\nHost: gw\r\nConnection: close\r\nContent-Length: 3\r\n\r\nabc", nil},
		{"Connection: close, POST with a body", "POST /t/default/p/web/form HTTP/1.1\r\nHost: gw\r\n" + bearer + "Connection: close\r\nContent-Length: 11\r\n\r\nhello world", nil},
		{"Connection: close, chunked answer", get("/t/default/p/web/chunked", "Connection: close\r\n"), nil},
		{"Connection: close, answer ended by close", get("/t/default/p/web/close", "Connection: close\r\n"), nil},
		{"Connection: close, 204", get("/t/default/p/web/204", "Connection: close\r\n"), nil},
		{"Connection: close, 103 then 200", get("/t/default/p/web/103", "Connection: close\r\n"), nil},
		{"Connection: close, large answer", get("/t/default/p/web/big", "Connection: close\r\n"), nil},
		{"Connection: close, backend refuses", get("/t/default/p/stuck/", "Connection: close\r\n"), nil},
		{"Connection: close, slow backend", get("/t/default/p/slow/x", "Connection: close\r\n"), nil},
		{"Connection: close, slow backend, large answer", get("/t/default/p/slow/big", "Connection: close\r\n"), nil},
		// A backend whose answers arrive a few bytes at a time: heads and
		// bodies read in parts.
		{"slow backend", get("/t/default/p/slow/x"), nil},
		{"slow backend, HEAD", "HEAD /t/default/p/slow/ HTTP/1.1\r\nHost: gw\r\n" + bearer + "\r\n", []string{"HEAD"}},
		{"slow backend, large answer", get("/t/default/p/slow/big"), nil},
		{"slow backend, chunked answer", get("/t/default/p/slow/chunked"), nil},
		{"slow backend, 103 then 200", get("/t/default/p/slow/103"), nil},
		{"slow backend, 204", get("/t/default/p/slow/204"), nil},
		{"slow backend, pipeline", get("/t/default/p/slow/1") + get("/t/default/p/slow/close") + get("/t/default/p/slow/3"), []string{"GET", "GET", "GET"}},
		{"pipeline with a body", "POST /t/default/p/web/p HTTP/1.1\r\nHost: gw\r\n" + bearer + "Content-Length: 5\r\n\r\nabcde" + get("/t/default/p/web/q"), []string{"POST", "GET"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			methods := c.methods
			if methods == nil {
				methods = []string{"GET"}
			}
			be.take()
			gotStd, closingStd := exchangeRawTrickled(t, std, c.raw, 0, methods...)
			seenStd := be.take()
			if len(gotStd) == 0 {
				t.Fatal("net/http gave no answer at all")
			}
			for _, p := range paths {
				if p.trickle == 1 && len(c.raw) > 600 {
					continue // long heads: 13 bytes at a time is enough
				}
				if p.trickle > 0 && closingStd {
					// net/http answers and closes before a trickled
					// request is all sent; the bytes still coming then
					// reset the connection under its answer, whichever
					// proxy took the request.
					continue
				}
				gotFast, closingFast := exchangeRawTrickled(t, p.addr, c.raw, p.trickle, methods...)
				seenFast := be.take()
				if fast502[c.name] {
					if len(gotFast) != 1 || gotFast[0].Code != http.StatusBadGateway {
						t.Errorf("%s: %s, want a 502", p.name, show(gotFast))
					}
					gotFast = gotStd
				}
				if closingFast != closingStd {
					t.Errorf("%s: Connection: close %v, net/http %v", p.name, closingFast, closingStd)
				}
				if !reflect.DeepEqual(gotFast, gotStd) {
					t.Errorf("answers differ\n%s: %s\nnet/http:  %s", p.name, show(gotFast), show(gotStd))
				}
				if !reflect.DeepEqual(seenFast, seenStd) {
					t.Errorf("the backend received different requests\n%s: %s\nnet/http:  %s", p.name, show(seenFast), show(seenStd))
				}
			}
		})
	}
}

func show(v any) string {
	var b strings.Builder
	switch x := v.(type) {
	case []answer:
		for _, a := range x {
			fmt.Fprintf(&b, "\n  %v %d %q body=%q trailer=%v err=%q", a.Interim, a.Code, flat(a.Header), cut(a.Body), a.Trailer, a.Err)
		}
	case []backendSeen:
		for _, s := range x {
			fmt.Fprintf(&b, "\n  %s %s %s host=%s cl=%d %q body=%q", s.Method, s.URI, s.Proto, s.Host, s.ContentLength, flat(s.Header), cut(s.Body))
		}
	}
	return b.String()
}

func cut(s string) string {
	if len(s) > 80 {
		return fmt.Sprintf("%s… (%d bytes)", s[:80], len(s))
	}
	return s
}

func flat(h http.Header) string {
	var keys []string
	for k, v := range h {
		keys = append(keys, k+"="+strings.Join(v, "|"))
	}
	sort.Strings(keys)
	return strings.Join(keys, " ")
}

// A backend that closes every connection after one answer without saying
// so (no Connection: close) leaves the gateway a dead pooled connection
// for each next request: requests without a body are sent again on a new
// connection, requests with one go only over a connection checked first.
// The client sees 200s only.
func TestFastPathSurvivesBackendClosingIdleConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")
			}()
		}
	}()
	key := newKey(t)
	auth := newAuthDir(t, key)
	addr := startInProcess(t, gateway.Config{
		AuthDir: auth.path, Cluster: "bench", Domain: "bench.kiln.test",
		Backends: map[gateway.Route]string{{Tenant: "default", Project: "web"}: ln.Addr().String()},
	})
	tok := key.token(t, "bench", "default")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	t.Cleanup(client.CloseIdleConnections)
	for i := range 30 {
		method, body := http.MethodGet, io.Reader(nil)
		if i%3 == 2 {
			method, body = http.MethodPost, strings.NewReader("payload")
		}
		req, _ := http.NewRequest(method, "http://"+addr+"/t/default/p/web/", body)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("request %d (%s): %v", i, method, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != "ok" {
			t.Fatalf("request %d (%s): %d %q, want 200 ok", i, method, resp.StatusCode, b)
		}
		time.Sleep(5 * time.Millisecond) // the backend's close lands
	}
}

// Many clients at once, each a kept-alive connection sending a random mix
// of what the event loop serves whole (GETs, HEADs, refusals, large
// answers), what it hands over midway (chunked, close-delimited and
// interim answers) and what it leaves to goroutines from the start (bodies,
// escaped paths), some of them pipelined: every answer must be the one its
// request asked for, on the connection that asked, in order. Run with
// -race, this is the event loop's check against the rest of the process.
func TestFastPathConcurrentMixedLoad(t *testing.T) {
	key := newKey(t)
	auth := newAuthDir(t, key)
	be := newRawBackend(t)
	tok := key.token(t, "bench", "default")
	addr := startInProcess(t, gateway.Config{
		AuthDir: auth.path, Cluster: "bench", Domain: "bench.kiln.test",
		Backends: map[gateway.Route]string{{Tenant: "default", Project: "web"}: be.ln.Addr().String()},
	})
	type want struct {
		method, body string
		code         int
	}
	shape := func(i, n int) (string, want) {
		bearer := "Authorization: Bearer " + tok + "\r\n"
		p := fmt.Sprintf("/c%d/r%d", i, n)
		switch n % 9 {
		case 1:
			return "HEAD /t/default/p/web" + p + " HTTP/1.1\r\nHost: gw\r\n" + bearer + "\r\n", want{"HEAD", "", 200}
		case 2:
			return "POST /t/default/p/web" + p + " HTTP/1.1\r\nHost: gw\r\n" + bearer + "Content-Length: 4\r\n\r\nbody", want{"GET", "echo POST " + p + " body", 200}
		case 3:
			return "GET /t/default/p/web" + p + "/chunked HTTP/1.1\r\nHost: gw\r\n" + bearer + "\r\n", want{"GET", "hello world", 200}
		case 4:
			return "GET /t/default/p/web" + p + "/close HTTP/1.1\r\nHost: gw\r\n" + bearer + "\r\n", want{"GET", "the body ends with the connection", 200}
		case 5:
			return "GET /t/default/p/web" + p + " HTTP/1.1\r\nHost: gw\r\n\r\n", want{"GET", "unauthorized\n", 401}
		case 6:
			return "GET /t/default/p/web" + p + "/103 HTTP/1.1\r\nHost: gw\r\n" + bearer + "\r\n", want{"GET", "final", 200}
		case 7:
			return "GET /t/default/p/web" + p + "/big HTTP/1.1\r\nHost: gw\r\n" + bearer + "\r\n", want{"GET", strings.Repeat("0123456789", 10000), 200}
		default:
			return "GET /t/default/p/web" + p + "?q=" + fmt.Sprint(n) + " HTTP/1.1\r\nHost: gw\r\n" + bearer + "\r\n", want{"GET", "echo GET " + p + "?q=" + fmt.Sprint(n) + " ", 200}
		}
	}
	const clients, requests = 16, 120
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Go(func() {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(60 * time.Second))
			br := bufio.NewReader(c)
			for n := 0; n < requests; {
				// One, two or three requests written at once.
				batch := 1 + (i+n)%3
				var raw strings.Builder
				var wants []want
				for k := 0; k < batch && n < requests; k, n = k+1, n+1 {
					r, w := shape(i, n)
					raw.WriteString(r)
					wants = append(wants, w)
				}
				if _, err := io.WriteString(c, raw.String()); err != nil {
					errs <- fmt.Errorf("client %d: write: %v", i, err)
					return
				}
				for _, w := range wants {
					resp, err := http.ReadResponse(br, &http.Request{Method: w.method})
					for err == nil && resp.StatusCode < 200 {
						resp, err = http.ReadResponse(br, &http.Request{Method: w.method})
					}
					if err != nil {
						errs <- fmt.Errorf("client %d before request %d: %v", i, n, err)
						return
					}
					b, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil || resp.StatusCode != w.code || string(b) != w.body {
						errs <- fmt.Errorf("client %d before request %d: %d %q (%v), want %d %q", i, n, resp.StatusCode, cut(string(b)), err, w.code, cut(w.body))
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// The client-side timeouts hold on the fast path as they hold on net/http
// (both are served here, and on Linux the fast path's timeouts are the
// event loop's own sweep, not socket deadlines): a head that stalls is cut
// after the header timeout, a connection idle after an answer after the
// idle timeout; a head that arrives in parts within the timeout, and a
// client that keeps asking within the idle timeout, are served.
func TestFastPathClientTimeouts(t *testing.T) {
	gateway.SetClientTimeouts(t, 300*time.Millisecond, 700*time.Millisecond)
	key := newKey(t)
	auth := newAuthDir(t, key)
	be := newRawBackend(t)
	tok := key.token(t, "bench", "default")
	base := gateway.Config{
		AuthDir: auth.path, Cluster: "bench", Domain: "bench.kiln.test",
		Backends: map[gateway.Route]string{{Tenant: "default", Project: "web"}: be.ln.Addr().String()},
	}
	goCfg, stdCfg := base, base
	goCfg.NoEventLoop = true
	stdCfg.NetHTTPOnly = true
	head := "GET /t/default/p/web/x HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + tok + "\r\n"
	for _, p := range []struct {
		name string
		cfg  gateway.Config
	}{{"fast path", base}, {"goroutine fast path", goCfg}, {"net/http", stdCfg}} {
		t.Run(p.name, func(t *testing.T) {
			addr := startInProcess(t, p.cfg)
			dial := func() (net.Conn, *bufio.Reader) {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				_ = c.SetDeadline(time.Now().Add(20 * time.Second))
				return c, bufio.NewReader(c)
			}
			send := func(c net.Conn, s string) {
				if _, err := io.WriteString(c, s); err != nil {
					t.Fatal(err)
				}
			}
			answered := func(br *bufio.Reader, what string) {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("%s: no answer: %v", what, err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: %d, want 200", what, resp.StatusCode)
				}
			}
			closed := func(br *bufio.Reader, what string) {
				if b, err := br.ReadByte(); err == nil {
					t.Fatalf("%s: read %q, want the connection closed", what, b)
				} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatalf("%s: still open after 20 s", what)
				}
			}

			stalled, stalledR := dial()
			send(stalled, head) // no empty line: the head never ends
			parts, partsR := dial()
			send(parts, head[:20])
			time.Sleep(100 * time.Millisecond)
			send(parts, head[20:]+"\r\n")
			answered(partsR, "a head in two parts within the header timeout")
			idle, idleR := dial()
			send(idle, head+"\r\n")
			answered(idleR, "the idle connection's one request")
			busy, busyR := dial()
			for i := range 12 { // 1.2 s in all, more than the idle timeout
				send(busy, head+"\r\n")
				answered(busyR, fmt.Sprintf("request %d of a connection asking every 100 ms", i))
				time.Sleep(100 * time.Millisecond)
			}
			closed(stalledR, "a head that stalls")
			closed(idleR, "an idle connection")
		})
	}
}

// --max-conns holds with the event loop too: its connections keep their
// listener slot until the loop closes them (or hands them over), and a
// slot freed lets the next connection in.
func TestFastPathMaxConns(t *testing.T) {
	key := newKey(t)
	auth := newAuthDir(t, key)
	be := newRawBackend(t)
	tok := key.token(t, "bench", "default")
	base := gateway.Config{
		AuthDir: auth.path, Cluster: "bench", Domain: "bench.kiln.test", MaxConns: 2,
		Backends: map[gateway.Route]string{{Tenant: "default", Project: "web"}: be.ln.Addr().String()},
	}
	goCfg := base
	goCfg.NoEventLoop = true
	get := "GET /t/default/p/web/x HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + tok + "\r\n\r\n"
	chunked := "GET /t/default/p/web/chunked HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + tok + "\r\n\r\n"
	for _, p := range []struct {
		name string
		cfg  gateway.Config
	}{{"fast path", base}, {"goroutine fast path", goCfg}} {
		t.Run(p.name, func(t *testing.T) {
			addr := startInProcess(t, p.cfg)
			open := func(req string) (net.Conn, *bufio.Reader, chan error) {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				_ = c.SetDeadline(time.Now().Add(20 * time.Second))
				br := bufio.NewReader(c)
				done := make(chan error, 1)
				go func() {
					if _, err := io.WriteString(c, req); err != nil {
						done <- err
						return
					}
					resp, err := http.ReadResponse(br, nil)
					if err == nil {
						_, err = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
					done <- err
				}()
				return c, br, done
			}
			// Two held: one served by the loop, one handed over (a
			// chunked answer), both kept alive.
			c1, _, d1 := open(get)
			if err := <-d1; err != nil {
				t.Fatal(err)
			}
			_, _, d2 := open(chunked)
			if err := <-d2; err != nil {
				t.Fatal(err)
			}
			_, _, d3 := open(get)
			select {
			case err := <-d3:
				t.Fatalf("a third connection was served past --max-conns 2 (%v)", err)
			case <-time.After(300 * time.Millisecond):
			}
			c1.Close()
			if err := <-d3; err != nil {
				t.Fatalf("the third connection, once a slot was free: %v", err)
			}
		})
	}
}

// Over 400 lines on purpose: the fast path is one HTTP/1.1 exchange read,
// checked, proxied and logged, and its rules (what it takes, what it hands
// to net/http) are easier to review in one place.

package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The fast path. net/http's server and Transport cost about 60% of a
// proxied request on one core (docs/benchmarks.md): parsing into maps,
// cloning the request, two goroutines per backend connection and their
// hand-offs. The plain-HTTP listener is therefore served by fastServer,
// which reads each request head itself and proxies the common shape — an
// HTTP/1.1 request with no body or a Content-Length body, a path that
// needs no escaping, no Connection header but close or keep-alive, no
// Upgrade, Expect, TE or Transfer-Encoding header — over a backend
// connection of its own pool, copying bytes between the two connections'
// buffers. Every other request
// (and every request of its connection after it) goes to net/http with the
// bytes already read put back in front of the connection: HTTP/1.0,
// chunked uploads, 100-continue, WebSocket upgrades, escaped paths,
// malformed or oversized heads (net/http answers 400 or 431), requests
// that are not routed to a project (the probes, /metrics, 404s). What the
// fast path proxies, net/http would have proxied the same way: the same
// checks (route, token, backend, tenant limit) in the same order, the same
// header rewriting (TestFastPathMatchesNetHTTP compares the two on the
// wire). HTTPS is served by net/http alone.

// Timeouts of the client side, net/http's and the fast path's (vars for
// the tests, export_test.go).
var (
	readHeaderTimeout = 10 * time.Second
	// Request bodies may be slow uploads; a client that sends nothing
	// for this long is cut (net/http resets the deadline per read only
	// with ReadTimeout, so bound the whole read generously).
	readTimeout = 5 * time.Minute
	idleTimeout = 2 * time.Minute
)

const (
	// maxResponseHeaderBytes bounds a backend's response head.
	maxResponseHeaderBytes = 1 << 20
	// maxIdlePerBackend bounds the idle connections kept per backend
	// (on an event loop, those kept longer than idleTrimAfter).
	maxIdlePerBackend = 128
	// backendIdleTimeout closes a backend connection idle for longer.
	backendIdleTimeout = 90 * time.Second
	// checkIdleAfter: a pooled connection idle for longer is checked for
	// a close by the backend before it is used (one non-blocking peek).
	checkIdleAfter = time.Second
	// maxDiscard is the most of a refused request's body read and
	// dropped to keep its connection (net/http's 256 KiB).
	maxDiscard = 256 << 10
)

// idleTrimAfter: an event loop closes the idle backend connections
// beyond maxIdlePerBackend once idle for this long (a burst's).
var idleTrimAfter = 5 * time.Second

// fastServer serves a plain-HTTP listener, proxying what it can and
// handing the rest to std.
type fastServer struct {
	g    *Gateway
	std  *http.Server
	hand *handoffListener
	pool backendPool

	mu     sync.Mutex
	ln     net.Listener
	loops  []*evLoop          // the event loops (fast_loop_linux.go), if any
	conns  map[*fastConn]bool // true while a request is in progress
	closed bool
	// stopped closes with Shutdown: Serve returns (the loops accept, if
	// they do, until each has been told).
	stopped chan struct{}
	wg      sync.WaitGroup
}

func (g *Gateway) newFastServer(std *http.Server, addr net.Addr) *fastServer {
	dial := g.cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	s := &fastServer{
		g: g, std: std,
		hand:  &handoffListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})},
		conns: map[*fastConn]bool{}, stopped: make(chan struct{}),
	}
	s.pool.dial, s.pool.idle = dial, map[string][]*backendConn{}
	return s
}

// Serve accepts on ln until Shutdown; std must be serving s.hand.
func (s *fastServer) Serve(ln net.Listener) error {
	loops, err := s.startLoops()
	if err != nil {
		s.g.log.Warn("no event loop; serving the fast path with a goroutine per connection", "error", err.Error())
	}
	s.mu.Lock()
	s.ln = ln
	closed := s.closed
	if !closed {
		s.loops = loops
	}
	s.mu.Unlock()
	if closed {
		stopLoops(loops)
		_ = ln.Close()
		return http.ErrServerClosed
	}
	go s.trimPool()
	if s.listenInLoops(ln) {
		<-s.stopped
		return http.ErrServerClosed
	}
	if len(loops) > 0 {
		// The loops cannot accept: connections get goroutines.
		s.mu.Lock()
		s.loops = nil
		s.mu.Unlock()
		stopLoops(loops)
	}
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.isClosed() {
				return http.ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ECONNABORTED) {
				// As net/http does: out of descriptors or a connection
				// reset before it was accepted; back off and go on.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.g.log.Warn("accept failed; retrying", "error", err.Error(), "in", delay.String())
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		fc := newFastConn(s.g, c)
		if !s.state(fc, false) {
			fc.close()
			continue
		}
		s.wg.Add(1)
		go s.serveConn(fc)
	}
}

func (s *fastServer) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// state records fc idle or busy; false once the server is shutting down
// and fc should close.
func (s *fastServer) state(fc *fastConn, busy bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[fc] = busy
	s.pool.clients.Store(int64(len(s.conns)))
	return true
}

func (s *fastServer) forget(fc *fastConn) {
	s.mu.Lock()
	delete(s.conns, fc)
	s.pool.clients.Store(int64(len(s.conns)))
	s.mu.Unlock()
}

// trimPool trims the goroutine path's backend pool (as the loops' sweeps
// trim theirs) until Shutdown.
func (s *fastServer) trimPool() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-s.stopped:
			return
		case now := <-t.C:
			s.pool.trim(now)
		}
	}
}

// Shutdown stops accepting, closes idle connections and waits for the
// requests in flight until ctx ends, then closes what is left.
func (s *fastServer) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.closed {
		close(s.stopped)
	}
	s.closed = true
	if s.ln != nil {
		_ = s.ln.Close()
	}
	for fc, busy := range s.conns {
		if !busy {
			_ = fc.c.Close()
		}
	}
	loops := s.loops
	s.mu.Unlock()
	// Every loop stops accepting before the wait for the connections
	// (a loop's accept adds to wg).
	for _, l := range loops {
		select {
		case <-l.shutdown():
		case <-l.ended():
		}
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		s.mu.Lock()
		for fc := range s.conns {
			_ = fc.c.Close()
		}
		s.mu.Unlock()
		for _, l := range loops {
			l.closeAll()
		}
		err = ctx.Err()
	}
	stopLoops(loops)
	s.pool.closeAll()
	return err
}

// fastConn is one client connection of the fast path.
type fastConn struct {
	g      *Gateway
	c      net.Conn
	r      *bufio.Reader
	w      *bufio.Writer
	remote string // RemoteAddr, for the log
	ip     string // its host, for X-Forwarded-For
	head   []byte // the request head as read
	req    fastReq
	info   reqInfo
	// bodyLeft is what the client has yet to send of the request's body
	// (-1: unknown, the connection cannot serve another request).
	bodyLeft int64
	// The strings of the connection's last request: a client on a
	// kept-alive connection mostly repeats them.
	lastHost, lastPath string
	lastRoute          Route
	lastAddr           string
	// The token the connection's last request carried, verified against
	// lastSet for lastTenant: a client repeats it on every request, and
	// comparing bytes costs less than the cache's SHA-256.
	lastToken  []byte
	lastSet    *keySet
	lastTenant string
	verified   int // tokens verified through the key set's cache
	// last is when the connection's last answer ended.
	last time.Time
}

var crlf2 = []byte("\r\n\r\n")

// backendAddr is the gateway's backendAddr, the connection's last one
// again when the route is the same (no string built per request).
func (fc *fastConn) backendAddr(r Route) (string, bool) {
	if r != fc.lastRoute || fc.lastAddr == "" {
		a, found := fc.g.backendAddr(r)
		if !found {
			return "", false
		}
		fc.lastRoute, fc.lastAddr = r, a
	}
	return fc.lastAddr, true
}

// verify returns the tenant of token against set: the connection's last
// token again (from its third request on) costs a comparison, another the
// key set's cache lookup (or verification).
func (fc *fastConn) verify(set *keySet, token []byte) (string, error) {
	if set == fc.lastSet && bytes.Equal(token, fc.lastToken) {
		return fc.lastTenant, nil
	}
	tenant, err := set.verifyBytes(token)
	if err != nil {
		return "", err
	}
	// Kept from the connection's second request on: a connection per
	// request would copy each token (most of a new connection's garbage)
	// for nothing.
	if fc.verified++; fc.verified >= 2 && len(token) <= 4<<10 {
		fc.lastSet, fc.lastTenant = set, tenant
		fc.lastToken = append(fc.lastToken[:0], token...)
	}
	return tenant, nil
}

// strings returns host and path as strings, the last request's when they
// are the same bytes (no allocation).
func (fc *fastConn) strings(host, path []byte) (string, string) {
	if string(host) != fc.lastHost {
		fc.lastHost = string(host)
	}
	if string(path) != fc.lastPath {
		fc.lastPath = string(path)
	}
	return fc.lastHost, fc.lastPath
}

var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4<<10) }}
)

func newFastConn(g *Gateway, c net.Conn) *fastConn {
	r := readers.Get().(*bufio.Reader)
	r.Reset(c)
	w := writers.Get().(*bufio.Writer)
	w.Reset(c)
	remote := c.RemoteAddr().String()
	ip, _, err := net.SplitHostPort(remote)
	if err != nil {
		ip = remote
	}
	return &fastConn{g: g, c: c, r: r, w: w, remote: remote, ip: ip}
}

// close closes the connection and gives back its buffers.
func (fc *fastConn) close() {
	_ = fc.c.Close()
	fc.release()
}

func (fc *fastConn) release() {
	fc.r.Reset(nil)
	readers.Put(fc.r)
	fc.w.Reset(nil)
	writers.Put(fc.w)
	fc.r, fc.w = nil, nil
}

func (s *fastServer) serveConn(fc *fastConn) { s.serveFrom(fc, nil) }

// serveFrom serves fc's requests until it closes or is handed to
// net/http; first, when set, answers a request already in progress
// (one the event loop began) and says whether the connection can serve
// another.
func (s *fastServer) serveFrom(fc *fastConn, first func() bool) {
	defer s.wg.Done()
	handed := false
	defer func() {
		s.forget(fc)
		if !handed {
			fc.close()
		}
	}()
	if first == nil {
		fc.last = time.Now()
	} else if !first() || !s.state(fc, false) {
		return
	}
	for {
		if fc.r.Buffered() == 0 {
			// Idle since the last answer (the clock read that ended it).
			_ = fc.c.SetReadDeadline(fc.last.Add(idleTimeout))
			if _, err := fc.r.Peek(1); err != nil {
				return
			}
		}
		if !s.state(fc, true) {
			return
		}
		start := time.Now()
		if b, _ := fc.r.Peek(fc.r.Buffered()); !bytes.Contains(b, crlf2) {
			// Not all here yet: the rest within readHeaderTimeout. (A
			// head that came in whole needs no deadline of its own.)
			_ = fc.c.SetReadDeadline(start.Add(readHeaderTimeout))
		}
		complete, err := fc.readHead(s.g.cfg.MaxHeaderBytes)
		if err != nil {
			return
		}
		if !complete || !fc.req.parse(fc.head) {
			handed = true
			s.handoff(fc)
			return
		}
		keep, handOff := s.serveRequest(fc, start)
		if handOff {
			handed = true
			s.handoff(fc)
			return
		}
		if !keep || !s.state(fc, false) {
			return
		}
	}
}

// resume answers a request the event loop sent to bc and handed over
// with the response head not read yet (or whose backend connection
// failed with err), as serveRequest would have; it says whether the
// connection can serve another request.
func (s *fastServer) resume(fc *fastConn, bc *backendConn, start time.Time, err error) bool {
	s.state(fc, true)
	g := s.g
	a := answer{fc: fc, start: start}
	host, path := fc.strings(fc.req.host, fc.req.path)
	defer a.log(g, host, path)
	defer g.tenants.give(fc.info.route.Tenant)
	ex := exchange{s: s, fc: fc, info: &fc.info, start: start}
	keep := false
	if err == nil {
		_ = bc.c.SetReadDeadline(start.Add(g.cfg.BackendTimeout))
		bc.armed = true
		err = bc.readHead()
	}
	if err != nil {
		if bc != nil {
			bc.close()
		}
		ex.headFailed(false, err)
	} else {
		keep = ex.answer(bc)
	}
	return a.conclude(&ex, keep)
}

// handoff gives fc's connection, with the bytes read from it put back in
// front, to net/http (or closes it if net/http is shut down); fc is done
// with either way.
func (s *fastServer) handoff(fc *fastConn) {
	_ = fc.c.SetReadDeadline(time.Time{})
	pre := make([]byte, 0, len(fc.head)+fc.r.Buffered())
	pre = append(pre, fc.head...)
	if n := fc.r.Buffered(); n > 0 {
		b, _ := fc.r.Peek(n)
		pre = append(pre, b...)
	}
	c := &prefixConn{Conn: fc.c, pre: pre}
	fc.release()
	s.hand.give(c)
}

// readHead reads the request head (through its empty line) into fc.head:
// complete false when it is longer than max or starts with an empty line
// (net/http answers those).
func (fc *fastConn) readHead(max int) (complete bool, err error) {
	var st int
	fc.head, st, err = readHead(fc.r, fc.head[:0], max)
	return st == headComplete, err
}

// readHead states.
const (
	headComplete = iota
	headTooLong  // over max bytes
	headBlank    // starts with an empty line
)

// readHead appends to dst, from r, a message head through the empty line
// that ends it, reading no more than max bytes (and no byte past the
// head).
func readHead(r *bufio.Reader, dst []byte, max int) (head []byte, state int, err error) {
	lineStart := 0
	for {
		line, err := r.ReadSlice('\n')
		dst = append(dst, line...)
		if len(dst) > max {
			return dst, headTooLong, nil
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err != nil:
			return dst, 0, err
		}
		if n := len(dst) - lineStart; n <= 2 && (n == 1 || dst[lineStart] == '\r') {
			if lineStart == 0 {
				return dst, headBlank, nil
			}
			return dst, headComplete, nil
		}
		lineStart = len(dst)
	}
}

// headEnd finds the end of the message head at the start of b as
// readHead reads one: the line of at most "\r\n" that ends it.
func headEnd(b []byte) (n, state int) {
	for start := 0; ; {
		i := bytes.IndexByte(b[start:], '\n')
		if i < 0 {
			return 0, headPartial
		}
		if i == 0 || i == 1 && b[start] == '\r' {
			if start == 0 {
				return i + 1, headBlank
			}
			return start + i + 1, headComplete
		}
		start += i + 1
	}
}

// headPartial: the head has not ended yet (headEnd).
const headPartial = -1

// fastReq is one request head the fast path takes: slices of fc.head.
type fastReq struct {
	method  string // one of the constants of fastMethod
	target  []byte // path and query as sent
	path    []byte // target up to '?'
	host    []byte
	auth    []byte
	bodyLen int64    // Content-Length, 0 without
	keep    [][]byte // header lines forwarded as they are, CRLF included
	// close: the client asked for the connection to close after the
	// answer (Connection: close).
	close bool
}

// parse reads head into r; false when the request is not one the fast
// path takes.
func (r *fastReq) parse(head []byte) bool {
	*r = fastReq{keep: r.keep[:0]}
	eol := indexCRLF(head)
	if eol < 0 {
		return false
	}
	if !r.requestLine(head[:eol]) {
		return false
	}
	sawLength := false
	for rest := head[eol+2:]; ; {
		full, name, value, next, st := headerLine(rest)
		if st == lineEnd {
			break
		}
		if st == lineBad {
			return false
		}
		rest = next
		switch {
		case eqFold(name, "host"):
			if r.host != nil || !validHost(value) {
				return false
			}
			r.host = value
		case eqFold(name, "authorization"):
			if r.auth != nil {
				return false
			}
			r.auth = value
		case eqFold(name, "content-length"):
			n, ok := parseLength(value)
			if sawLength || !ok {
				return false
			}
			sawLength, r.bodyLen = true, n
			r.keep = append(r.keep, full)
		case eqFold(name, "connection"):
			// close and keep-alive only: other tokens name headers to
			// drop (and upgrade asks for a protocol switch), which
			// net/http does.
			for tok := value; len(tok) > 0; {
				var one []byte
				one, tok, _ = cutByte(tok, ',')
				switch one = trimOWS(one); {
				case eqFold(one, "close"):
					r.close = true
				case len(one) > 0 && !eqFold(one, "keep-alive"):
					return false
				}
			}
		case eqFold(name, "upgrade"), eqFold(name, "expect"),
			eqFold(name, "transfer-encoding"), eqFold(name, "te"), eqFold(name, "trailer"):
			// Hop-by-hop with a meaning net/http implements.
			return false
		case eqFold(name, "keep-alive"), eqFold(name, "proxy-connection"), eqFold(name, "proxy-authenticate"),
			eqFold(name, "proxy-authorization"),
			eqFold(name, "x-forwarded-for"), eqFold(name, "x-forwarded-host"), eqFold(name, "x-forwarded-proto"):
			// Hop-by-hop, or set by the gateway.
		default:
			if isClientForwarding(name) {
				continue
			}
			r.keep = append(r.keep, full)
		}
	}
	return len(r.host) > 0
}

// headerLine states.
const (
	lineOK  = iota
	lineEnd // the empty line that ends the head
	lineBad // malformed: obs-fold, a space before the colon, a bad name or value, no CRLF
)

// headerLine reads the first line of rest, a header field line: the line
// with its CRLF, its name and its value without surrounding whitespace,
// and what follows it.
func headerLine(rest []byte) (full, name, value, next []byte, state int) {
	eol := indexCRLF(rest)
	if eol < 0 {
		return nil, nil, nil, nil, lineBad
	}
	line := rest[:eol]
	if len(line) == 0 {
		return nil, nil, nil, rest[2:], lineEnd
	}
	colon := -1
	for i, c := range line {
		if c == ':' {
			colon = i
			break
		}
		if !isTokenChar(c) {
			return nil, nil, nil, nil, lineBad
		}
	}
	if colon <= 0 {
		return nil, nil, nil, nil, lineBad
	}
	value = trimOWS(line[colon+1:])
	if !validFieldValue(value) {
		return nil, nil, nil, nil, lineBad
	}
	return rest[:eol+2], line[:colon], value, rest[eol+2:], lineOK
}

// requestLine reads METHOD SP TARGET SP HTTP/1.1.
func (r *fastReq) requestLine(line []byte) bool {
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 <= 0 {
		return false
	}
	r.method = fastMethod(line[:sp1])
	rest := line[sp1+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if r.method == "" || sp2 <= 0 || string(rest[sp2+1:]) != "HTTP/1.1" {
		return false
	}
	r.target = rest[:sp2]
	if r.target[0] != '/' || len(r.target) > 1 && r.target[1] == '/' {
		return false
	}
	q := len(r.target)
	for i, c := range r.target {
		if c == '?' {
			q = i
			break
		}
		if !pathChar[c] {
			return false
		}
	}
	r.path = r.target[:q]
	query := r.target[min(q+1, len(r.target)):]
	for i := 0; i < len(query); i++ {
		switch c := query[i]; {
		case c <= ' ' || c >= 0x7f || c == '#' || c == ';':
			// ';' and bad escapes make the proxy re-encode the query.
			return false
		case c == '%':
			if i+2 >= len(query) || !isHex(query[i+1]) || !isHex(query[i+2]) {
				return false
			}
			i += 2
		}
	}
	return true
}

// fastMethod is m as a constant string, "" for a method the fast path
// leaves to net/http.
func fastMethod(m []byte) string {
	for _, k := range [...]string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
		if string(m) == k {
			return k
		}
	}
	return ""
}

// pathChar: the bytes of a path that net/url leaves as they are (so
// net/http would forward it unchanged, with no RawPath).
var pathChar = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "-._~$&+,/:;=@" {
		t[c] = true
	}
	return t
}()

// serveRequest answers the request in fc.req: keep says the connection
// can serve another; handOff that net/http takes it, this request first.
func (s *fastServer) serveRequest(fc *fastConn, start time.Time) (keep, handOff bool) {
	g, req := s.g, &fc.req
	info := &fc.info
	*info = reqInfo{}
	host, path := fc.strings(req.host, req.path)
	routed, ok := g.routeOf(host, path, "", info)
	if !routed || !ok {
		// Probes, /metrics, not a project: net/http's handler.
		return false, true
	}
	a := answer{fc: fc, start: start}
	defer a.log(g, host, path)
	fc.bodyLeft = req.bodyLen
	if no := g.admit(req.auth, fc.verify, fc.backendAddr, info); no != nil {
		return a.deny(no.code, no.body, no.header, no.value), false
	}
	if !g.tenants.take(info.route.Tenant) {
		info.reason = "tenant over its concurrency limit"
		g.metrics.limited(info.route.Tenant)
		return a.deny(http.StatusServiceUnavailable, bodyBusy, "Retry-After", strconv.Itoa(RetryAfter)), false
	}
	defer g.tenants.give(info.route.Tenant)
	ex := exchange{s: s, fc: fc, info: info, start: start}
	return a.conclude(&ex, ex.run()), false
}

// answer is what the client was answered to one request, for its log
// line.
type answer struct {
	fc    *fastConn
	start time.Time
	code  int
	bytes int64
}

// log writes the access log line of the answer.
func (a *answer) log(g *Gateway, host, path string) {
	fc := a.fc
	fc.last = g.logRequest(a.start, fc.req.method, host, path, a.code, a.bytes, fc.remote, &fc.info)
}

// deny answers with a body of the gateway's own: keep says the
// connection can serve another request.
func (a *answer) deny(code int, body, header, value string) bool {
	fc := a.fc
	a.code = code
	// A body not read yet is read and dropped after the answer, as
	// net/http does, up to maxDiscard; past it the connection closes
	// after the answer.
	closing := fc.req.close || fc.bodyLeft > maxDiscard || fc.bodyLeft < 0
	writeDeny(fc.w, code, body, header, value, fc.req.method == http.MethodHead, closing)
	if fc.w.Flush() != nil || closing {
		return false
	}
	if fc.bodyLeft > 0 {
		_ = fc.c.SetReadDeadline(a.start.Add(readTimeout))
		if _, err := fc.r.Discard(int(fc.bodyLeft)); err != nil {
			return false
		}
	}
	return true
}

// conclude answers what ex left unanswered (its failure) and says
// whether the connection can serve another request, keep being what
// the exchange said.
func (a *answer) conclude(ex *exchange, keep bool) bool {
	if ex.failed != nil {
		f := *ex.failed
		a.fc.info.reason = f.reason
		if f.retry {
			return a.deny(f.code, f.body, "Retry-After", strconv.Itoa(RetryAfter))
		}
		return a.deny(f.code, f.body, "", "")
	}
	a.code, a.bytes = ex.code, ex.bytes
	if ex.reason != "" {
		a.fc.info.reason = ex.reason
	}
	return keep && a.fc.w.Flush() == nil && !a.fc.req.close
}

// sink is where the fast path writes a head: a connection's
// bufio.Writer, or the event loop's byte buffer (fast_loop_linux.go).
type sink interface {
	Write(p []byte) (int, error)
	WriteString(s string) (int, error)
	WriteByte(c byte) error
}

// writeDeny writes an answer of the gateway's own, as deny does through
// net/http.
func writeDeny(w sink, code int, body, header, value string, head, closing bool) {
	_, _ = w.WriteString("HTTP/1.1 ")
	_, _ = w.WriteString(strconv.Itoa(code))
	_ = w.WriteByte(' ')
	_, _ = w.WriteString(http.StatusText(code))
	_, _ = w.WriteString("\r\nCache-Control: no-store\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n")
	if header != "" {
		_, _ = w.WriteString(header)
		_, _ = w.WriteString(": ")
		_, _ = w.WriteString(value)
		_, _ = w.WriteString("\r\n")
	}
	if closing {
		_, _ = w.WriteString("Connection: close\r\n")
	}
	_, _ = w.WriteString("Date: ")
	_, _ = w.Write(httpDate(time.Now()))
	_, _ = w.WriteString("\r\nContent-Length: ")
	_, _ = w.WriteString(strconv.Itoa(len(body)))
	_, _ = w.WriteString("\r\n\r\n")
	if !head {
		_, _ = w.WriteString(body)
	}
}

// httpDate is now in the format of the Date header, made once a second.
func httpDate(now time.Time) []byte {
	sec := now.Unix()
	if d := lastDate.Load(); d != nil && d.sec == sec {
		return d.text
	}
	d := &dateText{sec, now.UTC().AppendFormat(nil, http.TimeFormat)}
	lastDate.Store(d)
	return d.text
}

type dateText struct {
	sec  int64
	text []byte
}

var lastDate atomic.Pointer[dateText]

// prefixConn is a connection handed to net/http: what the fast path read
// of it comes first.
type prefixConn struct {
	net.Conn
	pre []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(p, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// handoffListener is the listener net/http serves: the connections the
// fast path gives it.
type handoffListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handoffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *handoffListener) Addr() net.Addr { return l.addr }

func (l *handoffListener) give(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		_ = c.Close()
		return false
	}
}

// Small byte helpers: the fast path parses without allocating.

func indexCRLF(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	if i < 1 || b[i-1] != '\r' {
		return -1 // none, or a bare LF: net/http's business
	}
	if j := bytes.IndexByte(b[:i-1], '\r'); j >= 0 {
		return -1 // a bare CR
	}
	return i - 1
}

func cutByte(b []byte, c byte) (before, after []byte, found bool) {
	if i := bytes.IndexByte(b, c); i >= 0 {
		return b[:i], b[i+1:], true
	}
	return b, nil, false
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// eqFold: b equals lower (lowercase ASCII) ignoring ASCII case.
func eqFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

func isClientForwarding(name []byte) bool {
	for _, h := range clientForwardingLower {
		if eqFold(name, h) {
			return true
		}
	}
	return false
}

var clientForwardingLower = func() []string {
	out := make([]string, len(clientForwarding))
	for i, h := range clientForwarding {
		b := []byte(h)
		for j, c := range b {
			if 'A' <= c && c <= 'Z' {
				b[j] = c + 'a' - 'A'
			}
		}
		out[i] = string(b)
	}
	return out
}()

// isTokenChar: RFC 9110's tchar.
func isTokenChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '!' || c == '#' || c == '$' || c == '%' || c == '&' || c == '\'' || c == '*' ||
		c == '+' || c == '-' || c == '.' || c == '^' || c == '_' || c == '`' || c == '|' || c == '~'
}

// validFieldValue: no control character but HTAB (as net/http checks),
// eight bytes at a time: a token is most of a head.
func validFieldValue(v []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for len(v) >= 8 {
		x := binary.LittleEndian.Uint64(v)
		// A byte below 0x20, or equal to 0x7f, sets its high bit here
		// (bytes of 0x80 and more never do).
		low := (x - ones*0x20) &^ x
		y := x ^ ones*0x7f
		del := (y - ones) &^ y
		if (low|del)&highs != 0 {
			for _, c := range v[:8] {
				if c < ' ' && c != '\t' || c == 0x7f {
					return false
				}
			}
		}
		v = v[8:]
	}
	for _, c := range v {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// validHost: the Host values the fast path takes (names, IPv4, [IPv6],
// a port); anything else is net/http's to judge.
func validHost(v []byte) bool {
	for _, c := range v {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == ':' || c == '[' || c == ']' || c == '_') {
			return false
		}
	}
	return len(v) > 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// parseLength parses a Content-Length of decimal digits only.
func parseLength(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

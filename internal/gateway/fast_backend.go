package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The backend side of the fast path: one exchange of a request for a
// response over a pooled connection.

// exchange proxies fc's request to info.addr. After run: failed, when
// nothing was written to the client (the caller answers it); else code and
// bytes of what was.
type exchange struct {
	s     *fastServer
	fc    *fastConn
	info  *reqInfo
	start time.Time

	failed *failure
	code   int
	bytes  int64
	reason string // why the exchange broke off after the answer started
}

// run returns whether the client connection can serve another request.
func (ex *exchange) run() bool {
	req := &ex.fc.req
	for attempt := 0; ; attempt++ {
		bc, reused, err := ex.s.pool.get(ex.info.addr, ex.start, req.bodyLen > 0)
		if err != nil {
			f := backendFailure(err)
			ex.failed = &f
			return true
		}
		bc.head = bc.head[:0]
		clientFailed, err := ex.send(bc)
		if err == nil {
			// From the request's start when there was no body to send.
			sentAt := ex.start
			if req.bodyLen > 0 {
				sentAt = time.Now()
			}
			_ = bc.c.SetReadDeadline(sentAt.Add(ex.s.g.cfg.BackendTimeout))
			bc.armed = true
			err = bc.readHead()
		}
		if err != nil {
			bc.close()
			// A pooled connection the backend closed while idle fails
			// before any answer: a request without a body is sent again
			// on a new one (as net/http's Transport does).
			if reused && attempt == 0 && req.bodyLen == 0 && len(bc.head) == 0 && closedByPeer(err) {
				continue
			}
			ex.headFailed(clientFailed, err)
			return false
		}
		return ex.answer(bc)
	}
}

// closedByPeer says err is how a read or write sees a connection its
// peer closed.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// headFailed records why no response head came: the client's body did
// not arrive (clientFailed), the backend timed out, or it failed.
func (ex *exchange) headFailed(clientFailed bool, err error) {
	var f failure
	switch {
	case clientFailed:
		// The client's body did not arrive in full.
		f = failure{http.StatusBadRequest, "bad request\n", "reading the request body: " + err.Error(), false}
	case isTimeout(err):
		f = failure{http.StatusGatewayTimeout, bodyTimeout, fmt.Sprintf("backend timed out: no response headers within %s", ex.s.g.cfg.BackendTimeout), false}
	default:
		f = backendFailure(err)
	}
	ex.failed = &f
}

// answer copies the response whose head is in bc.head to the client and
// gives bc back to the pool if it can serve another exchange; it returns
// whether the client's connection can.
func (ex *exchange) answer(bc *backendConn) bool {
	keepClient, keepBackend := ex.respond(bc)
	if cap(bc.head) > 64<<10 {
		bc.head = nil // a rare large head is not kept with the pool
	}
	if keepBackend {
		ex.s.pool.put(bc, ex.start)
	} else {
		bc.close()
	}
	return keepClient
}

// send writes the request head, rewritten as the net/http proxy rewrites
// it, and its body.
func (ex *exchange) send(bc *backendConn) (clientFailed bool, err error) {
	fc, req := ex.fc, &ex.fc.req
	w := bc.w
	writeRequestHead(w, req, ex.info, fc.ip)
	if req.bodyLen > 0 {
		_ = fc.c.SetReadDeadline(ex.start.Add(readTimeout))
		n, err := copyN(w, fc.r, req.bodyLen)
		if fc.bodyLeft -= n; err != nil {
			fc.bodyLeft = -1 // part of it went to the backend
			var we *writeError
			if errors.As(err, &we) {
				return false, we.err
			}
			return true, err
		}
	}
	return false, w.Flush()
}

// writeRequestHead writes req's head as the backend gets it, rewritten as
// the net/http proxy rewrites it: the routed path, the backend's Host,
// the client's forwarding headers replaced, the token dropped, the
// verified tenant added. ip is the client's address.
func writeRequestHead(w sink, req *fastReq, info *reqInfo, ip string) {
	_, _ = w.WriteString(req.method)
	_ = w.WriteByte(' ')
	_, _ = w.WriteString(info.path)
	if q := len(req.path); q < len(req.target) {
		_, _ = w.Write(req.target[q:]) // ?query, as sent
	}
	_, _ = w.WriteString(" HTTP/1.1\r\nHost: ")
	_, _ = w.WriteString(info.addr)
	_, _ = w.WriteString("\r\n")
	for _, line := range req.keep {
		_, _ = w.Write(line)
	}
	_, _ = w.WriteString("X-Forwarded-For: ")
	_, _ = w.WriteString(ip)
	_, _ = w.WriteString("\r\nX-Forwarded-Host: ")
	_, _ = w.Write(req.host)
	_, _ = w.WriteString("\r\nX-Forwarded-Proto: http\r\n")
	if info.prefix != "" {
		_, _ = w.WriteString("X-Forwarded-Prefix: ")
		_, _ = w.WriteString(info.prefix)
		_, _ = w.WriteString("\r\n")
	}
	// The tenant token went no further than the head's parse.
	_, _ = w.WriteString("X-Kiln-Tenant: ")
	_, _ = w.WriteString(info.tenant)
	_, _ = w.WriteString("\r\n\r\n")
}

// respond copies the backend's response in bc.head, and its body, to the
// client: keepClient and keepBackend say which connections can serve
// another exchange.
func (ex *exchange) respond(bc *backendConn) (keepClient, keepBackend bool) {
	w := ex.fc.w
	for {
		resp := &bc.resp
		ok := resp.parse(bc.head, ex.fc.req.method == http.MethodHead)
		if !ok {
			f := failure{http.StatusBadGateway, bodyBadGateway, "malformed response from the backend", false}
			ex.failed = &f
			return false, false
		}
		ex.code = resp.code
		if resp.code >= 100 && resp.code < 200 {
			if resp.code == http.StatusSwitchingProtocols {
				f := failure{http.StatusBadGateway, bodyBadGateway, "backend switched protocols unasked", false}
				ex.failed, ex.code = &f, 0
				return false, false
			}
			// An interim answer (103 Early Hints) goes through as it is;
			// the final one follows.
			_, _ = w.Write(bc.head)
			_ = bc.c.SetReadDeadline(time.Now().Add(ex.s.g.cfg.BackendTimeout))
			if err := bc.readHead(); err != nil {
				ex.reason = "backend failed after an interim answer: " + err.Error()
				return false, false
			}
			bc.disarm()
			continue
		}
		resp.writeHead(w, bc.head, ex.fc.req.close)
		if !resp.noBody && (resp.length < 0 || int64(bc.r.Buffered()) < resp.length) {
			// The body is read from the connection: with no deadline
			// (a response may stream for as long as it likes). A body
			// already read in full needs no reads, and keeps the
			// deadline until the connection's next use (bc.armed).
			bc.disarm()
		}
		var err error
		switch {
		case resp.noBody:
		case resp.chunked:
			ex.bytes, err = copyChunked(w, bc.r)
		case resp.length >= 0:
			ex.bytes, err = copyN(w, bc.r, resp.length)
		default:
			ex.bytes, err = copyChunking(w, bc.r)
		}
		if err != nil {
			ex.reason = "copying the response broke off: " + err.Error()
			return false, false
		}
		return true, !resp.close && (resp.noBody || resp.chunked || resp.length >= 0)
	}
}

// backendResponse is a response head, parsed.
type backendResponse struct {
	code    int
	length  int64 // -1 unknown
	chunked bool
	noBody  bool // HEAD, 1xx, 204, 304
	close   bool // the backend connection ends after it
	// drop are the names of header lines not to forward: Connection's
	// own, and those it lists.
	drop [][]byte
	// lines are the header lines, CRLF included; skip[i] drops line i.
	lines [][]byte
	skip  []bool
	date  bool
}

// parse parses head into r; false when it is malformed (502).
func (r *backendResponse) parse(head []byte, headReq bool) bool {
	*r = backendResponse{length: -1, drop: r.drop[:0], lines: r.lines[:0], skip: r.skip[:0]}
	eol := indexCRLF(head)
	if eol < 12 {
		return false
	}
	line := head[:eol]
	v := string(line[:9])
	if v != "HTTP/1.1 " && v != "HTTP/1.0 " || (eol > 12 && line[12] != ' ') {
		return false
	}
	code, err := strconv.Atoi(string(line[9:12]))
	if err != nil || code < 100 {
		return false
	}
	r.code = code
	r.close = v == "HTTP/1.0 "
	sawTE := false
	for rest := head[eol+2:]; ; {
		full, name, value, next, st := headerLine(rest)
		if st == lineEnd {
			break
		}
		if st == lineBad {
			return false
		}
		rest = next
		skip := false
		switch {
		case eqFold(name, "content-length"):
			n, ok := parseLength(value)
			if !ok || r.length >= 0 && n != r.length {
				return false
			}
			r.length = n
		case eqFold(name, "transfer-encoding"):
			if sawTE || !eqFold(value, "chunked") {
				return false
			}
			// Written again by writeHead when the body is chunked.
			sawTE, r.chunked, skip = true, true, true
		case eqFold(name, "connection"):
			skip = true
			for tok := value; len(tok) > 0; {
				var one []byte
				one, tok, _ = cutByte(tok, ',')
				one = trimOWS(one)
				if eqFold(one, "close") {
					r.close = true
				}
				if len(one) > 0 {
					r.drop = append(r.drop, one)
				}
			}
		case eqFold(name, "keep-alive"), eqFold(name, "proxy-connection"), eqFold(name, "proxy-authenticate"),
			eqFold(name, "proxy-authorization"), eqFold(name, "te"), eqFold(name, "upgrade"):
			skip = true
		case eqFold(name, "date"):
			r.date = true
		}
		r.lines = append(r.lines, full)
		r.skip = append(r.skip, skip)
	}
	if r.chunked {
		// Transfer-Encoding overrides Content-Length (RFC 9112 §6.3),
		// which is not forwarded.
		r.length = -1
		for i, l := range r.lines {
			if n, _, _ := cutByte(l, ':'); eqFold(n, "content-length") {
				r.skip[i] = true
			}
		}
	}
	for i, l := range r.lines {
		n, _, _ := cutByte(l, ':')
		for _, d := range r.drop {
			if bytes.EqualFold(n, d) {
				r.skip[i] = true
			}
		}
	}
	r.noBody = headReq || code < 200 || code == http.StatusNoContent || code == http.StatusNotModified
	if r.noBody {
		r.chunked = false
	}
	return true
}

// writeHead writes the response head to the client: HTTP/1.1, the
// backend's status and headers without the hop-by-hop ones, a Date if the
// backend sent none, chunked framing for a body that ends with the
// backend's connection, and Connection: close when closing (the client's
// connection closes after the answer).
func (r *backendResponse) writeHead(w sink, head []byte, closing bool) {
	eol := indexCRLF(head)
	_, _ = w.WriteString("HTTP/1.1")
	_, _ = w.Write(head[8 : eol+2])
	for i, l := range r.lines {
		if !r.skip[i] {
			_, _ = w.Write(l)
		}
	}
	if !r.date {
		_, _ = w.WriteString("Date: ")
		_, _ = w.Write(httpDate(time.Now()))
		_, _ = w.WriteString("\r\n")
	}
	if r.chunked || !r.noBody && r.length < 0 {
		_, _ = w.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if closing {
		_, _ = w.WriteString("Connection: close\r\n")
	}
	_, _ = w.WriteString("\r\n")
}

// writeError marks a failed write, to tell it from a failed read.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// copyN copies n bytes from src to dst, flushing dst whenever src has
// nothing buffered (so a slow body streams through).
func copyN(dst *bufio.Writer, src *bufio.Reader, n int64) (int64, error) {
	var done int64
	for done < n {
		if src.Buffered() == 0 {
			if err := dst.Flush(); err != nil {
				return done, &writeError{err}
			}
			if _, err := src.Peek(1); err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return done, err
			}
		}
		k := int(min(int64(src.Buffered()), n-done))
		p, _ := src.Peek(k)
		if _, err := dst.Write(p); err != nil {
			return done, &writeError{err}
		}
		_, _ = src.Discard(k)
		done += int64(k)
	}
	return done, nil
}

// copyChunked copies a chunked body as it is (sizes, extensions and
// trailers included), checking its framing; it returns the data bytes.
func copyChunked(dst *bufio.Writer, src *bufio.Reader) (int64, error) {
	var total int64
	for {
		line, err := readLine(src, dst)
		if err != nil {
			return total, err
		}
		size, ok := chunkSize(line)
		if !ok {
			return total, errors.New("malformed chunk size")
		}
		if _, err := dst.Write(line); err != nil {
			return total, &writeError{err}
		}
		if size == 0 {
			// Trailer lines, then the empty line.
			for {
				line, err := readLine(src, dst)
				if err != nil {
					return total, err
				}
				if _, err := dst.Write(line); err != nil {
					return total, &writeError{err}
				}
				if len(line) == 2 {
					return total, nil
				}
			}
		}
		n, err := copyN(dst, src, size)
		total += n
		if err != nil {
			return total, err
		}
		crlf, err := readLine(src, dst)
		if err != nil {
			return total, err
		}
		if len(crlf) != 2 {
			return total, errors.New("chunk not followed by CRLF")
		}
		_, _ = dst.Write(crlf)
	}
}

// readLine reads one CRLF-ended line of at most 4 KiB (the reader's
// buffer), flushing dst first if it has to wait.
func readLine(src *bufio.Reader, dst *bufio.Writer) ([]byte, error) {
	if src.Buffered() == 0 {
		if err := dst.Flush(); err != nil {
			return nil, &writeError{err}
		}
	}
	line, err := src.ReadSlice('\n')
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, errors.New("line not ended by CRLF")
	}
	return line, nil
}

// chunkSize parses HEX[;ext]CRLF.
func chunkSize(line []byte) (int64, bool) {
	var n int64
	i := 0
	for ; i < len(line) && isHex(line[i]); i++ {
		if i >= 15 {
			return 0, false
		}
		c := line[i]
		switch {
		case c >= 'a':
			c -= 'a' - 10
		case c >= 'A':
			c -= 'A' - 10
		default:
			c -= '0'
		}
		n = n<<4 | int64(c)
	}
	if i == 0 {
		return 0, false
	}
	rest := line[i : len(line)-2]
	if len(rest) > 0 && rest[0] != ';' {
		return 0, false
	}
	return n, validFieldValue(rest)
}

// copyChunking copies a body that ends with the backend's connection as
// chunks, so the client's connection stays open.
func copyChunking(dst *bufio.Writer, src *bufio.Reader) (int64, error) {
	var total int64
	for {
		if src.Buffered() == 0 {
			if err := dst.Flush(); err != nil {
				return total, &writeError{err}
			}
		}
		_, err := src.Peek(1)
		if err == io.EOF {
			_, err := dst.WriteString("0\r\n\r\n")
			if err != nil {
				return total, &writeError{err}
			}
			return total, nil
		}
		if err != nil {
			return total, err
		}
		k := src.Buffered()
		p, _ := src.Peek(k)
		_, _ = dst.WriteString(strconv.FormatInt(int64(k), 16))
		_, _ = dst.WriteString("\r\n")
		_, _ = dst.Write(p)
		if _, err := dst.WriteString("\r\n"); err != nil {
			return total, &writeError{err}
		}
		_, _ = src.Discard(k)
		total += int64(k)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// backendConn is a connection to a backend.
type backendConn struct {
	addr  string
	c     net.Conn
	r     *bufio.Reader
	w     *bufio.Writer
	head  []byte
	resp  backendResponse // of head
	since time.Time       // idle since
	armed bool            // a read deadline is set
}

// disarm clears the read deadline.
func (bc *backendConn) disarm() {
	if bc.armed {
		_ = bc.c.SetReadDeadline(time.Time{})
		bc.armed = false
	}
}

// readHead reads a response head into bc.head.
func (bc *backendConn) readHead() error {
	var st int
	var err error
	bc.head, st, err = readHead(bc.r, bc.head[:0], maxResponseHeaderBytes)
	switch {
	case err != nil:
		return err
	case st == headTooLong:
		return errors.New("response headers too large")
	case st == headBlank:
		return errors.New("malformed response from the backend")
	}
	return nil
}

func (bc *backendConn) close() { _ = bc.c.Close() }

// backendPool keeps idle backend connections by address, newest first.
type backendPool struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// clients is the number of the goroutine path's client connections
	// (len(fastServer.conns), stored as it changes): each holds at most one backend
	// connection at a time, so a burst leaves at most that many idle
	// (trim closes the excess later).
	clients atomic.Int64

	mu     sync.Mutex
	idle   map[string][]*backendConn
	closed bool
}

// get returns an idle connection to addr (reused true) or a new one. An
// idle connection is checked for a close by the backend first when it has
// been idle for checkIdleAfter, or always when check is set (a request
// with a body, which cannot be sent again if the connection was dead).
func (p *backendPool) get(addr string, now time.Time, check bool) (bc *backendConn, reused bool, err error) {
	for {
		p.mu.Lock()
		list := p.idle[addr]
		if len(list) == 0 {
			p.mu.Unlock()
			break
		}
		bc = list[len(list)-1]
		list[len(list)-1] = nil
		p.idle[addr] = list[:len(list)-1]
		p.mu.Unlock()
		idle := now.Sub(bc.since)
		check := check || idle >= checkIdleAfter
		if check {
			bc.disarm() // the peek of alive is a read
		}
		if idle < backendIdleTimeout && (!check || alive(bc.c)) {
			return bc, true, nil
		}
		bc.close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := p.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	return &backendConn{addr: addr, c: c, r: bufio.NewReaderSize(c, 4<<10), w: bufio.NewWriterSize(c, 4<<10)}, false, nil
}

// put keeps bc for the next request to its address.
func (p *backendPool) put(bc *backendConn, now time.Time) {
	bc.since = now
	p.mu.Lock()
	// Bytes after the response (a body sent for HEAD, say) would be
	// read as the next response: such a connection is not reused. (A
	// connection the event loop handed over may hold them still in
	// front of the socket.)
	if pc, ok := bc.c.(*prefixConn); ok && len(pc.pre) > 0 {
		p.mu.Unlock()
		bc.close()
		return
	}
	if p.closed || len(p.idle[bc.addr]) >= max(maxIdlePerBackend, int(p.clients.Load())) || bc.r.Buffered() > 0 {
		p.mu.Unlock()
		bc.close()
		return
	}
	p.idle[bc.addr] = append(p.idle[bc.addr], bc)
	p.mu.Unlock()
}

// trim closes the idle connections that timed out, and those beyond
// maxIdlePerBackend that have been idle for idleTrimAfter (a burst's).
func (p *backendPool) trim(now time.Time) {
	var drop []*backendConn
	p.mu.Lock()
	for addr, list := range p.idle {
		kept := trimIdle(list, now, false, func(bc *backendConn) time.Time { return bc.since }, nil,
			func(bc *backendConn) { drop = append(drop, bc) })
		if len(kept) == 0 {
			delete(p.idle, addr)
		} else {
			p.idle[addr] = kept
		}
	}
	p.mu.Unlock()
	for _, bc := range drop {
		bc.close()
	}
}

// trimIdle keeps of list, idle connections oldest first, those that
// neither timed out (backendIdleTimeout) nor are dead nor, beyond
// maxIdlePerBackend, have been idle for idleTrimAfter; the others (all
// with everything) go to drop, oldest first. The kept are list's first
// elements; the rest of list is cleared.
func trimIdle[C any](list []C, now time.Time, everything bool, since func(C) time.Time, dead func(C) bool, drop func(C)) []C {
	excess := len(list) - maxIdlePerBackend
	kept := list[:0]
	for _, c := range list {
		idle := now.Sub(since(c))
		if everything || idle >= backendIdleTimeout || dead != nil && dead(c) || excess > 0 && idle >= idleTrimAfter {
			drop(c)
			excess--
			continue
		}
		kept = append(kept, c)
	}
	clear(list[len(kept):])
	return kept
}

func (p *backendPool) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for addr, list := range p.idle {
		for _, bc := range list {
			bc.close()
		}
		delete(p.idle, addr)
	}
}

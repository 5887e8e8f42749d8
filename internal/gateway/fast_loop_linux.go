//go:build linux

// Over 400 lines on purpose: the event loop is one state machine per
// connection pair, and its hand-overs to the goroutine fast path are
// easier to review beside the states they leave.

package gateway

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// The event loop. On Linux the fast path's connections are served by
// event loops on epoll of their own (one per P Go would use; loopCount)
// instead of a goroutine each. Go's netpoller reads a socket before it
// waits on it, so every wait costs a read(2) that fails with EAGAIN (two
// per proxied request), and every wait parks and wakes a goroutine
// through the scheduler; measured, that was most of the gap to nginx
// left after the fast path (docs/benchmarks.md). The loop reads a socket
// only when epoll said it is readable and a short read says it is
// drained, writes with no scheduler in between, and so makes the system
// calls nginx makes.
//
// The loop serves the commonest exchange whole: a request the fast path
// takes, without a body, answered with a Content-Length body or none.
// Everything else leaves the loop for the goroutine fast path, with the
// bytes already read put back in front: a request with a body, or one the
// fast path hands to net/http, hands its client connection over before
// anything is sent (fallback); a response that is chunked, ends with the
// connection, is interim (1xx), malformed or has an oversized head hands
// over both connections with the request in progress (handover), and
// exchange.respond answers it as it answers any. Only the loop's own
// answers (refusals, backend failures and timeouts) are written here, by
// the code the goroutine path writes them with.

// Sizes of the loop's buffers.
const (
	evInitBuf      = 4 << 10
	evMaxHead      = 16 << 10 // a longer request head goes to the goroutine path
	evMaxRespHead  = 64 << 10 // a longer response head too
	evMaxPending   = 64 << 10 // unwritten answer bytes before reading stops
	evSweepEvery   = 250 * time.Millisecond
	evYieldEvery   = 200 * time.Microsecond
	evEventsPerRun = 128
)

const (
	epollET   = 1 << 31
	evReadish = syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLHUP | syscall.EPOLLERR
	evWritish = syscall.EPOLLOUT | syscall.EPOLLHUP | syscall.EPOLLERR
)

// evHandler is what a registered descriptor's events go to.
type evHandler interface{ event(ev uint32) }

// evLoop is one event loop: its epoll, its connections and its pool of
// idle backend connections, all touched by its goroutine only (others
// post to its inbox).
type evLoop struct {
	s      *fastServer
	epfd   int
	wakefd int // eventfd: the inbox has work

	mu    sync.Mutex
	inbox []func()
	dead  bool // the loop has ended: posts are dropped

	lst *evListener // its copy of the listening socket (fast_accept_linux.go)
	// load is the number of its clients, read by the other loops'
	// accepts to balance them (evListener.event).
	load atomic.Int32
	bufs [][]byte // buffers of evInitBuf bytes that closed clients left

	handlers map[int32]evHandler
	clients  map[*evClient]struct{}
	idle     map[string][]*evBackend
	closing  bool // shutting down: no new requests
	exit     bool
	now      time.Time
	swept    time.Time
	yielded  time.Time
	done     chan struct{}
}

// startLoops starts the event loops unless the loop cannot be used: a
// custom Dial (its connections need not be sockets) or
// Config.NoEventLoop.
func (s *fastServer) startLoops() ([]*evLoop, error) {
	if s.g.cfg.Dial != nil || s.g.cfg.NoEventLoop {
		return nil, nil
	}
	var loops []*evLoop
	for range loopCount() {
		l, err := newEvLoop(s)
		if err != nil {
			stopLoops(loops)
			return nil, err
		}
		loops = append(loops, l)
		go l.run()
	}
	return loops, nil
}

// loopCount is the number of event loops: one per P Go would use (the
// CPUs the process may run on, or its container's CPU limit, or
// GOMAXPROCS). The first call also gives the process one P more, for its
// goroutines: dials, the access log's writer, /metrics, connections
// handed over. A loop that always finds work never lets Go's scheduler
// poll the network, so with no spare P a dial's completion (and, when Go
// accepted for the loops, an accept's) waited for sysmon's poll, up to
// 10 ms, under load.
var loopCount = sync.OnceValue(func() int {
	n := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(n + 1)
	return n
})

func stopLoops(loops []*evLoop) {
	for _, l := range loops {
		l.stop()
	}
}

func newEvLoop(s *fastServer) (*evLoop, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	r, _, e := syscall.Syscall(syscall.SYS_EVENTFD2, 0, syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if e != 0 {
		_ = syscall.Close(epfd)
		return nil, os.NewSyscallError("eventfd2", e)
	}
	wakefd := int(r)
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(wakefd)}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, wakefd, &ev); err != nil {
		_ = syscall.Close(epfd)
		_ = syscall.Close(wakefd)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	return &evLoop{
		s: s, epfd: epfd, wakefd: wakefd,
		handlers: map[int32]evHandler{}, clients: map[*evClient]struct{}{},
		idle: map[string][]*evBackend{}, done: make(chan struct{}),
	}, nil
}

// post runs f on the loop's goroutine (or never, once the loop ended:
// its eventfd is closed then, and its number may be another file's).
func (l *evLoop) post(f func()) {
	l.mu.Lock()
	if l.dead {
		l.mu.Unlock()
		return
	}
	l.inbox = append(l.inbox, f)
	first := len(l.inbox) == 1
	l.mu.Unlock()
	if first {
		one := [8]byte{1}
		_, _ = syscall.Write(l.wakefd, one[:])
	}
}

func (l *evLoop) run() {
	defer close(l.done)
	events := make([]syscall.EpollEvent, evEventsPerRun)
	var inbox []func()
	busy := false // the last turn had events
	for !l.exit {
		n := 0
		if busy {
			// Before sleeping after a busy turn, hand the core to
			// whatever else is runnable on it — most often the backend,
			// woken by the requests just written — and look again:
			// its answers are often there by then, and the loop took
			// them without a sleep and a wake-up (a lower p99 in
			// every paired comparison, docs/benchmarks.md).
			if n = epollReady(l.epfd, events); n == 0 {
				schedYield()
				n = epollReady(l.epfd, events)
			}
		}
		if n == 0 {
			var err error
			n, err = syscall.EpollWait(l.epfd, events, int(evSweepEvery/time.Millisecond))
			if err != nil && err != syscall.EINTR {
				l.s.g.log.Error("gateway event loop failed", "error", err.Error())
				break
			}
		}
		busy = n > 0
		l.now = time.Now()
		for _, e := range events[:max(n, 0)] {
			if e.Fd == int32(l.wakefd) {
				var b [8]byte
				_, _ = syscall.Read(l.wakefd, b[:])
				continue
			}
			if h := l.handlers[e.Fd]; h != nil {
				h.event(e.Events)
			}
		}
		l.mu.Lock()
		inbox, l.inbox = l.inbox, inbox[:0]
		l.mu.Unlock()
		for i, f := range inbox {
			f()
			inbox[i] = nil
		}
		if l.now.Sub(l.swept) >= evSweepEvery {
			l.sweep()
		}
		// Let the process's other goroutines (the access log's writer,
		// dials, net/http's connections) in now and then.
		if l.now.Sub(l.yielded) >= evYieldEvery {
			l.yielded = l.now
			runtime.Gosched()
		}
	}
	if l.lst != nil {
		l.lst.close()
	}
	for c := range l.clients {
		c.close()
	}
	l.closeIdle(true)
	l.mu.Lock()
	l.dead = true
	l.inbox = nil
	l.mu.Unlock()
	_ = syscall.Close(l.epfd)
	_ = syscall.Close(l.wakefd)
}

// epollReady returns the events ready now, without waiting: a timeout
// of 0 never blocks, so it needs none of the runtime's bookkeeping for a
// blocking system call. An error (a closed epoll) reads as none, and the
// blocking wait that follows reports it.
func epollReady(epfd int, events []syscall.EpollEvent) int {
	// epoll_pwait without a signal mask is epoll_wait, on every
	// architecture (arm64 has no epoll_wait).
	r, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(epfd),
		uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return 0
	}
	return int(r)
}

// schedYield gives the thread's core to another runnable thread, if there
// is one, and returns at once if not.
func schedYield() { syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }

// register adds fd to the loop's epoll, edge-triggered, for h.
func (l *evLoop) register(fd int, h evHandler) error {
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLOUT | syscall.EPOLLRDHUP | epollET, Fd: int32(fd)}
	if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return err
	}
	l.handlers[int32(fd)] = h
	return nil
}

// forget removes fd from the loop (before it is closed or handed over:
// epoll keeps a descriptor whose file another descriptor still holds).
func (l *evLoop) forget(fd int) {
	delete(l.handlers, int32(fd))
	_ = syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_DEL, fd, nil)
}

// unregister forgets fd, about to be closed: the loop holds the only
// descriptor of its socket (accepted by the loop, or dialed by Go and
// copied, Go's closed), so closing it takes it out of epoll without an
// epoll_ctl of its own.
func (l *evLoop) unregister(fd int) {
	delete(l.handlers, int32(fd))
}

// release takes fd out of the loop as a net.Conn of Go's own.
func (l *evLoop) release(fd int) (net.Conn, error) {
	l.forget(fd)
	f := os.NewFile(uintptr(fd), "")
	c, err := net.FileConn(f)
	_ = f.Close()
	return c, err
}

// sweep closes what timed out: idle and slow clients as the goroutine
// path's deadlines would, backends that did not answer in
// BackendTimeout (504), and idle backend connections.
func (l *evLoop) sweep() {
	l.swept = l.now
	bt := l.s.g.cfg.BackendTimeout
	for c := range l.clients {
		switch {
		case c.be != nil && c.be.state < bsBody && l.now.Sub(c.start) >= bt:
			c.backendFailed(os.ErrDeadlineExceeded)
		case c.busy || c.dialing:
		case c.lo == len(c.in) && l.now.Sub(c.last) >= idleTimeout:
			c.close()
		case c.lo < len(c.in) && l.now.Sub(c.firstByte) >= readHeaderTimeout:
			c.close()
		}
	}
	l.closeIdle(false)
}

// closeIdle closes the idle backend connections that timed out or that
// the backend closed (all of them with everything), and those beyond
// maxIdlePerBackend that have been idle for idleTrimAfter.
func (l *evLoop) closeIdle(everything bool) {
	for addr, list := range l.idle {
		kept := trimIdle(list, l.now, everything, func(be *evBackend) time.Time { return be.since },
			func(be *evBackend) bool { return be.rd }, (*evBackend).close)
		if len(kept) == 0 {
			delete(l.idle, addr)
		} else {
			l.idle[addr] = kept
		}
	}
}

// shutdown stops accepting and new requests: idle clients close now,
// busy ones after their answer. The channel closes once the loop has
// stopped accepting.
func (l *evLoop) shutdown() <-chan struct{} {
	stopped := make(chan struct{})
	l.post(func() {
		defer close(stopped)
		l.closing = true
		if l.lst != nil {
			l.lst.close()
		}
		for c := range l.clients {
			if !c.busy && !c.dialing {
				c.closing = true
				if c.olo == len(c.out) {
					c.close()
				}
			}
		}
	})
	return stopped
}

// closeAll closes every connection, busy or not.
func (l *evLoop) closeAll() {
	l.post(func() {
		for c := range l.clients {
			c.close()
		}
		l.closeIdle(true)
	})
}

// stop ends the loop.
func (l *evLoop) stop() {
	l.post(func() { l.exit = true })
}

// dupFD duplicates c's descriptor (close-on-exec; non-blocking, as Go
// left the file).
func dupFD(c syscall.Conn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	nfd := -1
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		r, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_DUPFD_CLOEXEC, 0)
		nfd, errno = int(r), e
	}); err != nil {
		return -1, err
	}
	if errno != 0 {
		return -1, os.NewSyscallError("fcntl", errno)
	}
	return nfd, nil
}

func rawRead(fd int, p []byte) (int, syscall.Errno) {
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
		if e != syscall.EINTR {
			return int(r), e
		}
	}
}

func rawWrite(fd int, p []byte) (int, syscall.Errno) {
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
		if e != syscall.EINTR {
			return int(r), e
		}
	}
}

// opError is errno as net reports a failed read or write.
func opError(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Err: os.NewSyscallError(op, errno)}
}

// outBuf is a byte slice the heads are written into (a sink).
type outBuf []byte

func (b *outBuf) Write(p []byte) (int, error)       { *b = append(*b, p...); return len(p), nil }
func (b *outBuf) WriteString(s string) (int, error) { *b = append(*b, s...); return len(s), nil }
func (b *outBuf) WriteByte(c byte) error            { *b = append(*b, c); return nil }

// evClient is a client connection served by a loop.
type evClient struct {
	fastConn // the caches, the request, its info
	l        *evLoop
	fd       int
	free     func() // the listener's slot
	in       []byte // read; in[lo:] not consumed yet
	lo       int
	out      outBuf // to write; out[olo:] not written yet
	olo      int
	rd, wr   bool // readable, writable, as far as epoll and short reads say

	busy       bool // a request is in progress
	dialing    bool // its backend connection is being dialed
	be         *evBackend
	headLen    int
	start      time.Time
	host, path string
	code       int
	bytes      int64
	firstByte  time.Time // when the head in progress began to arrive
	closing    bool      // close once out is written
	gone       bool
	serving    bool // in serve
}

// add serves c, whose l.load counts it already.
func (l *evLoop) add(c *evClient) {
	if l.closing || l.register(c.fd, c) != nil {
		_ = syscall.Close(c.fd)
		c.free()
		l.load.Add(-1)
		l.s.wg.Done()
		return
	}
	if c.in == nil {
		c.in, c.out = l.getBuf(), l.getBuf()
	}
	l.clients[c] = struct{}{}
	// Not read yet: a client's request seldom comes with its connection,
	// and epoll reports a socket readable when it is added if it is.
	c.last, c.rd, c.wr = l.now, false, true
	c.serve()
}

func (c *evClient) event(ev uint32) {
	if ev&evReadish != 0 {
		c.rd = true
	}
	if ev&evWritish != 0 {
		c.wr = true
	}
	if c.wr && c.olo < len(c.out) && !c.flush() {
		return
	}
	if !c.busy && !c.dialing {
		c.serve()
	}
}

// flush writes what it can of out; false when the client is gone.
func (c *evClient) flush() bool {
	for c.olo < len(c.out) {
		if !c.wr {
			return true
		}
		n, errno := rawWrite(c.fd, c.out[c.olo:])
		if errno == syscall.EAGAIN {
			c.wr = false
			return true
		}
		if errno != 0 {
			if c.be != nil {
				c.bodyBroke("copying the response broke off: " + opError("write", errno).Error())
			} else {
				c.close()
			}
			return false
		}
		c.olo += n
	}
	c.out, c.olo = c.out[:0], 0
	if c.closing {
		c.close()
		return false
	}
	if be := c.be; be != nil && be.paused {
		be.paused = false
		be.readBody()
		return !c.gone
	}
	return true
}

// serve reads and answers the client's requests until one waits on a
// backend, the client has nothing more to read, or the connection
// leaves the loop.
func (c *evClient) serve() {
	if c.serving {
		return // done, called by serve's own request: serve goes on
	}
	c.serving = true
	defer func() { c.serving = false }()
	for !c.busy && !c.dialing && !c.gone && !c.closing {
		if len(c.out)-c.olo > evMaxPending {
			return // the client reads slowly: its answers first
		}
		max := c.g.cfg.MaxHeaderBytes
		n, st := headEnd(c.in[c.lo:])
		switch {
		case st == headBlank || n > max:
			c.fallback()
			return
		case st == headComplete:
			c.request(n)
			continue
		case len(c.in)-c.lo > max:
			c.fallback()
			return
		}
		if c.lo < len(c.in) && c.firstByte.IsZero() {
			c.firstByte = c.l.now
		}
		if !c.rd || !c.read() {
			return
		}
	}
}

// read reads what the client sent; false when the connection left the
// loop.
func (c *evClient) read() bool {
	if c.lo > 0 {
		c.in = c.in[:copy(c.in, c.in[c.lo:])]
		c.lo = 0
	}
	in, n, short, errno, full := readInto(c.fd, c.in, evMaxHead)
	c.in = in
	switch {
	case full:
		c.fallback()
		return false
	case errno == syscall.EAGAIN:
		c.rd = false
		return true
	case errno != 0 || n == 0:
		// Closed or reset: as the goroutine path, without an answer.
		c.close()
		return false
	}
	if short {
		c.rd = false
	}
	return true
}

// readInto reads from fd into buf's spare room, doubling buf first when
// it is full, up to max: full says buf was full at max and nothing was
// read; short that the read did not fill the room (the socket is
// drained); buf comes back with the bytes read appended.
func readInto(fd int, buf []byte, max int) (out []byte, n int, short bool, errno syscall.Errno, full bool) {
	if len(buf) == cap(buf) {
		if cap(buf) >= max {
			return buf, 0, false, 0, true
		}
		buf = append(buf, make([]byte, cap(buf))...)[:len(buf)]
	}
	room := buf[len(buf):cap(buf)]
	n, errno = rawRead(fd, room)
	if errno != 0 || n <= 0 {
		return buf, 0, false, errno, false
	}
	return buf[:len(buf)+n], n, n < len(room), 0, false
}

// request answers the head of n bytes at in[lo:], or leaves it to the
// goroutine path.
func (c *evClient) request(n int) {
	g, fc := c.g, &c.fastConn
	req, info := &fc.req, &fc.info
	c.start = time.Now()
	if !req.parse(c.in[c.lo:c.lo+n]) || req.bodyLen != 0 {
		c.fallback()
		return
	}
	*info = reqInfo{}
	c.host, c.path = fc.strings(req.host, req.path)
	if routed, ok := g.routeOf(c.host, c.path, "", info); !routed || !ok {
		c.fallback()
		return
	}
	c.headLen, c.code, c.bytes = n, 0, 0
	if no := g.admit(req.auth, fc.verify, fc.backendAddr, info); no != nil {
		c.deny(no.code, no.body, no.header, no.value)
		return
	}
	if !g.tenants.take(info.route.Tenant) {
		info.reason = "tenant over its concurrency limit"
		g.metrics.limited(info.route.Tenant)
		c.deny(http.StatusServiceUnavailable, bodyBusy, "Retry-After", strconv.Itoa(RetryAfter))
		return
	}
	c.busy = true
	c.exchange(0)
}

// deny answers the request with a body of the gateway's own, as the
// goroutine path's answer.deny does.
func (c *evClient) deny(code int, body, header, value string) {
	c.code = code
	writeDeny(&c.out, code, body, header, value, c.req.method == http.MethodHead, c.req.close)
	c.done()
}

// done ends the request in progress: its log line, its head consumed,
// the answer written.
func (c *evClient) done() {
	c.giveTenant()
	c.last = c.g.logRequest(c.start, c.req.method, c.host, c.path, c.code, c.bytes, c.remote, &c.info)
	c.lo += c.headLen
	c.headLen = 0
	c.firstByte = time.Time{}
	if c.lo == len(c.in) {
		c.in, c.lo = c.in[:0], 0
	} else {
		c.firstByte = c.l.now
	}
	if c.l.closing || c.req.close {
		c.closing = true
	}
	if !c.flush() {
		return
	}
	if len(c.out) == 0 && cap(c.out) > evMaxPending {
		c.out = nil // a large answer's buffer is not kept while idle
	}
	// The next request, if the client sent it already.
	c.serve()
}

// exchange sends the request to a backend connection of the pool, or
// dials one.
func (c *evClient) exchange(attempt int) {
	l := c.l
	addr := c.info.addr
	for list := l.idle[addr]; len(list) > 0; list = l.idle[addr] {
		be := list[len(list)-1]
		list[len(list)-1] = nil
		l.idle[addr] = list[:len(list)-1]
		// Readable while idle: the backend closed it or sent bytes
		// unasked. Either way it is not reused.
		if be.rd || l.now.Sub(be.since) >= backendIdleTimeout {
			be.close()
			continue
		}
		c.send(be, true, attempt)
		return
	}
	c.dialing = true
	dial := l.s.pool.dial
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := dial(ctx, "tcp", addr)
		cancel()
		fd := -1
		if err == nil {
			tc, ok := conn.(*net.TCPConn)
			if !ok {
				err = errors.New("not a TCP connection")
			} else if fd, err = dupFD(tc); err == nil {
				_ = tc.Close()
			}
			if err != nil {
				_ = conn.Close()
			}
		}
		l.post(func() { c.dialed(addr, fd, err, attempt) })
	}()
}

// dialed continues the exchange with a connection just dialed.
func (c *evClient) dialed(addr string, fd int, err error, attempt int) {
	c.dialing = false
	if c.gone {
		if fd >= 0 {
			_ = syscall.Close(fd)
		}
		return
	}
	if err != nil {
		c.backendFailed(err)
		return
	}
	be := &evBackend{l: c.l, fd: fd, addr: addr, in: make([]byte, 0, evInitBuf), wr: true}
	if err := c.l.register(fd, be); err != nil {
		_ = syscall.Close(fd)
		c.backendFailed(err)
		return
	}
	c.send(be, false, attempt)
}

func (c *evClient) send(be *evBackend, reused bool, attempt int) {
	c.be, be.c = be, c
	be.reused, be.attempt = reused, attempt
	be.in, be.out, be.olo = be.in[:0], be.out[:0], 0
	writeRequestHead(&be.out, &c.req, &c.info, c.ip)
	be.state = bsSend
	be.step()
}

// backendFailed answers a request whose backend failed before its
// answer began, as exchange.headFailed and answer.conclude do.
func (c *evClient) backendFailed(err error) {
	c.dropBackend()
	var ex exchange
	ex.s = c.l.s
	ex.headFailed(false, err)
	f := ex.failed
	c.info.reason = f.reason
	if f.retry {
		c.deny(f.code, f.body, "Retry-After", strconv.Itoa(RetryAfter))
		return
	}
	c.deny(f.code, f.body, "", "")
}

// bodyBroke ends a request whose answer broke off after it began: the
// client's connection closes with what was written.
func (c *evClient) bodyBroke(reason string) {
	c.info.reason = reason
	c.dropBackend()
	c.closing = true
	c.done()
	if !c.gone {
		c.close()
	}
}

// dropBackend closes the backend connection of the exchange in
// progress, if any (its answer cannot be finished).
func (c *evClient) dropBackend() {
	if be := c.be; be != nil {
		c.be, be.c = nil, nil
		be.close()
	}
}

// giveTenant gives back the tenant's slot the request in progress holds,
// if it holds one.
func (c *evClient) giveTenant() {
	if c.busy {
		c.g.tenants.give(c.info.route.Tenant)
		c.busy = false
	}
}

// close closes the connection (and the exchange in progress).
func (c *evClient) close() {
	if c.gone {
		return
	}
	c.gone = true
	c.dropBackend()
	c.giveTenant()
	c.l.unregister(c.fd)
	_ = syscall.Close(c.fd)
	c.free()
	delete(c.l.clients, c)
	c.l.load.Add(-1)
	c.l.putBuf(c.in)
	c.l.putBuf(c.out)
	c.in, c.out = nil, nil
	c.l.s.wg.Done()
}

// evMaxFreeBufs bounds the buffers a loop keeps for its next clients.
const evMaxFreeBufs = 256

// getBuf is an empty buffer of evInitBuf bytes: one a closed client left,
// or a new one. A client per request (Connection: close) allocated two
// each, 70 MB/s of garbage at 9,000 requests a second.
func (l *evLoop) getBuf() []byte {
	if n := len(l.bufs); n > 0 {
		b := l.bufs[n-1]
		l.bufs[n-1] = nil
		l.bufs = l.bufs[:n-1]
		return b
	}
	return make([]byte, 0, evInitBuf)
}

// putBuf keeps b for another client if it is of the size getBuf gives;
// nothing may use b after.
func (l *evLoop) putBuf(b []byte) {
	if cap(b) == evInitBuf && len(l.bufs) < evMaxFreeBufs {
		l.bufs = append(l.bufs, b[:0])
	}
}

// leave takes the client out of the loop as a connection of Go's own,
// with the bytes read and not consumed from pos on put back in front
// and the answers not yet written written first.
func (c *evClient) leave(pos int) (*fastConn, bool) {
	l := c.l
	pre := append([]byte(nil), c.in[pos:]...)
	pending := append([]byte(nil), c.out[c.olo:]...)
	c.gone = true
	delete(l.clients, c)
	l.load.Add(-1)
	conn, err := l.release(c.fd)
	if err != nil {
		_ = syscall.Close(c.fd)
		c.free()
		l.s.wg.Done()
		return nil, false
	}
	if len(pending) > 0 {
		// Written by the goroutine, before anything it answers.
		conn = &pendingConn{Conn: conn, pending: pending}
	}
	lc := &limitedConn{Conn: conn, free: c.free}
	fc := newFastConn(c.g, &prefixConn{Conn: lc, pre: pre})
	fc.remote, fc.ip = c.remote, c.ip
	return fc, true
}

// fallback hands the client connection, the request at in[lo:] first,
// to the goroutine fast path (which hands to net/http what it does not
// take).
func (c *evClient) fallback() {
	c.giveTenant()
	fc, ok := c.leave(c.lo)
	if !ok {
		return
	}
	go c.l.s.serveConn(fc)
}

// handover hands the exchange in progress, both connections, to the
// goroutine fast path, which answers it as any (exchange.respond).
func (c *evClient) handover() {
	l, be := c.l, c.be
	c.be, be.c = nil, nil
	head := append([]byte(nil), c.in[c.lo:c.lo+c.headLen]...)
	info, start := c.info, c.start
	fc, ok := c.leave(c.lo + c.headLen)
	if !ok {
		c.g.tenants.give(info.route.Tenant)
		be.close()
		return
	}
	bpre := append([]byte(nil), be.in...)
	bconn, err := l.release(be.fd)
	be.fd = -1
	fc.head = append(fc.head[:0], head...)
	fc.req.parse(fc.head)
	fc.info = info
	if err != nil {
		// Out of descriptors: answered as a failed backend.
		go l.s.serveFrom(fc, func() bool { return l.s.resume(fc, nil, start, err) })
		return
	}
	bc := &backendConn{addr: be.addr, c: &prefixConn{Conn: bconn, pre: bpre}}
	bc.r = bufio.NewReaderSize(bc.c, 4<<10)
	bc.w = bufio.NewWriterSize(bc.c, 4<<10)
	go l.s.serveFrom(fc, func() bool { return l.s.resume(fc, bc, start, nil) })
}

// pendingConn writes pending before the first write through it: the
// answers the loop had not written yet when the connection left it.
type pendingConn struct {
	net.Conn
	pending []byte
}

func (c *pendingConn) Write(p []byte) (int, error) {
	if len(c.pending) > 0 {
		if _, err := c.Conn.Write(c.pending); err != nil {
			return 0, err
		}
		c.pending = nil
	}
	return c.Conn.Write(p)
}

// Backend connection states.
const (
	bsIdle = iota
	bsSend // writing the request
	bsHead // reading the response head
	bsBody // copying the body
)

// evBackend is a backend connection served by a loop.
type evBackend struct {
	l       *evLoop
	fd      int
	addr    string
	c       *evClient // of the exchange in progress
	state   int
	in      []byte // the response head as read (and what followed it)
	out     outBuf // the request head
	olo     int
	rd, wr  bool
	paused  bool // the client's answer is behind: reading waits
	reused  bool
	attempt int
	since   time.Time // idle since
	resp    backendResponse
	left    int64 // body bytes to come
	closed  bool
}

func (be *evBackend) event(ev uint32) {
	if ev&evReadish != 0 {
		be.rd = true
	}
	if ev&evWritish != 0 {
		be.wr = true
	}
	if be.c != nil {
		be.step()
	}
}

func (be *evBackend) step() {
	switch be.state {
	case bsSend:
		for be.olo < len(be.out) {
			if !be.wr {
				return
			}
			n, errno := rawWrite(be.fd, be.out[be.olo:])
			if errno == syscall.EAGAIN {
				be.wr = false
				return
			}
			if errno != 0 {
				be.broke(opError("write", errno))
				return
			}
			be.olo += n
		}
		be.state = bsHead
		fallthrough
	case bsHead:
		if be.rd {
			be.readHead()
		}
	case bsBody:
		if be.rd && !be.paused {
			be.readBody()
		}
	}
}

// broke handles a failed write or read before any of the answer: a
// pooled connection the backend closed while idle is replaced once (as
// exchange.run does), otherwise the request is answered as failed.
func (be *evBackend) broke(err error) {
	c := be.c
	c.be, be.c = nil, nil
	be.close()
	if be.reused && be.attempt == 0 && len(be.in) == 0 && closedByPeer(err) {
		c.exchange(1)
		return
	}
	c.backendFailed(err)
}

func (be *evBackend) readHead() {
	for {
		in, n, short, errno, full := readInto(be.fd, be.in, evMaxRespHead)
		be.in = in
		switch {
		case full:
			be.c.handover()
			return
		case errno == syscall.EAGAIN:
			be.rd = false
			return
		case errno != 0:
			be.broke(opError("read", errno))
			return
		case n == 0:
			be.broke(io.EOF)
			return
		}
		if short {
			be.rd = false
		}
		if end, st := headEnd(be.in); st != headPartial {
			be.gotHead(end, st)
			return
		}
		if !be.rd {
			return
		}
	}
}

// gotHead answers with the response head of n bytes in be.in, or hands
// the exchange over when the loop does not copy its kind of answer.
func (be *evBackend) gotHead(n, st int) {
	c := be.c
	resp := &be.resp
	if st != headComplete || !resp.parse(be.in[:n], c.req.method == http.MethodHead) ||
		resp.code < 200 || !resp.noBody && resp.length < 0 {
		c.handover()
		return
	}
	c.code = resp.code
	resp.writeHead(&c.out, be.in[:n], c.req.close)
	rest := be.in[n:]
	be.left = 0
	if !resp.noBody {
		be.left = resp.length
	}
	take := min(int64(len(rest)), be.left)
	c.out = append(c.out, rest[:take]...)
	c.bytes, be.left = take, be.left-take
	stray := int64(len(rest)) > take
	if be.left == 0 {
		be.finish(!resp.close && !stray)
		return
	}
	be.state = bsBody
	if !c.flush() {
		return
	}
	be.readBody()
}

// readBody copies the body as it comes, straight into the client's
// answer buffer; it waits while the client has evMaxPending unwritten.
func (be *evBackend) readBody() {
	c := be.c
	for be.left > 0 {
		if len(c.out)-c.olo >= evMaxPending {
			be.paused = true
			return
		}
		if !be.rd {
			return
		}
		if cap(c.out)-len(c.out) < evInitBuf {
			c.out = append(c.out, make([]byte, max(evInitBuf*4, cap(c.out)))...)[:len(c.out)]
		}
		space := c.out[len(c.out):cap(c.out)]
		if int64(len(space)) > be.left {
			space = space[:be.left]
		}
		n, errno := rawRead(be.fd, space)
		switch {
		case errno == syscall.EAGAIN:
			be.rd = false
			return
		case errno != 0:
			c.bodyBroke("copying the response broke off: " + opError("read", errno).Error())
			return
		case n == 0:
			c.bodyBroke("copying the response broke off: " + io.ErrUnexpectedEOF.Error())
			return
		}
		if n < len(space) {
			be.rd = false
		}
		c.out = c.out[:len(c.out)+n]
		c.bytes += int64(n)
		be.left -= int64(n)
		if be.left > 0 && !c.flush() {
			return
		}
	}
	be.finish(!be.resp.close)
}

// finish ends the exchange: the connection goes back to the pool when it
// can serve another.
func (be *evBackend) finish(keep bool) {
	c, l := be.c, be.l
	c.be, be.c = nil, nil
	be.state = bsIdle
	// A burst may leave more connections idle than maxIdlePerBackend: up
	// to one per client connection of the loop (each holds at most one
	// backend connection at a time), trimmed by the sweep once idle for
	// idleTrimAfter. Closing them at once made a loop serving more than
	// maxIdlePerBackend requests at a time redial thousands of
	// connections a second (2,000/s at 256 clients, docs/benchmarks.md).
	if keep && !l.closing && len(l.idle[be.addr]) < max(maxIdlePerBackend, len(l.clients)) {
		if cap(be.in) > evInitBuf*4 {
			be.in = make([]byte, 0, evInitBuf)
		}
		be.since = l.now
		l.idle[be.addr] = append(l.idle[be.addr], be)
	} else {
		be.close()
	}
	c.done()
}

func (be *evBackend) close() {
	if be.closed || be.fd < 0 {
		return
	}
	be.closed = true
	be.l.unregister(be.fd)
	_ = syscall.Close(be.fd)
}

// ended closes when the loop's goroutine has returned.
func (l *evLoop) ended() <-chan struct{} { return l.done }

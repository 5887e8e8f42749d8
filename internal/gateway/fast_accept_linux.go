//go:build linux

package gateway

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// Accepting in the loops. Go's Accept registers every new socket with its
// own poller, sets TCP keep-alive (four setsockopt calls) and wakes the
// accepting goroutine; handing the socket to a loop then cost a dup, a
// close (and Go's poller's deregistration) and a wake-up of the loop
// through its inbox: about a fifth of the gateway's CPU when every
// request came on a new connection (docs/benchmarks.md). Instead each
// loop has a copy of the listening socket in its epoll and accepts from
// it itself, as nginx's workers do: accept4, TCP_NODELAY (which Go sets
// too), register (the first read waits for epoll's event). Idle clients
// are closed by the loop's sweep, so kernel keep-alive probes are not
// needed.
//
// Every loop waits on the socket (level-triggered, not EPOLLEXCLUSIVE,
// which wakes the first loop registered whether or not it is busy); a
// new connection wakes the idle loops, one accepts it and the others
// find nothing. A busy loop accepts only when it gets back to epoll, so
// connections go to the loops that have time for them; but a loop that
// happened to be idle through a burst of connections would keep them
// all, so one that holds evBalanceSlack clients more than the least
// loaded loop passes a new connection to it (through its inbox).

// evAcceptsPerRun bounds the connections a loop accepts per event, so a
// flood of connections does not starve the ones it serves.
const evAcceptsPerRun = 16

// evBalanceSlack is how many clients more than another loop a loop
// holds before it passes new connections on.
const evBalanceSlack = 8

// evListener is a loop's copy of the listening socket.
type evListener struct {
	l     *evLoop
	loops []*evLoop // all of the server's, this one too
	fd    int
	slots chan struct{} // MaxConns (limitListener's), nil for no bound
	held  bool          // a slot was taken while the listener waited for one
	armed bool          // in the loop's epoll
	shut  bool
	delay time.Duration          // the back-off after running out of descriptors
	sa    syscall.RawSockaddrAny // the peer of the connection accepted last
	// freeSlot is free as a func value, made once (not per connection).
	freeSlot func()
}

// listenInLoops gives every loop a copy of ln's socket to accept on and
// closes ln's own descriptor (Go's poller would wake on every new
// connection for nothing); false when ln is not a TCP listener or cannot
// be copied (the caller accepts).
func (s *fastServer) listenInLoops(ln net.Listener) bool {
	var slots chan struct{}
	inner := ln
	if lim, ok := ln.(*limited); ok {
		inner, slots = lim.Listener, lim.slots
	}
	tl, ok := inner.(*net.TCPListener)
	if !ok || len(s.loops) == 0 {
		return false
	}
	fds := make([]int, 0, len(s.loops))
	for range s.loops {
		fd, err := dupFD(tl)
		if err != nil {
			for _, fd := range fds {
				_ = syscall.Close(fd)
			}
			s.g.log.Warn("event loops cannot accept; accepting with a goroutine", "error", err.Error())
			return false
		}
		fds = append(fds, fd)
	}
	for i, l := range s.loops {
		el := &evListener{l: l, loops: s.loops, fd: fds[i], slots: slots}
		el.freeSlot = el.free
		l.post(func() { l.listen(el) })
	}
	_ = tl.Close()
	return true
}

// listen starts accepting on el.
func (l *evLoop) listen(el *evListener) {
	if l.closing {
		el.close()
		return
	}
	l.lst = el
	el.arm()
}

func (el *evListener) arm() {
	if el.shut || el.armed {
		return
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(el.fd)}
	if err := syscall.EpollCtl(el.l.epfd, syscall.EPOLL_CTL_ADD, el.fd, &ev); err != nil {
		el.l.s.g.log.Error("event loop cannot wait for connections", "error", err.Error())
		return
	}
	el.l.handlers[int32(el.fd)] = el
	el.armed = true
}

func (el *evListener) disarm() {
	if el.armed {
		el.l.forget(el.fd)
		el.armed = false
	}
}

// close stops accepting: connections not accepted yet are left to the
// other loops' copies, or reset with the last one.
func (el *evListener) close() {
	if el.shut {
		return
	}
	el.disarm()
	el.shut = true
	_ = syscall.Close(el.fd)
	if el.held {
		el.held = false
		<-el.slots
	}
}

// event accepts the connections waiting, up to evAcceptsPerRun.
func (el *evListener) event(uint32) {
	l := el.l
	for range evAcceptsPerRun {
		if el.slots != nil && !el.held {
			select {
			case el.slots <- struct{}{}:
			default:
				el.waitForSlot()
				return
			}
		}
		el.held = false
		fd, err := rawAccept(el.fd, &el.sa)
		if err != nil {
			if el.slots != nil {
				<-el.slots
			}
			switch err {
			case syscall.EAGAIN:
				return
			case syscall.EINTR, syscall.ECONNABORTED:
				// A connection reset before it was accepted: the next.
				continue
			}
			// Out of descriptors or memory (EMFILE, ENFILE, ENOBUFS,
			// ENOMEM): back off as Serve's loop and net/http do.
			el.backOff(err)
			return
		}
		el.delay = 0
		_ = syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
		remote, ip := sockaddrText(&el.sa)
		to := el.leastLoaded()
		to.load.Add(1)
		c := &evClient{l: to, fd: fd, free: el.freeSlot}
		c.fastConn = fastConn{g: l.s.g, remote: remote, ip: ip}
		l.s.wg.Add(1)
		if to == l {
			l.add(c)
		} else {
			to.post(func() { to.add(c) })
		}
	}
}

// leastLoaded is the loop a new connection goes to: this one unless it
// holds evBalanceSlack clients more than another.
func (el *evListener) leastLoaded() *evLoop {
	to, least := el.l, el.l.load.Load()
	if len(el.loops) < 2 {
		return to
	}
	mine := least
	for _, o := range el.loops {
		if n := o.load.Load(); n < least {
			to, least = o, n
		}
	}
	if mine-least <= evBalanceSlack {
		return el.l
	}
	return to
}

// free gives back a connection's slot.
func (el *evListener) free() {
	if el.slots != nil {
		<-el.slots
	}
}

// waitForSlot stops accepting until a connection closes and gives its
// slot back (the new ones wait in the kernel's backlog, as behind
// limitListener's Accept).
func (el *evListener) waitForSlot() {
	el.disarm()
	l := el.l
	go func() {
		select {
		case el.slots <- struct{}{}:
		case <-l.done:
			return
		}
		l.post(func() {
			if el.shut {
				<-el.slots
				return
			}
			el.held = true
			el.arm()
		})
	}()
}

// backOff stops accepting for a while after err.
func (el *evListener) backOff(err error) {
	el.delay = min(max(2*el.delay, 5*time.Millisecond), time.Second)
	l := el.l
	l.s.g.log.Warn("accept failed; retrying", "error", err.Error(), "in", el.delay.String())
	el.disarm()
	time.AfterFunc(el.delay, func() { l.post(el.arm) })
}

// rawAccept accepts a connection on the non-blocking socket fd
// (non-blocking, close-on-exec), its peer's address into sa: accept4
// without syscall.Accept4's two allocations per connection.
func rawAccept(fd int, sa *syscall.RawSockaddrAny) (int, error) {
	for {
		n := uint32(syscall.SizeofSockaddrAny)
		r, _, e := syscall.RawSyscall6(syscall.SYS_ACCEPT4, uintptr(fd), uintptr(unsafe.Pointer(sa)), uintptr(unsafe.Pointer(&n)),
			syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0, 0)
		switch e {
		case 0:
			return int(r), nil
		case syscall.EINTR:
			continue
		}
		return -1, e
	}
}

// sockaddrText is a peer's address as net's RemoteAddr().String() and
// its host as net.SplitHostPort gives it (IPv4-mapped IPv6 addresses as
// IPv4, zones by name): one allocation, the host a part of it.
func sockaddrText(sa *syscall.RawSockaddrAny) (remote, ip string) {
	var ap netip.AddrPort
	switch sa.Addr.Family {
	case syscall.AF_INET:
		a := (*syscall.RawSockaddrInet4)(unsafe.Pointer(sa))
		ap = netip.AddrPortFrom(netip.AddrFrom4(a.Addr), ntohs(a.Port))
	case syscall.AF_INET6:
		a := (*syscall.RawSockaddrInet6)(unsafe.Pointer(sa))
		addr := netip.AddrFrom16(a.Addr).Unmap()
		if a.Scope_id != 0 && addr.Is6() {
			zone := strconv.Itoa(int(a.Scope_id))
			if ifi, err := net.InterfaceByIndex(int(a.Scope_id)); err == nil {
				zone = ifi.Name
			}
			addr = addr.WithZone(zone)
		}
		ap = netip.AddrPortFrom(addr, ntohs(a.Port))
	default:
		return "", ""
	}
	remote = ap.String()
	ip = remote[:strings.LastIndexByte(remote, ':')]
	if ap.Addr().Is6() {
		ip = ip[1 : len(ip)-1]
	}
	return remote, ip
}

// ntohs is a port as the kernel stores it (network byte order).
func ntohs(p uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(&p))
	return uint16(b[0])<<8 | uint16(b[1])
}

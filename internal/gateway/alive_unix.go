//go:build unix

package gateway

import (
	"net"
	"syscall"
)

// alive reports whether an idle backend connection is still open: one
// non-blocking peek, which sees the backend's close (EOF or a reset). An
// idle backend that sent bytes unasked is not reused either.
func alive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && open
}

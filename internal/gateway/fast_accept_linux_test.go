//go:build linux

package gateway

import (
	"encoding/binary"
	"net"
	"strconv"
	"syscall"
	"testing"
	"unsafe"
)

// A peer's address as the loop writes it (the access log, X-Forwarded-For)
// is what net writes for the same address: for real connections, the
// sockaddr accept4 gave against the client's LocalAddr (IPv4, IPv6, and
// an IPv4 client of a dual-stack listener); for link-local addresses
// with a zone, against net.TCPAddr's String.
func TestSockaddrTextMatchesNet(t *testing.T) {
	for _, c := range []struct{ listen, dial string }{
		{"127.0.0.1:0", "127.0.0.1"},
		{"[::1]:0", "::1"},
		{"[::]:0", "127.0.0.1"}, // accept4 says ::ffff:127.0.0.1
	} {
		ln, err := net.Listen("tcp", c.listen)
		if err != nil {
			t.Logf("%s: %v (no IPv6 here?); not checked", c.listen, err)
			continue
		}
		defer ln.Close()
		fd, err := dupFD(ln.(*net.TCPListener))
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(fd)
		conn, err := net.Dial("tcp", net.JoinHostPort(c.dial, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var sa syscall.RawSockaddrAny
		nfd, err := rawAccept(fd, &sa)
		if err != nil {
			t.Fatalf("%s: accept: %v", c.listen, err)
		}
		_ = syscall.Close(nfd)
		remote, ip := sockaddrText(&sa)
		want := conn.LocalAddr().String()
		host, _, _ := net.SplitHostPort(want)
		if remote != want || ip != host {
			t.Errorf("listening on %s, a client from %s: %q %q, net says %q %q", c.listen, c.dial, remote, ip, want, host)
		}
	}

	lo, err := net.InterfaceByIndex(1)
	if err != nil {
		t.Fatal(err)
	}
	for _, z := range []struct {
		id   uint32
		name string
	}{{uint32(lo.Index), lo.Name}, {999999, "999999"}} {
		var sa syscall.RawSockaddrAny
		a := (*syscall.RawSockaddrInet6)(unsafe.Pointer(&sa))
		a.Family, a.Scope_id = syscall.AF_INET6, z.id
		a.Addr = [16]byte{0: 0xfe, 1: 0x80, 15: 9}
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&a.Port))[:], 8080)
		remote, ip := sockaddrText(&sa)
		want := (&net.TCPAddr{IP: net.ParseIP("fe80::9"), Port: 8080, Zone: z.name}).String()
		host, _, _ := net.SplitHostPort(want)
		if remote != want || ip != host {
			t.Errorf("zone %d: %q %q, net says %q %q", z.id, remote, ip, want, host)
		}
	}
}

//go:build linux

package gateway

import (
	"net"
	"syscall"
	"testing"
)

// A peer's address as the loop writes it (the access log, X-Forwarded-For)
// is what net's RemoteAddr().String() would have been for the same
// sockaddr, and its host what net.SplitHostPort takes from it.
func TestSockaddrTextMatchesNet(t *testing.T) {
	lo, err := net.InterfaceByIndex(1)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		sa   syscall.Sockaddr
		want *net.TCPAddr
	}{
		{&syscall.SockaddrInet4{Port: 41000, Addr: [4]byte{10, 1, 2, 3}}, &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 41000}},
		{&syscall.SockaddrInet6{Port: 443, Addr: [16]byte{15: 1}}, &net.TCPAddr{IP: net.IPv6loopback, Port: 443}},
		// A dual-stack listener's IPv4 client.
		{&syscall.SockaddrInet6{Port: 80, Addr: [16]byte{10: 0xff, 11: 0xff, 12: 192, 13: 0, 14: 2, 15: 7}}, &net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7"), Port: 80}},
		{&syscall.SockaddrInet6{Port: 8080, ZoneId: uint32(lo.Index), Addr: [16]byte{0: 0xfe, 1: 0x80, 15: 9}}, &net.TCPAddr{IP: net.ParseIP("fe80::9"), Port: 8080, Zone: lo.Name}},
		{&syscall.SockaddrInet6{Port: 1, ZoneId: 999999, Addr: [16]byte{0: 0xfe, 1: 0x80, 15: 9}}, &net.TCPAddr{IP: net.ParseIP("fe80::9"), Port: 1, Zone: "999999"}},
	}
	for _, c := range cases {
		remote, ip := sockaddrText(c.sa)
		want := c.want.String()
		host, _, _ := net.SplitHostPort(want)
		if remote != want || ip != host {
			t.Errorf("%+v: %q %q, net says %q %q", c.sa, remote, ip, want, host)
		}
	}
}

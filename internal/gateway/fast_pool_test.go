package gateway

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// A backend connection the event loop handed over may still hold, in
// front of its socket, bytes the backend sent after the answer (bytes
// bufio has not pulled yet, so Buffered does not see them): the pool
// must not keep it, or the next request would read them as its answer.
func TestPoolRefusesHandedOverConnectionWithBytesLeft(t *testing.T) {
	for _, c := range []struct {
		pre  string
		kept bool
	}{{"", true}, {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray", false}} {
		a, b := net.Pipe()
		defer b.Close()
		conn := &prefixConn{Conn: a, pre: []byte(c.pre)}
		bc := &backendConn{addr: "backend:80", c: conn, r: bufio.NewReader(conn), w: bufio.NewWriter(conn)}
		var p backendPool
		p.idle = map[string][]*backendConn{}
		p.put(bc, time.Now())
		if kept := len(p.idle["backend:80"]) == 1; kept != c.kept {
			t.Errorf("%d bytes left in front: kept %v, want %v", len(c.pre), kept, c.kept)
		}
	}
}

package gateway

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// FuzzFastParse holds the fast path's request parser to net/http's: a
// head the fast path takes, http.ReadRequest (the parser of the server it
// stands in for) must take too, with the same method, target, Host,
// Content-Length and forwarded header values. The fast path may refuse
// more (it hands those to net/http), never less.
func FuzzFastParse(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /t/default/p/web/x?y=1 HTTP/1.1\r\nHost: gw:80\r\nAuthorization: Bearer abc\r\nX-A: 1\r\n\r\n",
		"POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello",
		"POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nX-Fold: a\r\n b\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nX: \x7f\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nX:\tv\t\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nBad Name: v\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 01\r\n\r\n",
		"GET //x HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /%41 HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /?a=%4 HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nHost: i\r\n\r\n",
		"GET / HTTP/1.1\r\nhost: [::1]:80\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 1.2.3.4\r\nKeep-Alive: 5\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Close\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nConnection: ,closed\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, head []byte) {
		end := bytes.Index(head, []byte("\r\n\r\n"))
		if end < 0 {
			return
		}
		head = head[:end+4]
		var r fastReq
		if !r.parse(head) {
			return
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
		if err != nil {
			t.Fatalf("the fast path took a head net/http refuses (%v):\n%q", err, head)
		}
		if req.Method != r.method || req.RequestURI != string(r.target) || req.Host != string(r.host) {
			t.Fatalf("method/target/host: fast %q %q %q, net/http %q %q %q", r.method, r.target, r.host, req.Method, req.RequestURI, req.Host)
		}
		if req.URL.Path != string(r.path) || req.URL.RawPath != "" {
			t.Fatalf("path: fast %q, net/http %q (raw %q)", r.path, req.URL.Path, req.URL.RawPath)
		}
		if req.ContentLength != r.bodyLen && !(req.ContentLength <= 0 && r.bodyLen == 0) {
			t.Fatalf("Content-Length: fast %d, net/http %d", r.bodyLen, req.ContentLength)
		}
		if req.Close != r.close {
			// net/http's server closes after answering a request it reads
			// with Close set, and answers Connection: close.
			t.Fatalf("Connection: close: fast %v, net/http %v", r.close, req.Close)
		}
		if len(req.TransferEncoding) > 0 {
			t.Fatalf("the fast path took a head with Transfer-Encoding %v", req.TransferEncoding)
		}
		for _, line := range r.keep {
			name, value, _ := strings.Cut(strings.TrimSuffix(string(line), "\r\n"), ":")
			found := false
			for _, v := range req.Header.Values(name) {
				if v == strings.Trim(value, " \t") {
					found = true
				}
			}
			if !found {
				t.Fatalf("forwarded %q, net/http has %q for %s", line, req.Header.Values(name), name)
			}
		}
	})
}

// The Connection header the fast path takes: close and keep-alive
// tokens, in any case, across lines; a token naming a header to drop, or
// upgrade, leaves the request to net/http.
func TestFastParseConnection(t *testing.T) {
	for _, c := range []struct {
		header      string
		taken, shut bool
	}{
		{"", true, false},
		{"Connection: close\r\n", true, true},
		{"Connection: CLOSE\r\n", true, true},
		{"Connection: keep-alive\r\n", true, false},
		{"Connection: Keep-Alive , close\r\n", true, true},
		{"Connection: keep-alive\r\nConnection: close\r\n", true, true},
		{"Connection:\r\n", true, false},
		{"Connection: ,, \r\n", true, false},
		{"Connection: closed\r\n", false, false},
		{"Connection: close, x-drop\r\nX-Drop: 1\r\n", false, false},
		{"Connection: upgrade\r\n", false, false},
		{"Connection: te\r\n", false, false},
	} {
		var r fastReq
		taken := r.parse([]byte("GET / HTTP/1.1\r\nHost: h\r\n" + c.header + "\r\n"))
		if taken != c.taken || taken && r.close != c.shut {
			t.Errorf("%q: taken %v close %v, want %v %v", c.header, taken, r.close, c.taken, c.shut)
		}
		for _, l := range r.keep {
			if bytes.HasPrefix(bytes.ToLower(l), []byte("connection:")) {
				t.Errorf("%q: forwarded %q", c.header, l)
			}
		}
	}
}

// A request the fast path hands to net/http while net/http is shut down:
// the connection is closed, once, and nothing is given back to the buffer
// pools twice.
func TestHandoffAfterNetHTTPShutDown(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	s := &fastServer{
		g:     &Gateway{cfg: Config{MaxHeaderBytes: 4096}},
		conns: map[*fastConn]bool{},
		hand:  &handoffListener{conns: make(chan net.Conn), done: make(chan struct{})},
	}
	_ = s.hand.Close()
	fc := newFastConn(s.g, server)
	s.state(fc, false)
	s.wg.Add(1)
	done := make(chan struct{})
	go func() { defer close(done); s.serveConn(fc) }()
	// HTTP/1.0: not the fast path's.
	if _, err := io.WriteString(client, "GET / HTTP/1.0\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	<-done
	if n, err := client.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes from a connection that should be closed", n)
	}
	if len(s.conns) != 0 {
		t.Fatalf("%d connections still tracked", len(s.conns))
	}
}

// FuzzHeadEnd holds the event loop's head finder (headEnd, on bytes
// already read) to readHead (the goroutine path's, on a reader): the
// same end, or both still waiting for more, for any bytes; a blank first
// line is headBlank to both.
func FuzzHeadEnd(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\n",
		"GET / HTTP/1.1\nHost: a\n\n",
		"GET / HTTP/1.1\r\nHost: a\r\n\n",
		"\r\nGET / HTTP/1.1\r\n\r\n",
		"\n",
		"GET / HTTP/1.1\r\nX: \r\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, st := headEnd(b)
		head, rst, err := readHead(bufio.NewReaderSize(bytes.NewReader(b), 16), nil, len(b)+1)
		switch {
		case err != nil:
			// readHead ran out of bytes: the head has not ended.
			if st != headPartial {
				t.Fatalf("headEnd %d (state %d), readHead wants more (%v) of %q", n, st, err, b)
			}
		case st == headPartial:
			t.Fatalf("headEnd wants more, readHead ended at %d (state %d) of %q", len(head), rst, b)
		case rst != st || len(head) != n:
			t.Fatalf("headEnd %d (state %d), readHead %d (state %d) of %q", n, st, len(head), rst, b)
		}
	})
}

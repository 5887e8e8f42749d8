package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// Every access log line is one line of JSON whatever the client put in
// Host and path (quotes, newlines, control characters, invalid UTF-8), and
// holds the values encoding/json would: a client cannot forge a second
// line or a field.
func TestAccessLineIsOneJSONLine(t *testing.T) {
	hostile := []string{
		"plain", `q"uote`, `back\slash`, "new\nline", "cr\rtab\t", "nul\x00bell\x07\x1f", "\x7f",
		"bad utf8 \xff\xfe end", "trunc \xe2\x82", "sep \u2028 \u2029", "é ü 漢字 🙂", `{"code":200}`, "",
	}
	for _, s := range hostile {
		line := appendAccessLine(nil, time.Unix(1, 0), "GET", s, "/p/"+s, 403, 12, 1500*time.Microsecond, s, Route{Tenant: "a", Project: "web"}, "a", s)
		if bytes.Count(line, []byte("\n")) != 1 || line[len(line)-1] != '\n' {
			t.Fatalf("%q: not one line: %q", s, line)
		}
		var got map[string]any
		if err := json.Unmarshal(line, &got); err != nil {
			t.Fatalf("%q: not JSON: %v: %q", s, err, line)
		}
		// What encoding/json makes of s (each invalid byte → U+FFFD).
		var want string
		enc, _ := json.Marshal(s)
		_ = json.Unmarshal(enc, &want)
		for key, w := range map[string]any{"msg": "request", "level": "INFO", "method": "GET", "host": want, "path": "/p/" + want, "remote": want,
			"code": float64(403), "bytes": float64(12), "duration_ms": 1.5, "route": "a/web", "tenant": "a"} {
			if got[key] != w {
				t.Errorf("%q: %s = %#v, want %#v", s, key, got[key], w)
			}
		}
		if want != "" && got["reason"] != want {
			t.Errorf("%q: reason = %#v, want %#v", s, got["reason"], want)
		}
		if strings.ContainsAny(string(line), "\u2028\u2029") {
			t.Errorf("%q: U+2028/U+2029 not escaped: %q", s, line)
		}
	}
}

// gatedWriter blocks its first Write until released, as a stalled stderr
// pipe would.
type gatedWriter struct {
	entered, release chan struct{}
	once             sync.Once
	mu               sync.Mutex
	buf              bytes.Buffer
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.entered); <-w.release })
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// A stalled log output never blocks a request: lines past the buffer are
// dropped, counted, and the count is written to the log once the output
// moves again; every line that was kept is written by Close.
func TestLogBufferNeverBlocksAndCountsDrops(t *testing.T) {
	out := &gatedWriter{entered: make(chan struct{}), release: make(chan struct{})}
	line := func(i int) []byte { return fmt.Appendf(nil, "{\"n\":%04d}\n", i) } // 11 bytes
	l := newLogBuffer(out, 10*11)
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(out.release) }) })
	_, _ = l.Write(line(0))
	<-out.entered // the writer holds line 0 and is stuck in out.Write
	for i := 1; i <= 25; i++ {
		_, _ = l.Write(line(i)) // returns although nothing is written
	}
	if got := l.Dropped(); got != 15 {
		t.Fatalf("Dropped() = %d, want 15 (10 of 25 lines fit in the buffer)", got)
	}
	release.Do(func() { close(out.release) })
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.buf.String()), "\n")
	if len(lines) != 12 {
		t.Fatalf("%d lines written, want 12 (line 0, 10 kept, the drop report):\n%s", len(lines), out.buf.String())
	}
	for i := 0; i <= 10; i++ {
		if lines[i] != strings.TrimSpace(string(line(i))) {
			t.Errorf("line %d = %s, want %s", i, lines[i], line(i))
		}
	}
	var report struct {
		Level, Msg string
		Dropped    int
	}
	if err := json.Unmarshal([]byte(lines[11]), &report); err != nil || report.Level != "WARN" || report.Dropped != 15 {
		t.Errorf("drop report %s (%v), want a WARN line with dropped 15", lines[11], err)
	}
	// After Close, a line is written through.
	_, _ = l.Write(line(99))
	if !strings.HasSuffix(out.buf.String(), string(line(99))) {
		t.Error("a line written after Close is missing")
	}
}

// Close writes every line accepted before it, from any number of writers.
func TestLogBufferCloseWritesEveryLine(t *testing.T) {
	var out bytes.Buffer
	l := newLogBuffer(&out, 0)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				_, _ = fmt.Fprintf(l, "{\"w\":%d,\"i\":%d}\n", w, i)
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, s := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !json.Valid([]byte(s)) || seen[s] {
			t.Fatalf("line %q torn or repeated", s)
		}
		seen[s] = true
	}
	if len(seen) != 8000 || l.Dropped() != 0 {
		t.Fatalf("%d lines written, %d dropped; want 8000 and 0", len(seen), l.Dropped())
	}
}

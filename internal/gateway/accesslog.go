package gateway

import (
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// DefaultLogBufferBytes bounds the log lines waiting to be written.
const DefaultLogBufferBytes = 4 << 20

// logBuffer is the gateway's log output: a request appends its line to
// memory and returns, and one goroutine writes what has gathered with one
// write(2) per batch — under load, many lines per system call; when idle,
// each line within logLinger. A request never waits for the log's file or pipe.
// When the output falls behind by more than max bytes, further lines are
// dropped and counted (kiln_gateway_log_dropped_lines_total), and a line
// saying how many follows once the output catches up: a drop is never
// silent. Close writes everything pending.
type logBuffer struct {
	out io.Writer
	max int

	mu      sync.Mutex
	buf     []byte // pending, complete lines
	closed  bool
	pending uint64 // drops not yet reported in the log

	dropped atomic.Uint64 // all lines dropped
	wake    chan struct{}
	done    chan struct{}
	wmu     sync.Mutex // one writer of out at a time
}

func newLogBuffer(out io.Writer, max int) *logBuffer {
	if max <= 0 {
		max = DefaultLogBufferBytes
	}
	l := &logBuffer{out: out, max: max, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go l.run()
	return l
}

// Write takes one or more complete lines (slog's handler writes each
// record with one call).
func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		// After Close (a log line of the shutdown itself): written
		// through, nothing is lost.
		l.wmu.Lock()
		defer l.wmu.Unlock()
		if _, err := l.out.Write(p); err != nil {
			l.dropped.Add(1)
		}
		return len(p), nil
	}
	if len(l.buf)+len(p) > l.max {
		l.pending++
		l.mu.Unlock()
		l.dropped.Add(1)
		return len(p), nil
	}
	l.buf = append(l.buf, p...)
	// Under mu: Close, once it has set closed, sees no send after its own.
	select {
	case l.wake <- struct{}{}:
	default:
	}
	l.mu.Unlock()
	return len(p), nil
}

// Dropped is the number of lines dropped so far.
func (l *logBuffer) Dropped() uint64 { return l.dropped.Load() }

// logLinger is how long the writer lets lines gather after the first
// one of a batch: under load a write(2) then carries hundreds of lines,
// not one (at 30,000 requests a second, unbatched, the log was a third
// of the gateway's system calls); an idle gateway's line is written
// within it. Each batch also costs a wake-up of the writer and a timer
// (a futex, an epoll_pwait and two context switches): at 1 ms, with a
// new connection per request, that was a fifth of a system call and
// half a context switch per request.
const logLinger = 10 * time.Millisecond

func (l *logBuffer) run() {
	defer close(l.done)
	var spare []byte
	for range l.wake {
		time.Sleep(logLinger)
		if !l.flush(&spare) {
			return
		}
	}
	l.flush(&spare) // closed: what is left
}

// flush writes what is pending; false once closed and empty.
func (l *logBuffer) flush(spare *[]byte) bool {
	l.mu.Lock()
	batch := l.buf
	l.buf = (*spare)[:0]
	drops := l.pending
	l.pending = 0
	closed := l.closed
	l.mu.Unlock()
	if drops > 0 {
		batch = append(batch, `{"time":"`...)
		batch = time.Now().AppendFormat(batch, time.RFC3339Nano)
		batch = append(batch, `","level":"WARN","msg":"log lines dropped: the log output fell behind","dropped":`...)
		batch = strconv.AppendUint(batch, drops, 10)
		batch = append(batch, "}\n"...)
	}
	if len(batch) > 0 {
		l.wmu.Lock()
		if _, err := l.out.Write(batch); err != nil {
			l.dropped.Add(uint64(countLines(batch)))
		}
		l.wmu.Unlock()
	}
	// Keep one buffer of a sensible size for the next swap.
	if cap(batch) <= 2*l.max {
		*spare = batch[:0]
	} else {
		*spare = nil
	}
	return !closed
}

func countLines(b []byte) int {
	n := 0
	for _, c := range b {
		if c == '\n' {
			n++
		}
	}
	return n
}

// Close writes every pending line and stops the writer; later lines are
// written through.
func (l *logBuffer) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	// Writers send on wake only under mu and only while not closed, so
	// none sends after this. (Sending a last wake-up instead could block
	// for ever: the writer may already have seen closed and returned with
	// a writer's wake-up still in the channel.)
	close(l.wake)
	<-l.done
	return nil
}

// appendAccessLine encodes one access log line as slog's JSON handler
// would (same keys and order), without its per-attribute work.
func appendAccessLine(b []byte, now time.Time, method, host, path string, code int, bytes int64, d time.Duration, remote string, route Route, tenant, reason string) []byte {
	b = append(b, `{"time":"`...)
	b = now.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"INFO","msg":"request","method":`...)
	b = appendJSONString(b, method)
	b = append(b, `,"host":`...)
	b = appendJSONString(b, host)
	b = append(b, `,"path":`...)
	b = appendJSONString(b, path)
	b = append(b, `,"code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, bytes, 10)
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendFloat(b, float64(d.Microseconds())/1000, 'f', -1, 64)
	b = append(b, `,"remote":`...)
	b = appendJSONString(b, remote)
	if route != (Route{}) {
		// Both are validated DNS labels.
		b = append(b, `,"route":"`...)
		b = append(b, route.Tenant...)
		b = append(b, '/')
		b = append(b, route.Project...)
		b = append(b, '"')
	}
	if tenant != "" {
		b = append(b, `,"tenant":`...)
		b = appendJSONString(b, tenant)
	}
	if reason != "" {
		b = append(b, `,"reason":`...)
		b = appendJSONString(b, reason)
	}
	return append(b, "}\n"...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, each byte of invalid UTF-8 as U+FFFD (as
// encoding/json does), and U+2028/U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

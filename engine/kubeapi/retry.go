// Package kubeapi makes every Kubernetes API call kiln makes survive the
// transient faults of a loaded or restarting API server: it wraps a
// client's transport with one that retries, with bounded, jittered
// exponential backoff, the failures that say "try again" (5xx, 429 with its
// Retry-After, a connection reset or cut before the answer, a timeout), and
// passes every other answer through at once.
//
// Retrying below client-go means every verb is covered in one place: reads
// (discovery included), dry-run and real applies, creates, deletes, Lease
// calls and the establishment of watches. A write whose answer was lost is
// sent again: server-side apply, PATCH and DELETE are idempotent, and the
// callers of Create and Update treat the AlreadyExists or Conflict a repeat
// can meet by reading back (see engine/project).
package kubeapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kilnctl/kiln/engine/trace"
)

// Policy bounds the retries of one request.
type Policy struct {
	// Attempts is the most tries of one request, the first included.
	Attempts int
	// Base is the backoff before the first retry; it doubles after each
	// attempt up to Max. Each wait is drawn uniformly from [d/2, d).
	Base, Max time.Duration
	// MaxRetryAfter caps how long a server's Retry-After is honoured.
	MaxRetryAfter time.Duration
	// Within, when set, bounds the time from a request's first try to the
	// start of its last: no retry is started past it.
	Within time.Duration
}

// DefaultPolicy is what Wrap installs: a request is tried again, waiting
// 0.1, 0.2, 0.4, 0.8, 1.6, then 3.2 s between tries (before jitter), for
// up to 2 minutes from its first try — long enough for a managed control
// plane to restart or fail over, or etcd to recover from a stall — or less
// when the request's context ends first.
var DefaultPolicy = Policy{Attempts: 64, Base: 100 * time.Millisecond, Max: 3200 * time.Millisecond, MaxRetryAfter: 5 * time.Second, Within: 2 * time.Minute}

// refusedAttempts bounds the tries against an address that refuses
// connections and has not answered this Transport before: where nothing
// listens it is reported quickly. A server that answered earlier and now
// refuses is restarting: its requests are retried for the whole policy.
const refusedAttempts = 3

// Wrap installs the retrying transport with DefaultPolicy on rc, outside any
// transport wrapper rc already has (so each retry gets fresh credentials).
// Each try is traced (kiln -v) inside the retries, each retry outside.
func Wrap(rc *rest.Config) {
	rc.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return &trace.Transport{Next: next, System: "k8s", Query: true}
	})
	rc.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return &Transport{Next: next, Policy: DefaultPolicy, Observe: traceRetry}
	})
}

func traceRetry(req *http.Request, attempt int, cause string, wait time.Duration) {
	trace.Logf(req.Context(), "k8s retry %s %s: try %d failed (%s); next in %s", req.Method, req.URL.Path, attempt, cause, wait.Round(time.Millisecond))
}

// Transport retries transient failures of the requests it carries.
type Transport struct {
	Next   http.RoundTripper
	Policy Policy
	// Observe, if set, is told of each retry before its wait.
	Observe func(req *http.Request, attempt int, cause string, wait time.Duration)
	// answered: the server answered a request of this Transport once.
	answered atomic.Bool
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	p := t.Policy
	if p.Attempts <= 0 {
		p = DefaultPolicy
	}
	ctx := req.Context()
	backoff := p.Base
	lost := false
	start := time.Now()
	for attempt := 1; ; attempt++ {
		// A write waits, before every try, for the locks it is made under
		// to be known its holder's (see Gate).
		if err := waitGates(req); err != nil {
			return nil, fmt.Errorf("%s %s: not sent: %w", req.Method, req.URL.Path, err)
		}
		try := req
		if attempt > 1 {
			var err error
			if try, err = rewind(req); err != nil {
				return nil, err
			}
		}
		resp, err := t.Next.RoundTrip(try)
		if resp != nil {
			t.answered.Store(true)
		}
		if err == nil && buffered(req) {
			// The answer's body is read here, not by client-go above: a
			// body cut in the middle (the API server gone after its
			// headers, an HTTP/2 stream reset: "stream error when reading
			// response body") is then a failed try like any other, not
			// the end of the request.
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr != nil {
				resp, err = nil, rerr
			} else {
				resp.Body = io.NopCloser(bytes.NewReader(body))
			}
		}
		if err != nil && req.Method != http.MethodGet {
			lost = true // the write may have landed
		}
		if lost && resp != nil {
			if ok := t.landed(req, resp); ok != nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return ok, nil
			}
		}
		cause, wait, again := classify(resp, err, p)
		limit := p.Attempts
		if errors.Is(err, syscall.ECONNREFUSED) && !t.answered.Load() {
			limit = min(limit, refusedAttempts)
		}
		if !again || attempt >= limit || ctx.Err() != nil || !replayable(req) {
			return giveUp(resp, err, attempt)
		}
		d := jitter(backoff)
		if wait > d {
			d = wait
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
			return giveUp(resp, err, attempt) // the answer now beats a timeout later
		}
		if p.Within > 0 && time.Since(start)+d > p.Within {
			return giveUp(resp, err, attempt)
		}
		if resp != nil {
			// Read a little so the connection can be reused, then let it go.
			_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
			resp.Body.Close()
		}
		if t.Observe != nil {
			t.Observe(req, attempt, cause, d)
		}
		timer := time.NewTimer(d)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, fmt.Errorf("%s %s: %w (after %d attempts, last: %s)", req.Method, req.URL.Path, context.Cause(ctx), attempt, cause)
		case <-timer.C:
		}
		backoff = min(backoff*2, p.Max)
	}
}

// classify says whether a try failed transiently, why, and the least wait
// the server asked for.
func classify(resp *http.Response, err error, p Policy) (cause string, wait time.Duration, again bool) {
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return "", 0, false
		}
		return err.Error(), 0, Transient(err)
	}
	switch c := resp.StatusCode; {
	case c == http.StatusTooManyRequests, c == http.StatusInternalServerError, c == http.StatusBadGateway,
		c == http.StatusServiceUnavailable, c == http.StatusGatewayTimeout:
		if s, ok := retryAfter(resp); ok {
			wait = min(s, p.MaxRetryAfter)
		}
		return resp.Status, wait, true
	}
	return "", 0, false
}

// Transient says whether a transport error (no answer) is worth another try:
// a connection reset, refused or cut (EOF), a broken pipe, a timeout of the
// dial, the TLS handshake or the answer, a GOAWAY, an HTTP/2 stream reset.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"connection reset", "broken pipe", "use of closed network connection",
		"server closed idle connection", "goaway", "tls handshake timeout", "unexpected eof",
		"http2: client connection lost", "can't write http request on broken connection",
		// An HTTP/2 stream the server reset (RST_STREAM) before answering,
		// e.g. "stream error: stream ID 7; INTERNAL_ERROR; received from peer".
		"stream error:"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// retryAfter reads a Retry-After header in seconds.
func retryAfter(resp *http.Response) (time.Duration, bool) {
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// giveUp returns the last answer. Retry-After is dropped so client-go's own
// retry of such answers does not start the whole round again: the attempts
// stay bounded by Policy.Attempts, not multiplied by client-go's ten.
func giveUp(resp *http.Response, err error, attempts int) (*http.Response, error) {
	if resp != nil {
		resp.Header.Del("Retry-After")
		return resp, nil
	}
	if attempts > 1 && err != nil {
		return nil, &ExhaustedError{Attempts: attempts, Last: err}
	}
	return nil, err
}

// ExhaustedError is a transport error that persisted through every try. It
// deliberately neither unwraps to nor quotes the last error's text:
// client-go retries a GET whose error looks like a reset or an EOF, and
// would start the whole round of attempts again, ten times over.
type ExhaustedError struct {
	Attempts int
	Last     error
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("no answer after %d attempts (last: %s)", e.Attempts, describe(e.Last))
}

// describe names a transport failure in words of its own.
func describe(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), strings.Contains(strings.ToLower(err.Error()), "connection reset"):
		return "the server reset the connection"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), strings.Contains(strings.ToLower(err.Error()), "eof"):
		return "the connection closed before the answer"
	case errors.Is(err, syscall.EPIPE), strings.Contains(err.Error(), "broken pipe"):
		return "the connection broke while sending"
	case errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	case strings.Contains(err.Error(), "stream error:"):
		return "the server reset the request's stream"
	}
	return "the connection failed"
}

// buffered says whether an answer's body is read whole inside the retries:
// every answer but a stream (a watch, a followed log, an upgraded
// connection), which client-go reads as it comes, and a request made
// with a Streamed context, whose caller does.
func buffered(req *http.Request) bool {
	if streamed(req.Context()) {
		return false
	}
	q := req.URL.Query()
	if w := q.Get("watch"); w == "true" || w == "1" {
		return false
	}
	if q.Get("follow") == "true" || req.Header.Get("Upgrade") != "" {
		return false
	}
	return true
}

func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// rewind clones req with a fresh copy of its body.
func rewind(req *http.Request) (*http.Request, error) {
	r := req.Clone(req.Context())
	if req.Body != nil && req.Body != http.NoBody {
		body, err := req.GetBody()
		if err != nil {
			return nil, fmt.Errorf("%s %s: replay body: %w", req.Method, req.URL.Path, err)
		}
		r.Body = body
	}
	return r, nil
}

func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2)
}

package kubeapi

import (
	"context"
	"errors"
	"time"

	"github.com/kilnctl/kiln/engine/trace"
)

type streamedKey struct{}

// Streamed marks the requests made with ctx as read by their caller as
// their answers arrive (a LIST decoded object by object): Transport does
// not read their bodies whole inside its retries, as it does not a
// watch's, so the caller's memory stays one object deep however large the
// answer. A body cut in the middle is then the caller's to retry
// (RetryCut), reporting it as a CutError.
func Streamed(ctx context.Context) context.Context {
	return context.WithValue(ctx, streamedKey{}, true)
}

func streamed(ctx context.Context) bool {
	v, _ := ctx.Value(streamedKey{}).(bool)
	return v
}

// CutError is a streamed answer whose body ended before it was whole: the
// connection or the HTTP/2 stream lost in the middle (the API server
// stopped after its headers).
type CutError struct{ Err error }

func (e *CutError) Error() string { return "answer cut short: " + e.Err.Error() }
func (e *CutError) Unwrap() error { return e.Err }

// RetryCut runs read, and again while it fails with a CutError, waiting as
// Transport waits between the tries of a request (DefaultPolicy: its
// backoff, attempts and time bound) or until ctx ends. read starts over
// each time: it must drop what a cut try gave.
func RetryCut(ctx context.Context, read func() error) error {
	p := DefaultPolicy
	backoff := p.Base
	start := time.Now()
	for attempt := 1; ; attempt++ {
		err := read()
		var cut *CutError
		if err == nil || !errors.As(err, &cut) || attempt >= p.Attempts || ctx.Err() != nil || time.Since(start) > p.Within {
			return err
		}
		d := jitter(backoff)
		trace.Logf(ctx, "k8s retry: try %d failed (%v); next in %s", attempt, err, d.Round(time.Millisecond))
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		backoff = min(2*backoff, p.Max)
	}
}

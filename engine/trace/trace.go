// Package trace carries kiln's debug trace (kiln -v, --log-file): one
// line per API request (method, path, status, latency) and per retry, for
// Kubernetes and AWS alike. The trace function travels in the context, so
// transports built long before an operation (a discovery's REST configs)
// report to whoever runs the request. A trace never holds a header, a
// body or, for AWS, a query string (presigned URLs carry credentials).
package trace

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Func receives one debug line.
type Func func(msg string)

// Why the trace rides the context: it is request-scoped debugging, the
// textbook context value; transports are built long before (and shared
// beyond) the operation whose requests they carry, and a trace must reach
// only that operation's sink.
type key struct{}

type tracer struct {
	f      Func
	detail int
}

// With returns ctx carrying f. detail 2 or more adds the query string of
// Kubernetes requests (label selectors, resource versions, watch).
func With(ctx context.Context, f Func, detail int) context.Context {
	return context.WithValue(ctx, key{}, tracer{f: f, detail: detail})
}

// To returns ctx with its trace (if it carries one) sent to f instead, at
// the same detail: an operation binds the trace to its own reporter, so
// its API requests are reported with its events and never reach another
// operation's frontend. Without a trace, ctx is returned as it is.
func To(ctx context.Context, f Func) context.Context {
	t, ok := ctx.Value(key{}).(tracer)
	if !ok {
		return ctx
	}
	return With(ctx, f, t.detail)
}

func from(ctx context.Context) (tracer, bool) {
	t, ok := ctx.Value(key{}).(tracer)
	return t, ok && t.f != nil
}

// Logf traces one line if ctx carries a trace.
func Logf(ctx context.Context, format string, args ...any) {
	if t, ok := from(ctx); ok {
		t.f(fmt.Sprintf(format, args...))
	}
}

// Transport traces every request it carries: "SYSTEM METHOD PATH -> STATUS
// (LATENCY)". System names the API ("k8s", "aws").
type Transport struct {
	Next   http.RoundTripper
	System string
	// Query allows the query string at detail 2 (never for AWS).
	Query bool
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	tr, ok := from(req.Context())
	if !ok {
		return t.Next.RoundTrip(req)
	}
	start := time.Now()
	resp, err := t.Next.RoundTrip(req)
	what := req.URL.Path
	if req.URL.Host != "" && t.System == "aws" {
		what = req.URL.Host + what
	}
	if t.Query && tr.detail >= 2 && req.URL.RawQuery != "" {
		what += "?" + req.URL.RawQuery
	}
	ms := time.Since(start).Milliseconds()
	if err != nil {
		tr.f(fmt.Sprintf("%s %s %s -> error after %dms: %v", t.System, req.Method, what, ms, err))
	} else {
		tr.f(fmt.Sprintf("%s %s %s -> %d (%dms)", t.System, req.Method, what, resp.StatusCode, ms))
	}
	return resp, err
}

// Client is an HTTP client (the AWS SDK's HTTPClient) that traces.
type Client struct {
	Next interface {
		Do(*http.Request) (*http.Response, error)
	}
}

// Do implements the AWS SDK's HTTPClient.
func (c Client) Do(req *http.Request) (*http.Response, error) {
	t := &Transport{System: "aws", Next: roundTripFunc(c.Next.Do)}
	return t.RoundTrip(req)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/kubeapi"
	"github.com/kilnctl/kiln/engine/platform"
)

// abandonGrace is how long a context whose deadline passed may still take
// to return (its killed plugin being reaped) before it is abandoned.
const abandonGrace = 250 * time.Millisecond

// clientFunc builds the client a context is inspected with.
type clientFunc func(ctx context.Context, contextName string) (*rest.Config, kubernetes.Interface, error)

// InspectLocation inspects one context for kiln clusters within Timeout,
// whatever it waits on: the credential plugin (run by kiln without a
// terminal, killed when the deadline passes), connect, TLS, requests. A
// context that does not finish in time is abandoned and reported with a
// plain cause. Only the context the user named, on a terminal, may then
// prompt for a login. name is the cluster the operation is about (unused:
// a context hosts at most one kiln cluster and reports it).
func (p *Provider) InspectLocation(ctx context.Context, name, location string) engine.Location {
	loc := p.inspectBounded(ctx, location)
	var pe *pluginError
	if errors.As(loc.Err, &pe) && pe.needsLogin && p.Interactive && location == p.Context {
		// The user named this context and is at a terminal: client-go's
		// own exec path lets its plugin ask, bounded only by ctx.
		start := time.Now()
		interactive := func(_ context.Context, n string) (*rest.Config, kubernetes.Interface, error) { return p.Client(n) }
		l := p.inspectWith(ctx, location, &tracer{}, interactive)
		l.Elapsed = loc.Elapsed + time.Since(start)
		loc = l
	}
	return loc
}

// inspectBounded is one context's inspection with the hard bound.
func (p *Provider) inspectBounded(parent context.Context, location string) engine.Location {
	bound := p.timeout()
	start := time.Now()
	ctx, cancel := context.WithTimeout(parent, bound)
	defer cancel()
	tr := &tracer{bound: bound}
	done := make(chan engine.Location, 1)
	go func() {
		done <- p.inspectWith(httptrace.WithClientTrace(ctx, tr.trace()), location, tr, p.probeClient)
	}()
	var loc engine.Location
	select {
	case loc = <-done:
	case <-ctx.Done():
		select {
		case loc = <-done:
		case <-time.After(abandonGrace):
			// Something ignored the deadline: abandon it (its goroutine
			// ends on its own; its plugin, if any, was killed).
			loc = engine.Location{Name: location, Infra: engine.InfraUnreachable, Err: tr.cause(ctx, parent)}
		}
	}
	loc.Elapsed = time.Since(start)
	if loc.Err == nil && loc.Client != nil {
		p.mu.Lock()
		if p.reached == nil {
			p.reached = map[string]engine.Location{}
		}
		p.reached[location] = engine.Location{Client: loc.Client, REST: loc.REST}
		p.mu.Unlock()
	}
	return loc
}

// inspectWith reads the platform state of one context.
func (p *Provider) inspectWith(ctx context.Context, location string, tr *tracer, client clientFunc) engine.Location {
	loc := engine.Location{Name: location, Infra: engine.InfraUnreachable}
	rc, cs, err := client(ctx, location)
	if err != nil {
		var pe *pluginError
		if !errors.As(err, &pe) && ctx.Err() != nil {
			err = tr.cause(ctx, ctx)
		}
		loc.Err = err
		return loc
	}
	st, err := platform.Read(ctx, cs)
	if err != nil {
		loc.Err = explain(ctx, err, tr, rc.Host)
		return loc
	}
	loc.Infra = engine.InfraPresent
	loc.State, loc.Cluster, loc.Client, loc.REST = st, st.Cluster, cs, rc
	return loc
}

// probeClient builds a context's client for discovery: its credential
// plugin, if any, runs now under ctx's deadline, by kiln, without a
// terminal; the client re-runs it (bounded) when the credential expires.
func (p *Provider) probeClient(ctx context.Context, contextName string) (*rest.Config, kubernetes.Interface, error) {
	rc, auth, err := p.restConfig(contextName, true)
	if err != nil {
		return nil, nil, err
	}
	if auth != nil {
		c, err := auth.get(ctx)
		if err != nil {
			return nil, nil, err
		}
		if c.cert != nil {
			rc.CertData, rc.KeyData = c.cert, c.key
		}
		if c.token != "" {
			rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &bearer{auth: auth, next: rt} })
		}
	}
	return p.finalize(contextName, rc)
}

// explain turns a failed inspection into a plain cause.
func explain(ctx context.Context, err error, tr *tracer, host string) error {
	var ex *kubeapi.ExhaustedError
	if errors.As(err, &ex) && ex.Last != nil {
		err = ex.Last // retried in vain: the cause is the last try's
	}
	var pe *pluginError
	var dnsErr *net.DNSError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var certErr *tls.CertificateVerificationError
	switch {
	case errors.As(err, &pe):
		return pe
	case ctx.Err() != nil:
		return tr.cause(ctx, ctx)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("unauthorized: %s rejected the context's credentials", host)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("forbidden: the context's user may not read %s at %s", platform.Namespace, host)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("connection refused by %s", host)
	case errors.As(err, &dnsErr):
		return fmt.Errorf("cannot resolve %s: %v", dnsErr.Name, dnsErr.Err)
	case errors.As(err, &unknownCA), errors.As(err, &certErr):
		return fmt.Errorf("TLS: the certificate of %s is not trusted by the context's CA", host)
	case errors.As(err, &hostErr):
		return fmt.Errorf("TLS: the certificate of %s is for another host", host)
	}
	return fmt.Errorf("%s: %w", host, err)
}

// tracer records how far a context's requests got, so a deadline can be
// explained: no connection, a TLS handshake that never finished, or a
// server that accepted and never answered.
type tracer struct {
	bound time.Duration

	mu                                      sync.Mutex
	connecting, connected, tlsStart, tlsEnd bool
	wrote                                   bool
}

func (t *tracer) trace() *httptrace.ClientTrace {
	set := func(f *bool) {
		t.mu.Lock()
		*f = true
		t.mu.Unlock()
	}
	return &httptrace.ClientTrace{
		ConnectStart: func(string, string) { set(&t.connecting) },
		ConnectDone: func(_, _ string, err error) {
			if err == nil {
				set(&t.connected)
			}
		},
		TLSHandshakeStart: func() { set(&t.tlsStart) },
		TLSHandshakeDone:  func(tls.ConnectionState, error) { set(&t.tlsEnd) },
		WroteRequest:      func(httptrace.WroteRequestInfo) { set(&t.wrote) },
	}
}

// cause says why ctx ended; parent tells an interrupt from the deadline.
func (t *tracer) cause(ctx, parent context.Context) error {
	if parent.Err() != nil && !errors.Is(parent.Err(), context.DeadlineExceeded) {
		return parent.Err()
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ctx.Err()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.tlsStart && !t.tlsEnd:
		return fmt.Errorf("TLS handshake did not complete within %s", t.bound)
	case t.connecting && !t.connected:
		return fmt.Errorf("connection timed out (no answer within %s)", t.bound)
	case t.connected || t.wrote:
		return fmt.Errorf("the server accepted the connection but did not answer within %s", t.bound)
	}
	return fmt.Errorf("no answer within %s", t.bound)
}

package kubeapi

import (
	"context"
	"net/http"
	"slices"
)

// A Gate holds back writes. A lock whose renewals stopped getting through
// (the API server restarting, say) closes its gate: the operation it
// protects may still read, but sends no write until a renewal shows the
// lease is still its own (the gate opens) or that another holder has it
// (WaitWrite then fails with that cause, and the write is never sent).
type Gate interface {
	// WaitWrite returns nil when a write may be sent now, or why it must
	// not be sent at all; it waits while the gate is closed, until ctx ends.
	WaitWrite(ctx context.Context) error
}

// Enforcer is a Gate told when a request carrying it went through
// kubeapi's Transport: the operation's client holds its writes back at
// the gate, before any write was sent.
type Enforcer interface {
	Enforce()
}

// Why the gates ride the context: a lock must hold back every write of
// its operation, sent through clients and transports built before the
// lock was taken (a provider's cached clients, informers); only requests
// made under the operation's context wait, while others sharing the same
// transport do not. It is request-scoped by nature, like a deadline.
type gatesKey struct{}

// WithGate returns a copy of ctx whose requests' writes each wait for g
// (and for every gate ctx carries already) before every try.
func WithGate(ctx context.Context, g Gate) context.Context {
	gs, _ := ctx.Value(gatesKey{}).([]Gate)
	return context.WithValue(ctx, gatesKey{}, append(slices.Clip(gs), g))
}

// waitGates waits for the gates req's context carries when req writes.
func waitGates(req *http.Request) error {
	ctx := req.Context()
	gs, _ := ctx.Value(gatesKey{}).([]Gate)
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		// A read is not held back, but it shows the gate's holder that
		// its operation's requests go through this Transport, so its
		// writes will wait (see Enforcer).
		for _, g := range gs {
			if e, ok := g.(Enforcer); ok {
				e.Enforce()
			}
		}
		return nil
	}
	for _, g := range gs {
		if err := g.WaitWrite(ctx); err != nil {
			return err
		}
	}
	return nil
}

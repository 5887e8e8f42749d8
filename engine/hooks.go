package engine

import "context"

// Hooks are test hooks: a test build hands an operation a Hooks value to
// act at named points of its run (kill the process there, or hold it until
// the test lets it go). A release build has none, so every checkpoint is a
// no-op. The implementation that reads KILN_TEST_CRASH_AT and
// KILN_TEST_PAUSE_AT lives in internal/testenv/testhooks, which only _test.go files
// import: the kiln binary does not contain it.
type Hooks interface {
	// At is called when an operation reaches the checkpoint named point.
	// It returns when the operation may go on (it may also never return).
	At(ctx context.Context, point string)
}

// Why the hooks ride the context rather than a field: checkpoints sit in
// the engine and deep in providers (the aws provider's kubeconfig write,
// its claim's host), reached through the Provider interface, whose
// methods take no test parameter and should not; the operation's context
// is the one thing every such call already receives, scoped to that one
// operation. A release build carries none. Operation inputs and knobs are
// never carried this way: they are fields of requests and options.
type hooksKey struct{}

// WithHooks returns a copy of ctx that carries h: every checkpoint reached
// under it, in the engine and in the providers it calls, is reported to h.
// A nil h leaves ctx unchanged.
func WithHooks(ctx context.Context, h Hooks) context.Context {
	if h == nil {
		return ctx
	}
	return context.WithValue(ctx, hooksKey{}, h)
}

// HooksFrom returns the hooks ctx carries, or nil.
func HooksFrom(ctx context.Context) Hooks {
	h, _ := ctx.Value(hooksKey{}).(Hooks)
	return h
}

// Checkpoint marks the point named point of an operation for the hooks ctx
// carries; without hooks (every release build) it does nothing. Providers
// name their steps with it; the names are what tests crash and pause at.
func Checkpoint(ctx context.Context, point string) {
	if h := HooksFrom(ctx); h != nil {
		h.At(ctx, point)
	}
}

// HostHook is Hooks that also play another host: tests on one machine
// play two hosts through it. Providers that name this host in what they
// write (the aws provider's claim holder) ask HookedHost first.
type HostHook interface {
	Hooks
	// Host is the host name to use ("" = the real one).
	Host() string
}

// HookedHost returns the host name the hooks ctx carries play, or "".
func HookedHost(ctx context.Context) string {
	if h, ok := HooksFrom(ctx).(HostHook); ok {
		return h.Host()
	}
	return ""
}

func checkpoint(ctx context.Context, point string) { Checkpoint(ctx, point) }

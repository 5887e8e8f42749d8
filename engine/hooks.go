package engine

import "context"

// Hooks are test hooks: a test build hands an operation a Hooks value to
// act at named points of its run (kill the process there, or hold it until
// the test lets it go). A release build has none, so every checkpoint is a
// no-op. The implementation that reads KILN_TEST_CRASH_AT and
// KILN_TEST_PAUSE_AT lives in internal/testenv/testhooks, which only _test.go files
// import: the kiln binary does not contain it.
//
// Hooks are an option of whatever reaches a checkpoint, not a value of
// the context: Engine.Hooks for the engine's own checkpoints, a Hooks
// field of each provider that has checkpoints (the aws provider's). The
// frontend that builds them (internal/cli, from the hooks cmd/kiln's run
// is given) sets the same Hooks on each, so a test sees every checkpoint
// of an operation, the engine's and its provider's, in one place. The
// context carries only what is scoped to one request (the API trace, the
// lock's write gates); a test knob set once per process is not that, and
// an explicit field shows which parts of kiln can be stopped at all.
type Hooks interface {
	// At is called when an operation reaches the checkpoint named point.
	// It returns when the operation may go on (it may also never return).
	At(ctx context.Context, point string)
}

// Checkpoint marks the point named point of an operation for h; a nil h
// (every release build) does nothing. The engine and providers name their
// steps with it; the names are what tests crash and pause at.
func Checkpoint(ctx context.Context, h Hooks, point string) {
	if h != nil {
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

// HookedHost returns the host name h plays, or "" (the real one; also
// for a nil h or one that plays no other host).
func HookedHost(h Hooks) string {
	if hh, ok := h.(HostHook); ok {
		return hh.Host()
	}
	return ""
}

// checkpoint marks the point named point of one of e's operations for
// e.Hooks.
func (e *Engine) checkpoint(ctx context.Context, point string) { Checkpoint(ctx, e.Hooks, point) }

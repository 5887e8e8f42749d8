// Package engine is kiln's UI-agnostic, phased engine. Every operation runs
// as named, idempotent phases (discover → plan → credentials →
// infrastructure → platform → readiness) and reports every observable fact
// as a typed event (package event) through the operation's event.Reporter,
// which stamps and cleans it for one Sink; its project operations and its
// provider report through the same Reporter. Frontends (the Bubble Tea
// wizard, headless text and NDJSON) only render events and answer
// confirmations.
package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/trace"

	"k8s.io/client-go/kubernetes"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/readiness"
)

// Confirmer answers the questions an operation must ask. The wizard asks
// the user; headless answers from --continue / --yes.
type Confirmer interface {
	// ConfirmContinue is asked when the platform is already installed: true
	// continues with the key material the cluster already trusts.
	ConfirmContinue(ctx context.Context, q ContinueQuestion) (bool, error)
	// ConfirmDestroy is asked before anything is removed.
	ConfirmDestroy(ctx context.Context, q DestroyQuestion) (bool, error)
}

// ContinueQuestion says what exists when the platform is already installed.
type ContinueQuestion struct {
	Provider, Name, Location string
	TrustedKeyIDs            []string
	// TokenDir is a local token dir holding a trusted key ("" if none found).
	TokenDir string
}

// DestroyQuestion says what destroy would remove.
type DestroyQuestion struct {
	Provider, Name, Location string
	Tenants                  []string
	TokenDir                 string
	// Projects is what the tenants hold, worded ("3 projects (2 meant to
	// be running: default/a, default/b)"); "" when it could not be read.
	Projects string
}

// Keyring remembers which token dir belongs to which cluster.
type Keyring interface {
	Get(provider, name string) (creds.Entry, bool, error)
	Put(creds.Entry) error
	Delete(provider, name string) error
}

// Engine runs operations. Construct it with its dependencies; it holds no
// per-operation state.
type Engine struct {
	// Sink receives every event of an operation, through its Reporter.
	Sink    Sink
	Confirm Confirmer
	Keyring Keyring
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Namer words the inputs that error messages tell the user to give
	// (nil: the CLI's flags, with the CLI-only parts of the messages, the
	// commands to run; see input.CLIOnly). See InputError.
	Namer Namer
	// Actions, when set, words every hint (a command to run next) as the
	// frontend's own action instead of a kiln command line: the wizard
	// names its keys. nil: the kiln command (Command).
	Actions Actions
	// Chosen says how the frontend named a cluster's location when it
	// names one, as log lines give it ("chosen in the wizard"); "" says
	// "named with" the provider's location input (--context, --region).
	Chosen string
	// Version is this kiln's version: recorded on kiln-config by create
	// and upgrade ("dev" when empty), and the tag of the default gateway
	// image (kiln's own image at this version, platform.GatewayImage).
	Version string
	// PageSize is how many objects each LIST of the projects' objects asks
	// for at a time (project.Ops.PageSize; 0: project.DefaultPageSize, all
	// at once).
	PageSize int64
	// Hooks are test hooks (see Hooks): every checkpoint of the engine's
	// operations is reported to them. nil (every release build): none.
	Hooks Hooks
}

// version is this kiln's version as recorded on kiln-config.
func (e *Engine) version() string {
	if e.Version == "" {
		return "dev"
	}
	return e.Version
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// reporter is the operation's Reporter: every event the engine, its
// project operations and its providers report goes through one, which
// stamps and cleans it before the Sink gets it.
func (e *Engine) reporter() *event.Reporter { return event.NewReporter(e.Sink, e.now) }

// traced binds ctx's API request trace (kiln -v, --log-file) to this
// operation's Reporter: every public operation calls it first, so its
// debug lines reach its own frontend, stamped and cleaned like its other
// events.
func (e *Engine) traced(ctx context.Context) context.Context {
	return trace.To(ctx, e.reporter().Debug)
}

// emit reports one event with payload p.
func (e *Engine) emit(p event.Payload) { e.reporter().Report(p) }

func (e *Engine) logf(level event.Level, format string, args ...any) {
	e.reporter().Logf(level, format, args...)
}

func (e *Engine) resource(kind, ns, name string, status event.Status, msg string) {
	e.reporter().Resource(kind, ns, name, status, msg)
}

// watcher returns a readiness watcher that emits a resource event whenever
// an object's status or message changes. Watchers made by one call share
// the record of what was last emitted, so following the same object again
// (wait's two steps, say) does not repeat an unchanged line.
func (e *Engine) watcher(cs kubernetes.Interface) *readiness.Watcher {
	var mu sync.Mutex
	last := map[readiness.Ref]readiness.Result{}
	return &readiness.Watcher{Client: cs, OnChange: func(ref readiness.Ref, res readiness.Result) {
		mu.Lock()
		prev, seen := last[ref]
		last[ref] = res
		mu.Unlock()
		if !seen || prev != res {
			e.resource(ref.Kind, ref.Namespace, ref.Name, res.Status, res.Message)
		}
	}}
}

// phase runs one named step, reporting started and succeeded/failed with
// the elapsed time. A step returning errSkipped is reported as skipped.
func (e *Engine) phase(ctx context.Context, name event.Phase, run func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	start := e.now()
	e.emit(event.PhaseEvent{Phase: name, State: PhaseStarted})
	err := run(ctx)
	elapsed := time.Since(start).Milliseconds()
	var skip *skipped
	switch {
	case errors.As(err, &skip):
		e.emit(event.PhaseEvent{Phase: name, State: PhaseSkipped, ElapsedMS: elapsed, Message: skip.reason})
		err = nil
	case err != nil:
		e.emit(event.PhaseEvent{Phase: name, State: PhaseFailed, ElapsedMS: elapsed, Message: renderError(err, e.Namer)})
	default:
		e.emit(event.PhaseEvent{Phase: name, State: PhaseSucceeded, ElapsedMS: elapsed})
	}
	e.checkpoint(ctx, "after-"+string(name))
	return err
}

type skipped struct{ reason string }

func (s *skipped) Error() string { return "skipped: " + s.reason }

func skip(format string, args ...any) error { return &skipped{reason: fmt.Sprintf(format, args...)} }

// finish emits the result event for an operation and returns err unchanged.
func (e *Engine) finish(err error, okMessage, tokenDir string) error {
	if err == nil {
		e.emit(event.ResultEvent{OK: true, Message: okMessage, TokenDir: tokenDir})
		return nil
	}
	e.emit(FailedResult(err, e.Namer, tokenDir))
	return err
}

// FailedResult is the result of an operation that failed with err: the
// failure itself (its kind and the input it names are for frontends to
// decide from, the exit number for the CLI to derive) and its message
// worded by n. A frontend that refuses a request before the engine runs
// reports it too.
func FailedResult(err error, n Namer, tokenDir string) event.ResultEvent {
	return event.ResultEvent{OK: false, Err: err, Message: renderError(err, n), TokenDir: tokenDir}
}

// Refuse reports the failed result of a request a frontend refuses before
// the engine runs (the result the engine would give, worded by its Namer),
// through the same Reporter as every event, and returns err.
func (e *Engine) Refuse(err error) error {
	e.emit(FailedResult(err, e.Namer, ""))
	return err
}

// InputOf is the input a failure names (an input error's Input: the flag,
// or the wizard's field, the user fixes), "" for none. Frontends return
// the user to that field without reading the message's words.
func InputOf(err error) Input {
	var ie *InputError
	if errors.As(err, &ie) {
		return ie.Input
	}
	return ""
}

// Package failure says what kind of failure ended an operation, with the
// fields a frontend needs to decide what to show or offer next. It is a leaf:
// the engine, its providers, creds and the wizard classify errors with it;
// only the CLI's top (internal/cli, cmd/kiln, through internal/exit) turns a
// kind into a process exit code (DESIGN.md §4).
package failure

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Kind is the class of a failure.
type Kind int

// The kinds, one per exit code of DESIGN.md §4 (the numbers are the CLI's,
// not this package's).
const (
	// None is the kind of a nil error.
	None Kind = iota
	// Failed: the operation failed.
	Failed
	// Input: bad input or usage; the message names the input to fix.
	Input
	// Confirm: the operation needs an explicit confirmation; nothing was
	// changed.
	Confirm
	// Locked: another operation holds the lock (Holder and Since say who
	// and since when, when known).
	Locked
	// Timeout: the operation timed out waiting.
	Timeout
	// Interrupted: the user interrupted the operation.
	Interrupted
)

var kindNames = [...]string{"none", "failed", "input", "confirm", "locked", "timeout", "interrupted"}

func (k Kind) String() string {
	if int(k) >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Error is a classified failure.
type Error struct {
	Kind Kind
	Err  error
	// Holder and Since (Locked): who holds the lock and since when, when
	// known.
	Holder string
	Since  time.Time
	// NothingChanged: the operation stopped before it changed anything
	// (a Confirm failure always is; see NothingChanged). Frontends
	// decide from it, never from the message's words.
	NothingChanged bool
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Wrap classifies err as kind (nil stays nil).
func Wrap(kind Kind, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Kind: kind, Err: err}
}

// Newf returns a failure of kind with a formatted message (%w wraps).
func Newf(kind Kind, format string, args ...any) error {
	return &Error{Kind: kind, Err: fmt.Errorf(format, args...)}
}

// BadInput reports bad input or usage; the message must name the input.
func BadInput(format string, args ...any) error { return Newf(Input, format, args...) }

// NeedsConfirm reports that the operation needs an explicit confirmation
// and nothing was changed.
func NeedsConfirm(format string, args ...any) error { return Newf(Confirm, format, args...) }

// Lock reports that another operation holds the lock.
func Lock(format string, args ...any) error { return Newf(Locked, format, args...) }

// Held reports that holder (a readable identity, "" when unknown) holds
// the lock, since since (zero when unknown): a Locked failure with Holder
// and Since set; the message names them in its own words.
func Held(holder string, since time.Time, format string, args ...any) error {
	return &Error{Kind: Locked, Err: fmt.Errorf(format, args...), Holder: holder, Since: since}
}

// Deadline reports a timeout while waiting.
func Deadline(format string, args ...any) error { return Newf(Timeout, format, args...) }

// Interrupt reports that the user interrupted the operation.
func Interrupt(format string, args ...any) error { return Newf(Interrupted, format, args...) }

// Unchanged returns a failure of kind after which nothing was changed
// (NothingChanged is set); the message says so in its own words.
func Unchanged(kind Kind, format string, args ...any) error {
	return &Error{Kind: kind, Err: fmt.Errorf(format, args...), NothingChanged: true}
}

// NothingChanged reports whether err says the operation changed nothing:
// its first classified failure is a Confirm (which by definition stopped
// before any change) or is marked NothingChanged. It is false when that is
// not known.
func NothingChanged(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	return e.Kind == Confirm || e.NothingChanged
}

// Of returns err's kind: the first classified failure in its chain, else
// Interrupted for context.Canceled, Timeout for context.DeadlineExceeded,
// Failed for any other error and None for nil.
func Of(err error) Kind {
	if err == nil {
		return None
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	switch {
	case errors.Is(err, context.Canceled):
		return Interrupted
	case errors.Is(err, context.DeadlineExceeded):
		return Timeout
	}
	return Failed
}

// Is reports whether err's kind is kind.
func Is(err error, kind Kind) bool { return Of(err) == kind }

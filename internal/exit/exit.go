// Package exit turns failures into kiln's exit codes (DESIGN.md §4).
//
// Lower layers classify errors with engine/failure; the CLI's top
// (internal/cli, cmd/kiln) is the one place that turns a failure's kind
// into a process exit code (see Code).
package exit

import (
	"errors"
	"fmt"

	"github.com/kilnctl/kiln/engine/failure"
)

// Exit codes (contract).
const (
	OK          = 0
	Failed      = 1
	BadInput    = 2
	NeedConfirm = 3
	Locked      = 4
	Timeout     = 5
	Interrupted = 130
)

// Error carries an exit code with the error that caused it.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Usage reports bad input or usage; the message must name the field.
func Usage(format string, args ...any) error { return failure.BadInput(format, args...) }

// Confirm reports that the operation needs an explicit confirmation and
// nothing was changed.
func Confirm(format string, args ...any) error { return failure.NeedsConfirm(format, args...) }

// Lock reports that another operation holds the lock.
func Lock(format string, args ...any) error { return failure.Lock(format, args...) }

// Deadline reports a timeout while waiting for readiness.
func Deadline(format string, args ...any) error { return failure.Deadline(format, args...) }

// Interrupt reports that the user interrupted the operation.
func Interrupt(format string, args ...any) error { return failure.Interrupt(format, args...) }

// codes maps each failure kind to its exit code.
var codes = map[failure.Kind]int{
	failure.None:        OK,
	failure.Failed:      Failed,
	failure.Input:       BadInput,
	failure.Confirm:     NeedConfirm,
	failure.Locked:      Locked,
	failure.Timeout:     Timeout,
	failure.Interrupted: Interrupted,
}

// Code returns the exit code for err: an explicit Error's code, else its
// failure kind's (failure.Of: the first classified failure in the chain;
// context.Canceled is interrupted, context.DeadlineExceeded a timeout, any
// other error 1).
func Code(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeOf(failure.Of(err))
}

// CodeOf returns the exit code of a failure kind.
func CodeOf(k failure.Kind) int {
	if c, ok := codes[k]; ok {
		return c
	}
	panic(fmt.Sprintf("exit: no code for failure kind %v", k))
}

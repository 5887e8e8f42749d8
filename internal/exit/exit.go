// Package exit classifies errors into kiln's exit codes (DESIGN.md §4).
//
// Any package may wrap an error in one of the classes below; cmd/kiln is the
// one place that turns a class into a process exit code (see Code).
package exit

import (
	"context"
	"errors"
	"fmt"
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

func wrap(code int, format string, args ...any) error {
	return &Error{Code: code, Err: fmt.Errorf(format, args...)}
}

// Usage reports bad input or usage; the message must name the field.
func Usage(format string, args ...any) error { return wrap(BadInput, format, args...) }

// Confirm reports that the operation needs an explicit confirmation and
// nothing was changed.
func Confirm(format string, args ...any) error { return wrap(NeedConfirm, format, args...) }

// Lock reports that another operation holds the lock.
func Lock(format string, args ...any) error { return wrap(Locked, format, args...) }

// Deadline reports a timeout while waiting for readiness.
func Deadline(format string, args ...any) error { return wrap(Timeout, format, args...) }

// Interrupt reports that the user interrupted the operation.
func Interrupt(format string, args ...any) error { return wrap(Interrupted, format, args...) }

// Code returns the exit code for err: the innermost classified code, else
// 1. context.Canceled maps to 130 and context.DeadlineExceeded to 5 when no
// class was given.
func Code(err error) int {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	switch {
	case errors.Is(err, context.Canceled):
		return Interrupted
	case errors.Is(err, context.DeadlineExceeded):
		return Timeout
	}
	return Failed
}

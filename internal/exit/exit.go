// Package exit turns failures into kiln's exit codes (DESIGN.md §4).
//
// Lower layers (the engine, its providers, creds, the wizard) classify
// errors with engine/failure and never see a number; the CLI's top
// (internal/cli, cmd/kiln) is the one place that turns a failure's kind
// into a process exit code or a result's exit_code (see Code).
package exit

import (
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

// Code returns the exit code for err: its failure kind's (failure.Of: the
// first classified failure in the chain; context.Canceled is interrupted,
// context.DeadlineExceeded a timeout, any other error 1, nil 0).
func Code(err error) int { return CodeOf(failure.Of(err)) }

// CodeOf returns the exit code of a failure kind.
func CodeOf(k failure.Kind) int {
	if c, ok := codes[k]; ok {
		return c
	}
	panic(fmt.Sprintf("exit: no code for failure kind %v", k))
}

package engine

import (
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/input"
)

// Input names one thing the user gives an operation: a flag in the CLI, a
// form field or key in the wizard. Engine messages that tell the user what
// to give next carry the Input, not a frontend's word for it. The type and
// its error live in the leaf package engine/input, so that the engine's
// sub-packages and providers use them too; these are its names here.
type Input = input.Input

// The inputs engine messages refer to (see engine/input for all).
const (
	InputContext  = input.Context
	InputContexts = input.Contexts
	InputRegion   = input.Region
	InputRegions  = input.Regions
	InputContinue = input.Continue
	InputYes      = input.Yes
	InputTokenDir = input.TokenDir
	InputConfig   = input.Config
	InputAll      = input.All
	InputStack    = input.Stack
	// The aws provider's create inputs (the wizard's create form).
	InputProfile      = input.Profile
	InputInstanceType = input.InstanceType
	InputNodes        = input.Nodes
	// InputDeleteProjects lets upgrade remove a tenant that has projects.
	InputDeleteProjects = input.DeleteProjects
	// InputRestack lets upgrade restack projects whose stack changed.
	InputRestack = input.Restack
	// InputKeepOld keeps a rotated-out key trusted for a while.
	InputKeepOld = input.KeepOld
	// InputFinish ends a key rotation kept open with InputKeepOld.
	InputFinish = input.Finish
)

// Namer is how a frontend words an Input in messages.
type Namer = input.Namer

// FlagName words an Input as the CLI flag that gives it ("--continue").
func FlagName(in Input) string { return input.FlagName(in) }

// InputError is an error the user fixes by giving Input, worded by each
// frontend (see input.Error). Set Engine.Namer so result events carry the
// frontend's words.
type InputError = input.Error

// inputErr returns an InputError of kind kind. format names the
// input with the verb {input} (another input X with {input:X}); args fill
// the other verbs.
func inputErr(kind failure.Kind, in Input, object, format string, args ...any) error {
	return input.New(kind, in, object, format, args...)
}

// NewInputError is inputErr for providers: an error of kind kind
// that the user fixes by giving in; format names the input with {input}.
func NewInputError(kind failure.Kind, in Input, object, format string, args ...any) error {
	return input.New(kind, in, object, format, args...)
}

// renderError words err for the frontend behind n: an InputError anywhere
// in err's chain is reworded in place.
func renderError(err error, n Namer) string { return input.Render(err, n) }

// inputName words in for the engine's frontend.
func (e *Engine) inputName(in Input) string {
	if e.Namer != nil {
		return e.Namer(in)
	}
	return FlagName(in)
}

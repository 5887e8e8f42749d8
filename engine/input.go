package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kilnctl/kiln/internal/exit"
)

// Input names one thing the user gives an operation: a flag in the CLI, a
// form field or key in the wizard. Engine messages that tell the user what
// to give next carry the Input, not a frontend's word for it.
type Input string

// The inputs engine messages refer to.
const (
	InputContext  Input = "context"   // the kube provider's location
	InputContexts Input = "contexts"  // the kube provider's discovery scope
	InputRegion   Input = "region"    // the aws provider's location
	InputRegions  Input = "regions"   // the aws provider's discovery scope
	InputContinue Input = "continue"  // continue an installed platform
	InputYes      Input = "yes"       // confirm a destroy
	InputTokenDir Input = "token-dir" // the token dir
	InputConfig   Input = "config"    // the cluster config file
	InputAll      Input = "all"       // every project of a cluster
	// InputDeleteProjects lets upgrade remove a tenant that has projects.
	InputDeleteProjects Input = "delete-projects"
	// InputRestack lets upgrade restack projects whose stack changed.
	InputRestack Input = "restack"
	// InputKeepOld keeps a rotated-out key trusted for a while.
	InputKeepOld Input = "keep-old"
	// InputFinish ends a key rotation kept open with InputKeepOld.
	InputFinish Input = "finish"
)

// Namer is how a frontend words an Input in messages.
type Namer func(Input) string

// FlagName words an Input as the CLI flag that gives it ("--continue").
func FlagName(in Input) string { return "--" + string(in) }

// inputMark stands for the Input's words inside an InputError's text.
const inputMark = "\x00input\x00"

// InputError is an error the user fixes by giving Input. Its text names
// the input through a Namer, so each frontend words it its own way: the
// CLI as a flag (Error uses FlagName), the wizard as a form field (Render
// with its own Namer, or set Engine.Namer so result events carry its
// words). Object is what the error is about (the cluster NAME, or a path).
type InputError struct {
	Input  Input
	Object string
	text   string // formatted, with inputMark where the input is named
}

// Error words the input as the CLI flag.
func (e *InputError) Error() string { return e.Render(FlagName) }

// Render words the error with n naming the input.
func (e *InputError) Render(n Namer) string {
	if n == nil {
		n = FlagName
	}
	return strings.ReplaceAll(e.text, inputMark, n(e.Input))
}

// inputErr returns an InputError with exit code code. format names the
// input with the verb {input}; args fill the other verbs.
func inputErr(code int, in Input, object, format string, args ...any) error {
	text := fmt.Sprintf(strings.ReplaceAll(format, "{input}", inputMark), args...)
	return &exit.Error{Code: code, Err: &InputError{Input: in, Object: object, text: text}}
}

// NewInputError is inputErr for providers: an error with exit code code
// that the user fixes by giving in; format names the input with {input}.
func NewInputError(code int, in Input, object, format string, args ...any) error {
	return inputErr(code, in, object, format, args...)
}

// renderError words err for the frontend behind n: an InputError anywhere
// in err's chain is reworded in place.
func renderError(err error, n Namer) string {
	msg := err.Error()
	if n == nil {
		return msg
	}
	var ie *InputError
	if !errors.As(err, &ie) {
		return msg
	}
	return strings.Replace(msg, ie.Error(), ie.Render(n), 1)
}

// inputName words in for the engine's frontend.
func (e *Engine) inputName(in Input) string {
	if e.Namer != nil {
		return e.Namer(in)
	}
	return FlagName(in)
}

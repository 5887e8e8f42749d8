// Package input names what the user gives an operation — a flag in the
// CLI, a form field or key in the wizard — so that engine and provider
// messages telling the user what to give next can be worded by each
// frontend in its own terms. It is a leaf package: engine, its providers
// and its sub-packages (config, project) all use it.
package input

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/kilnctl/kiln/engine/failure"
)

// Input names one thing the user gives an operation.
type Input string

// The inputs engine messages refer to.
const (
	Context             Input = "context"               // the kube provider's location
	Contexts            Input = "contexts"              // the kube provider's discovery scope
	Kubeconfig          Input = "kubeconfig"            // the kubeconfig file
	Region              Input = "region"                // the aws provider's location
	Regions             Input = "regions"               // the aws provider's discovery scope
	Profile             Input = "profile"               // the AWS shared-config profile
	InstanceType        Input = "instance-type"         // the aws node group's instance type
	Nodes               Input = "nodes"                 // the aws node group's size
	KubernetesVersion   Input = "kubernetes-version"    // the EKS control plane's Kubernetes version
	KubeContextOverride Input = "kube-context-override" // an emulated EKS cluster's stand-in context
	Continue            Input = "continue"              // continue an installed platform
	Yes                 Input = "yes"                   // confirm a destroy
	TokenDir            Input = "token-dir"             // the token dir
	Config              Input = "config"                // the cluster config file
	All                 Input = "all"                   // every project of a cluster
	Stack               Input = "stack"                 // a project's stack
	Tenant              Input = "tenant"                // a tenant
	DeleteProjects      Input = "delete-projects"       // upgrade may remove a tenant with projects
	Restack             Input = "restack"               // upgrade restacks projects whose stack changed
	KeepOld             Input = "keep-old"              // rotate-key keeps the old key trusted for a while
	Finish              Input = "finish"                // rotate-key ends a rotation kept open
	Admin               Input = "admin"                 // an EKS admin access entry's principal
	Viewer              Input = "viewer"                // an EKS viewer access entry's principal
	RotateToken         Input = "rotate-token"          // upgrade issues a tenant's token again
	Probe               Input = "probe"                 // wait asks the gateway to judge each tenant's token
	KeyringBackend      Input = "keyring-backend"       // the keyring kiln keeps token dirs' places in
)

// Namer is how a frontend words an Input in messages.
type Namer func(Input) string

// FlagName words an Input as the CLI flag that gives it ("--continue";
// "-c/--config" for the config file).
func FlagName(in Input) string {
	if in == Config {
		return "-c/--config"
	}
	return "--" + string(in)
}

// mark stands for an input's words inside an Error's text.
func mark(in Input) string { return "\x00" + string(in) + "\x00" }

var marks = regexp.MustCompile("\x00([a-z-]+)\x00")

// Error is an error the user fixes by giving Input. Its text names inputs
// through a Namer, so each frontend words it its own way: the CLI as a
// flag (Error uses FlagName), the wizard as a form field (Render with its
// own Namer). Object is what the error is about (the cluster NAME, a path,
// a value).
type Error struct {
	Input  Input
	Object string
	text   string // formatted, with marks where inputs are named
}

// Error words the inputs as CLI flags, with the CLI-only parts (see
// CLIOnly).
func (e *Error) Error() string { return e.render(FlagName, true) }

// Render words the error with n naming the inputs. A frontend's Namer
// gets the text without its CLI-only parts (see CLIOnly); nil words it as
// Error does.
func (e *Error) Render(n Namer) string {
	if n == nil {
		return e.Error()
	}
	return e.render(n, false)
}

func (e *Error) render(n Namer, cli bool) string {
	text := cliOnly.ReplaceAllStringFunc(e.text, func(m string) string {
		if cli {
			return strings.Trim(m, "\x01")
		}
		return ""
	})
	return marks.ReplaceAllStringFunc(text, func(m string) string {
		return n(Input(strings.Trim(m, "\x00")))
	})
}

// CLIOnly marks s, a part of an Error's text (an argument of New), as for
// the CLI only: a command to run, which names flags. Error and Render(nil)
// keep it; Render with a frontend's Namer leaves it out, so that the
// wizard never tells its user to type a flag. s reads as a whole without
// it (" (`kiln upgrade aws dev1 --kubernetes-version 1.31`)", say).
func CLIOnly(s string) string { return "\x01" + strings.ReplaceAll(s, "\x01", "") + "\x01" }

var cliOnly = regexp.MustCompile("\x01[^\x01]*\x01")

// New returns an Error of kind kind, about object, fixed by giving
// in. format names in with the verb {input} and any other input X with
// {input:X}; args fill the other verbs.
func New(kind failure.Kind, in Input, object, format string, args ...any) error {
	text := fmt.Sprintf(markVerbs(format, in), args...)
	return &failure.Error{Kind: kind, Err: &Error{Input: in, Object: object, text: text}}
}

var verbs = regexp.MustCompile(`\{input(?::([a-z-]+))?\}`)

func markVerbs(format string, in Input) string {
	return verbs.ReplaceAllStringFunc(format, func(v string) string {
		if m := verbs.FindStringSubmatch(v); m[1] != "" {
			return mark(Input(m[1]))
		}
		return mark(in)
	})
}

// Render words err for the frontend behind n: an Error anywhere in err's
// chain is reworded in place.
func Render(err error, n Namer) string {
	msg := err.Error()
	if n == nil {
		return msg
	}
	var ie *Error
	if !errors.As(err, &ie) {
		return msg
	}
	return strings.Replace(msg, ie.Error(), ie.Render(n), 1)
}

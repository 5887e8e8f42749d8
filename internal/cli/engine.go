package cli

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/kilnctl/kiln/engine/event"

	"golang.org/x/term"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/provider/kube"
	"github.com/kilnctl/kiln/internal/exit"
)

// provider builds the provider named on the command line.
func (g *globals) provider(name string) (engine.Provider, error) {
	switch name {
	case "kube":
		if g.region != "" || len(g.regions) > 0 {
			return nil, failure.BadInput("--region/--regions: only for PROVIDER aws, not kube")
		}
		if err := g.aws.onlyForAWS(); err != nil {
			return nil, err
		}
		p := g.kubeProvider(g.context)
		if len(g.contexts) > 0 {
			if err := p.ValidateScope(); err != nil {
				return nil, err
			}
		}
		// Only the context the user named may prompt for a login, and
		// only when a person is at the terminal.
		p.Interactive = !g.headless && g.stdinIsTerminal()
		return p, nil
	case "aws":
		if len(g.contexts) > 0 {
			return nil, failure.BadInput("--contexts: only for PROVIDER kube; for aws use --regions")
		}
		if g.context != "" {
			return nil, failure.BadInput("--context: only for PROVIDER kube; for aws use --region (and --kube-context-override to map the EKS endpoint to a kubeconfig context)")
		}
		return g.awsProvider()
	}
	return nil, failure.BadInput("PROVIDER %q: must be kube or aws", name)
}

// kubeProvider builds the kube provider for context with the discovery
// flags: --discovery-timeout, and the scope --contexts, else $KILN_CONTEXTS.
// Its credential plugins never get the terminal (see provider above).
func (g *globals) kubeProvider(context string) *kube.Provider {
	p := kube.New(g.kubeconfig, context)
	p.Timeout = g.discoveryTO
	p.Only = g.contexts
	if len(p.Only) == 0 {
		for _, c := range strings.Split(os.Getenv(kube.ContextsEnv), ",") {
			if c = strings.TrimSpace(c); c != "" {
				p.Only = append(p.Only, c)
			}
		}
	}
	return p
}

// sink is the headless frontend: NDJSON on stdout with -o json, readable
// lines on stderr otherwise.
// Every event also goes to --log-file; debug events reach it only with -v.
func (g *globals) sink(quiet bool) engine.Sink {
	if g.output == "json" {
		js := newJSONPrinter(g.stdout)
		js.failures = g.stderr
		return g.rec.tee(js)
	}
	return g.rec.tee(&textPrinter{w: g.stderr, quiet: quiet})
}

// keyring opens the keyring. A keyring that cannot be opened is not fatal:
// kiln warns and still finds token dirs by --token-dir and the default path.
// A bad --keyring-backend is bad input.
func (g *globals) keyring(sink engine.Sink) (engine.Keyring, error) {
	store, err := g.openStore(g.terminalPassphrase())
	if err != nil {
		if exit.Code(err) == exit.BadInput && g.keyringBackend != "auto" {
			return nil, err
		}
		event.NewReporter(sink, nil).Logf(event.LevelWarn, "keyring unavailable (%v); token dirs are found by --token-dir and the default path", err)
		return nil, nil
	}
	return store, nil
}

// newEngine wires an engine to the headless frontend.
func (g *globals) newEngine(quiet, cont bool) (*engine.Engine, error) {
	sink := g.sink(quiet)
	kr, err := g.keyring(sink)
	if err != nil {
		return nil, err
	}
	var confirm engine.Confirmer = headlessConfirmer{cont: cont, yes: g.yes}
	if !g.headless && g.stdinIsTerminal() && g.output == "text" {
		confirm = promptConfirmer{in: bufio.NewReader(g.stdin), out: g.stderr}
	}
	// No Namer: the engine words inputs as flags and keeps the commands
	// its messages give to run (input.CLIOnly), which a frontend's Namer
	// leaves out.
	e := &engine.Engine{Sink: sink, Confirm: confirm, Version: g.version, Hooks: g.hooks}
	if kr != nil {
		e.Keyring = kr
	}
	return e, nil
}

// terminalPassphrase reads the file keyring's passphrase from the terminal
// without echo, or is nil when stdin is not a terminal.
func (g *globals) terminalPassphrase() func(prompt string) (string, error) {
	in, ok := g.stdin.(*os.File)
	if !ok || !term.IsTerminal(int(in.Fd())) {
		return nil
	}
	return func(prompt string) (string, error) {
		fmt.Fprint(g.stderr, prompt)
		b, err := term.ReadPassword(int(in.Fd()))
		fmt.Fprintln(g.stderr)
		return string(b), err
	}
}

func (g *globals) stdinIsTerminal() bool {
	in, ok := g.stdin.(*os.File)
	return ok && term.IsTerminal(int(in.Fd()))
}

// target is the cluster `CMD PROVIDER NAME` is about.
func (g *globals) target(p engine.Provider, name string) engine.Target {
	return engine.Target{Provider: p, Name: name, TokenDir: g.tokenDir}
}

// runOp runs a cluster operation for `CMD PROVIDER NAME` through the
// headless frontend.
func (g *globals) runOp(args []string, cont bool, op func(*engine.Engine, engine.Target) error) error {
	p, err := g.provider(args[0])
	if err != nil {
		return err
	}
	e, err := g.newEngine(false, cont)
	if err != nil {
		return err
	}
	return done(op(e, g.target(p, args[1])))
}

// done marks an engine error as reported: the engine already emitted it as
// the result event, so main only sets the exit code.
func done(err error) error { return markReported(err) }

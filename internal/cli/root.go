// Package cli wires kiln's commands: flags -> engine call -> frontend.
// One file per command.
package cli

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/provider/kube"
)

// BuildInfo is stamped into the binary at build time.
type BuildInfo struct {
	Version, Commit, Date string
}

// Options are what the program that runs kiln gives the command tree
// besides its build stamp.
type Options struct {
	// Hooks are test hooks (engine.Hooks): set on every engine and
	// provider the commands and the wizard build, so an operation's
	// checkpoints reach them. The kiln binary passes none; cmd/kiln's
	// test binary, which the e2e tests run as kiln, passes the ones its
	// environment configures (internal/testenv/testhooks).
	Hooks engine.Hooks
}

// globals are the common flags of DESIGN.md §4.
type globals struct {
	headless       bool
	output         string
	yes            bool
	timeout        time.Duration
	config         string
	tokenDir       string
	kubeconfig     string
	context        string
	region         string
	regions        []string
	contexts       []string
	discoveryTO    time.Duration
	discoveryTOSet bool
	keyringBackend string
	aws            awsFlags
	rec            record
	// version is kiln's (BuildInfo): it names the default gateway image.
	version string
	info    BuildInfo
	// hooks are Options.Hooks (nil in a release build).
	hooks engine.Hooks

	stdin          io.Reader
	stdout, stderr io.Writer
	// passphrase is KILN_KEYRING_PASSPHRASE, taken out of the environment
	// when the command tree is built: credential plugins of kubeconfig
	// contexts, which discovery runs, must not receive it.
	passphrase string
}

// NewRoot builds the kiln command tree.
func NewRoot(info BuildInfo) *cobra.Command { return NewRootWith(info, Options{}) }

// NewRootWith builds the kiln command tree with opts.
func NewRootWith(info BuildInfo, opts Options) *cobra.Command {
	g := &globals{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, version: info.Version, info: info,
		hooks: opts.Hooks, passphrase: creds.TakeEnvPassphrase()}
	root := &cobra.Command{
		Use:   "kiln",
		Short: "Create, inspect and tear down kiln clusters and their projects",
		Long: `kiln manages the whole lifecycle of kiln clusters (a Kubernetes cluster with
kiln's platform layer) and the projects that run on them.

On a terminal, running kiln without a command opens the wizard. Every
operation also runs headless (--headless, or automatically when stdin or
stdout is not a terminal) and prints NDJSON events with -o json.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			g.discoveryTOSet = cmd.Flags().Changed("discovery-timeout")
			if err := g.validate(); err != nil {
				return err
			}
			if err := g.rec.open(); err != nil {
				return err
			}
			cmd.SetContext(g.rec.context(cmd.Context()))
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && g.interactive() {
				return g.runWizard(cmd.Context())
			}
			return cmd.Help()
		},
	}
	root.SetIn(g.stdin)
	root.SetOut(g.stdout)
	root.SetErr(g.stderr)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return failure.BadInput("%v (see `%s --help`)", err, cmd.CommandPath())
	})

	pf := root.PersistentFlags()
	pf.BoolVar(&g.headless, "headless", false, "never open the wizard; print events (automatic when stdin or stdout is not a terminal)")
	pf.StringVarP(&g.output, "output", "o", "text", "output format: text or json (NDJSON events on stdout)")
	pf.BoolVar(&g.yes, "yes", false, "answer yes to confirmations (destroy, upgrade, rotate-key)")
	pf.DurationVar(&g.timeout, "timeout", 10*time.Minute, "give up waiting for readiness after this long (exit 5)")
	pf.StringVarP(&g.config, "config", "c", "", "cluster config file (kind ClusterConfig)")
	pf.StringVar(&g.tokenDir, "token-dir", "", "token directory (default: keyring entry, then $XDG_STATE_HOME/kiln/PROVIDER/NAME/tokens)")
	pf.StringVar(&g.kubeconfig, "kubeconfig", "", "kubeconfig file (kube provider; default: $KUBECONFIG or ~/.kube/config)")
	pf.StringVar(&g.context, "context", "", "kubeconfig context of the cluster (kube provider)")
	pf.StringVar(&g.region, "region", "", "AWS region of the cluster (aws provider)")
	pf.StringSliceVar(&g.regions, "regions", nil, "AWS regions to search (aws provider; default: every region)")
	pf.StringSliceVar(&g.contexts, "contexts", nil, "kubeconfig contexts discovery searches (kube provider; default: $"+kube.ContextsEnv+", else every context)")
	pf.DurationVar(&g.discoveryTO, "discovery-timeout", kube.DefaultTimeout, "give up on one context or region during discovery after this long, whatever it waits on (credential plugin, connect, TLS, requests)")
	pf.StringVar(&g.keyringBackend, "keyring-backend", "auto", "keyring: auto, secret-service, keychain, wincred or file")
	g.aws.register(pf)
	pf.CountVarP(&g.rec.verbose, "verbose", "v", "add debug events: each Kubernetes and AWS API request (method, path, status, latency) and retry; -vv adds Kubernetes query strings")
	pf.StringVar(&g.rec.path, "log-file", "", "append every event, debug included, as NDJSON to this file (0600), whatever the frontend")

	root.AddCommand(
		newCreateCmd(g),
		newWaitCmd(g),
		newStatusCmd(g),
		newInspectCmd(g),
		newListCmd(g),
		newDestroyCmd(g),
		newUpgradeCmd(g),
		newRotateKeyCmd(g),
		newProjectCmd(g),
		newTokensCmd(g),
		newAWSCmd(g),
		newGatewayCmd(g),
		newVersionCmd(g, info),
		newCompletionCmd(root),
		newSupportCmd(g, info),
		newEnvironmentTopic(),
	)
	for _, c := range root.Commands() {
		wrapArgs(c)
	}
	refuseUnknownCommands(root)
	g.registerCompletions(root)
	return root
}

// refuseUnknownCommands makes an unknown command (kiln creat …, kiln
// project strt …) bad input, exit 2, suggesting the closest command, on
// every command that has subcommands (none of them takes arguments of its
// own). Such a command run alone prints its help.
func refuseUnknownCommands(c *cobra.Command) {
	if c.HasSubCommands() {
		if !c.Runnable() {
			c.RunE = func(cmd *cobra.Command, args []string) error { return cmd.Help() }
		}
		c.Args = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			return failure.BadInput("unknown command %q for %q; %s (see `%s --help`)", args[0], cmd.CommandPath(), suggest(cmd, args[0]), cmd.CommandPath())
		}
	}
	for _, sub := range c.Commands() {
		refuseUnknownCommands(sub)
	}
}

// suggest names the command closest to typed: cobra's suggestions (typos
// within two edits, prefixes) when it has any, else the command with the
// smallest edit distance.
func suggest(cmd *cobra.Command, typed string) string {
	if s := cmd.SuggestionsFor(typed); len(s) > 0 {
		return "did you mean " + strings.Join(s, " or ") + "?"
	}
	best, bestD := "", -1
	for _, c := range cmd.Commands() {
		if !c.IsAvailableCommand() {
			continue
		}
		if d := editDistance(strings.ToLower(typed), c.Name()); bestD < 0 || d < bestD {
			best, bestD = c.Name(), d
		}
	}
	if best == "" {
		return "it has no subcommands"
	}
	return "the closest command is " + best
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func (g *globals) validate() error {
	switch g.output {
	case "text", "json":
	default:
		return failure.BadInput("--output/-o: %q is not a format; use text or json", g.output)
	}
	if g.timeout <= 0 {
		return failure.BadInput("--timeout: must be positive, got %s", g.timeout)
	}
	if g.tokenDir != "" && !filepath.IsAbs(g.tokenDir) {
		// A relative dir would be stored in the keyring and read back from
		// another working directory: make it absolute before any use.
		abs, err := filepath.Abs(g.tokenDir)
		if err != nil {
			return failure.BadInput("--token-dir: %q: %v", g.tokenDir, err)
		}
		g.tokenDir = abs
	}
	if g.discoveryTO <= 0 {
		return failure.BadInput("--discovery-timeout: must be positive, got %s", g.discoveryTO)
	}
	return nil
}

// interactive reports whether the wizard may be used: both ends are a
// terminal and --headless was not given.
func (g *globals) interactive() bool {
	if g.headless {
		return false
	}
	in, ok1 := g.stdin.(*os.File)
	out, ok2 := g.stdout.(*os.File)
	return ok1 && ok2 && term.IsTerminal(int(in.Fd())) && term.IsTerminal(int(out.Fd()))
}

// wrapArgs turns cobra's positional-argument errors into usage errors (exit 2).
func wrapArgs(c *cobra.Command) {
	if c.Args != nil {
		orig := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := orig(cmd, args); err != nil {
				return failure.BadInput("%v; usage: %s", err, cmd.UseLine())
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		wrapArgs(sub)
	}
}

// reportedError marks an error whose message the frontend already showed
// (as a result event or line), so main does not print it twice.
type reportedError struct{ err error }

func (e *reportedError) Error() string { return e.err.Error() }
func (e *reportedError) Unwrap() error { return e.err }

// Reported reports whether err was already shown to the user.
func Reported(err error) bool {
	var r *reportedError
	return errors.As(err, &r)
}

func markReported(err error) error {
	if err == nil {
		return nil
	}
	return &reportedError{err: err}
}

package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/provider/aws"
	"github.com/kilnctl/kiln/engine/provider/kube"
	"github.com/kilnctl/kiln/tui"
)

// parseHint parses hint, a command line as kiln prints it, with kiln's
// real command tree: the command it names must exist and take its flags
// and its number of arguments. It returns the command and its arguments.
func parseHint(t *testing.T, hint string) (*cobra.Command, []string) {
	t.Helper()
	fields := strings.Fields(hint)
	if len(fields) < 2 || fields[0] != "kiln" {
		t.Fatalf("hint %q is not a kiln command", hint)
	}
	cmd, args, err := parseCommandLine(NewRoot(BuildInfo{}), fields[1:], false)
	if err != nil {
		t.Fatalf("%q: %v", hint, err)
	}
	return cmd, args
}

// parseCommandLine parses args (a command line after "kiln") with root,
// kiln's real command tree, without running anything: the command it
// names must exist and take its flags and its number of arguments. With
// bare, "kiln" alone (the wizard, or help) is a command line too. It
// returns the command and its arguments (none for --help).
func parseCommandLine(root *cobra.Command, args []string, bare bool) (*cobra.Command, []string, error) {
	root.InitDefaultHelpCmd()
	cmd, rest, err := root.Find(args)
	if err != nil {
		return nil, nil, err
	}
	if cmd == root && !(bare && len(args) == 0) {
		if err := cmd.ParseFlags(rest); err != nil {
			return nil, nil, fmt.Errorf("flags: %w", err)
		}
		if len(cmd.Flags().Args()) > 0 {
			// an unknown command: kiln's own message, with the closest one
			if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
				return nil, nil, fmt.Errorf("names no command: %w", err)
			}
		}
		if !bare || len(cmd.Flags().Args()) > 0 {
			return nil, nil, fmt.Errorf("names no command")
		}
		return cmd, nil, nil
	}
	if err := cmd.ParseFlags(rest); errors.Is(err, pflag.ErrHelp) {
		return cmd, nil, nil // --help: nothing to validate
	} else if err != nil {
		return nil, nil, fmt.Errorf("flags: %w", err)
	}
	if cmd.Name() == "help" && cmd.Parent() == root {
		// kiln help TOPIC|COMMAND: the topic must exist.
		if topic, _, err := root.Find(cmd.Flags().Args()); err != nil || topic == root {
			return nil, nil, fmt.Errorf("help: no command or topic %q", strings.Join(cmd.Flags().Args(), " "))
		}
		return cmd, cmd.Flags().Args(), nil
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		return nil, nil, fmt.Errorf("args: %w", err)
	}
	return cmd, cmd.Flags().Args(), nil
}

// Every command engine.Command builds for the hints kiln prints parses
// as the command it names, with the provider, NAME, the location flag of
// the provider and the token dir the user named.
func TestEngineHintsAreRunnableCommands(t *testing.T) {
	kubeT := engine.Target{Provider: &kube.Provider{}, Name: "dev1"}
	awsT := engine.Target{Provider: &aws.Provider{}, Name: "dev2", TokenDir: "/tmp/td"}
	for _, tc := range []struct {
		t        engine.Target
		location string
		verb     []string
		args     []string
		path     string
		flag     string
	}{
		{kubeT, "kind-dev1", []string{"destroy"}, nil, "kiln destroy", "context"},
		{awsT, "eu-west-1", []string{"destroy"}, nil, "kiln destroy", "region"},
		{kubeT, "kind-dev1", []string{"create"}, []string{"--continue", "-c", "dev1.yaml"}, "kiln create", "context"},
		{awsT, "eu-west-1", []string{"create"}, nil, "kiln create", "region"},
		{kubeT, "kind-dev1", []string{"upgrade"}, []string{"-c", "FILE", "--restack", "--delete-projects"}, "kiln upgrade", "context"},
		{awsT, "eu-west-1", []string{"upgrade"}, []string{"--kubernetes-version", "1.31"}, "kiln upgrade", "region"},
		{kubeT, "kind-dev1", []string{"rotate-key"}, []string{"--finish"}, "kiln rotate-key", "context"},
		{kubeT, "kind-dev1", []string{"rotate-key"}, nil, "kiln rotate-key", "context"},
		{kubeT, "kind-dev1", []string{"project", "rotate-token"}, []string{"default/blog"}, "kiln project rotate-token", "context"},
		{awsT, "eu-west-1", []string{"project", "start"}, []string{"default/blog"}, "kiln project start", "region"},
		{kubeT, "kind-dev1", []string{"status"}, []string{"--watch"}, "kiln status", "context"},
		{kubeT, "", []string{"destroy"}, nil, "kiln destroy", ""},
	} {
		hint := engine.Command(tc.t, tc.location, tc.verb, tc.args...)
		t.Run(hint, func(t *testing.T) {
			cmd, args := parseHint(t, hint)
			if cmd.CommandPath() != tc.path {
				t.Fatalf("%q runs %q, want %q", hint, cmd.CommandPath(), tc.path)
			}
			if args[0] != tc.t.Provider.Name() || args[1] != tc.t.Name {
				t.Errorf("%q: PROVIDER NAME are %v", hint, args)
			}
			if tc.flag != "" {
				if v, _ := cmd.Flags().GetString(tc.flag); v != tc.location {
					t.Errorf("%q: --%s is %q, want %q", hint, tc.flag, v, tc.location)
				}
			}
			if v, _ := cmd.Flags().GetString("token-dir"); v != tc.t.TokenDir {
				t.Errorf("%q: --token-dir is %q, want %q", hint, v, tc.t.TokenDir)
			}
		})
	}
}

// The wizard's final screen suggests commands a user copies: each kiln
// one parses, naming the cluster's context or region.
func TestWizardNextCommandsAreRunnable(t *testing.T) {
	for _, target := range []engine.ClusterRef{{Provider: "kube", Name: "dev1", Location: "kind-dev1"}, {Provider: "aws", Name: "dev2", Location: "eu-west-1"}} {
		for _, c := range tui.NextCommands(target) {
			if !strings.HasPrefix(c[0], "kiln ") {
				continue // kubectl
			}
			t.Run(c[0], func(t *testing.T) {
				cmd, args := parseHint(t, c[0])
				if args[0] != target.Provider || args[1] != target.Name {
					t.Errorf("%q: PROVIDER NAME are %v", c[0], args)
				}
				flag := map[string]string{"kube": "context", "aws": "region"}[target.Provider]
				if v, _ := cmd.Flags().GetString(flag); v != target.Location {
					t.Errorf("%q: --%s is %q, want %q", c[0], flag, v, target.Location)
				}
			})
		}
	}
}

// hintLiteral is a command in backquotes in a Go string literal of
// kiln's sources: how hints are written.
var hintLiteral = regexp.MustCompile("`(kiln [^`\"]+)`")

// Every hint written out in kiln's sources (a backquoted `kiln ...` in a
// message; format verbs stand for values) parses with the real command
// tree: a hint that names a command or flag kiln does not have fails here,
// also when no test provokes it (the aws provider's, say).
func TestEveryHintInTheSourcesParses(t *testing.T) {
	verbs := regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z]`)
	n := 0
	for _, dir := range []string{"../../engine", "../../internal", "../../tui", "../../creds"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, line := range strings.Split(string(src), "\n") {
				if strings.HasPrefix(strings.TrimSpace(line), "//") {
					continue
				}
				for _, m := range hintLiteral.FindAllStringSubmatch(line, -1) {
					hint := verbs.ReplaceAllString(m[1], "x1")
					n++
					t.Run(path+": "+hint, func(t *testing.T) { parseHint(t, hint) })
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n == 0 {
		t.Fatal("no hint found in the sources: the pattern is wrong")
	}
}

package tui_test

import (
	"strings"
	"testing"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/tui"
)

// TestActionsWordHintsAsKeys: every command the engine's hints give (the
// verbs and flags of engine.Command's callers) is worded as the wizard's
// key, never as a command line or a flag.
func TestActionsWordHintsAsKeys(t *testing.T) {
	flag := engine.FlagName
	for _, tc := range []struct {
		verb, args []string
		want       string
	}{
		{[]string{"destroy"}, nil, "d destroy"},
		{[]string{"create"}, []string{flag(engine.InputContinue)}, "c continue"},
		{[]string{"create"}, []string{flag(engine.InputContinue), "-c", "kiln.yaml"}, "c continue"},
		{[]string{"create"}, nil, "n new cluster"},
		{[]string{"upgrade"}, []string{"-c", "next.yaml"}, "u upgrade with the config file next.yaml"},
		{[]string{"upgrade"}, []string{"-c", "FILE"}, "u upgrade with a config file"},
		{[]string{"upgrade"}, []string{flag(engine.InputRestack)}, "u upgrade, Restack on"},
		{[]string{"upgrade"}, nil, "u upgrade"},
		{[]string{"rotate-key"}, []string{flag(engine.InputFinish)}, "K rotate key, then Finish rotation"},
		{[]string{"rotate-key"}, nil, "K rotate key"},
		{[]string{"status"}, nil, "i inspect"},
		{[]string{"project", engine.ProjectStart}, []string{"default/blog"}, "s start on default/blog"},
		{[]string{"project", engine.ProjectRotateToken}, []string{"default/blog"}, "t rotate token on default/blog"},
		// No key forgets a keyring entry: the engine leaves that hint out.
		{[]string{"tokens", "forget"}, nil, ""},
	} {
		got := tui.Actions(tc.verb, tc.args)
		if got != tc.want {
			t.Errorf("Actions(%q, %q) = %q, want %q", tc.verb, tc.args, got, tc.want)
		}
		if strings.Contains(got, "--") || strings.Contains(got, "kiln ") {
			t.Errorf("Actions(%q, %q) = %q names the CLI", tc.verb, tc.args, got)
		}
	}
}

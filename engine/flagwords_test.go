package engine

import (
	"strings"
	"testing"
)

// wizardLike words inputs and hints the way a frontend that is not a shell
// does: never as a flag (the wizard's own are tui.InputName and
// tui.Actions, which tui's TestWizardWordsNoFlag keeps flag-free).
var (
	wizardNamer   Namer   = func(in Input) string { return "the " + string(in) + " field" }
	wizardActions Actions = func(verb, args []string) string { return "key for " + strings.Join(verb, " ") }
)

// TestEngineAdviceInFrontendWords: the engine's advice that named a flag
// as literal text (probe again, the removers of a kept key, the token
// dir's source) keeps the CLI's words exactly and has none of them for a
// frontend with its own Namer and Actions (issue #29 item 2).
func TestEngineAdviceInFrontendWords(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	cli, wiz := &Engine{}, &Engine{Namer: wizardNamer, Actions: wizardActions}
	if got, want := cli.probeAgain(), "run wait --probe again"; got != want {
		t.Errorf("CLI probe advice %q, want %q", got, want)
	}
	if got := wiz.probeAgain(); strings.Contains(got, "--") {
		t.Errorf("wizard probe advice %q names a flag", got)
	}
	r := &rotation{}
	if got, want := r.removers(), "kiln upgrade, create --continue or rotate-key"; got != want {
		t.Errorf("CLI removers %q, want %q", got, want)
	}
	r.req.Target = wiz.hinted(Target{Name: "dev1"})
	if got := r.removers(); strings.Contains(got, "--") || strings.Contains(got, "kiln") {
		t.Errorf("wizard removers %q name a command or flag", got)
	}
	for _, c := range []struct {
		e    *Engine
		want string
	}{{cli, "--token-dir"}, {wiz, "the token-dir field"}} {
		cands, err := c.e.candidates("kube", "dev1", "/some/dir")
		if err != nil {
			t.Fatal(err)
		}
		if cands[0].Path != "/some/dir" || cands[0].Source != c.want {
			t.Errorf("the named token dir's candidate %+v, want source %q", cands[0], c.want)
		}
	}
}

package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnctl/kiln/engine/failure"
)

// An unusable token dir's hint to forget the keyring entry is the
// frontend's: the CLI's command as before, a frontend's own words through
// Actions, and none when that frontend has no such action.
func TestUnusableTokenDirHintIsTheFrontends(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	broken := filepath.Join(t.TempDir(), "tokens")
	if err := os.MkdirAll(broken, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		actions Actions
		want    string
		not     string
	}{
		{"cli", nil, "; move it aside or run `kiln tokens forget kube dev1`", ""},
		{"own words", func(verb, args []string) string { return "F " + strings.Join(verb, " ") }, "; move it aside or run `F tokens forget`", "kiln "},
		{"no such action", func([]string, []string) string { return "" }, "; move it aside", "run"},
	} {
		e := &Engine{Actions: c.actions}
		cands, err := e.candidates("kube", "dev1", broken)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = findTrusted(cands, "kube", "dev1", nil)
		if failure.Of(err) != failure.Input || !strings.HasSuffix(err.Error(), c.want) || c.not != "" && strings.Contains(err.Error(), c.not) {
			t.Errorf("%s: %v (%v), want it to end in %q", c.name, err, failure.Of(err), c.want)
		}
	}
}

// Front door messages without hints for a cluster word the upgrade as
// Command does for any cluster.
func TestFrontDoorUpgradeHintWithoutACluster(t *testing.T) {
	if got := (frontDoorHints{}).upgrade(); got != "`kiln upgrade PROVIDER NAME -c FILE`" {
		t.Errorf("upgrade hint = %q", got)
	}
	h := hintsFor(Target{Name: "dev1", actions: func(verb, args []string) string { return "U " + strings.Join(args, " ") }}, "kind-dev1")
	if got := h.upgrade(); got != "`U -c FILE`" {
		t.Errorf("upgrade hint through Actions = %q", got)
	}
}

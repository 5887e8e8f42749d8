package tui

import (
	"strings"
	"testing"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/input"
	"github.com/kilnctl/kiln/engine/provider/aws"
)

// everyInput is every input engine messages name (engine/input).
var everyInput = []input.Input{
	input.Context, input.Contexts, input.Kubeconfig, input.Region, input.Regions, input.Profile,
	input.InstanceType, input.Nodes, input.KubernetesVersion, input.KubeContextOverride, input.Continue,
	input.Yes, input.TokenDir, input.Config, input.All, input.Stack, input.Tenant, input.DeleteProjects,
	input.Restack, input.KeepOld, input.Finish, input.Admin, input.Viewer, input.RotateToken, input.Probe,
	input.KeyringBackend,
}

// TestWizardWordsNoFlag: the wizard's Namers and Actions never word an
// input or a hint as a CLI flag, so no engine or creds message the wizard
// renders through them shows one (issue #29 item 2; the literals are kept
// out by engine/input's TestNoFlagWordsInEngineOrCreds).
func TestWizardWordsNoFlag(t *testing.T) {
	for _, in := range everyInput {
		for name, n := range map[string]input.Namer{"InputName": InputName, "UpgradeInputName": UpgradeInputName} {
			if w := n(in); strings.Contains(w, "--") {
				t.Errorf("%s(%s) = %q: a CLI flag", name, in, w)
			}
		}
	}
	// The hints the converted messages give (engine.Command with the
	// wizard's Actions).
	for _, h := range []struct{ verb, args []string }{
		{[]string{"upgrade"}, []string{engine.FlagName(engine.InputYes)}},
		{[]string{"upgrade"}, nil},
		{[]string{"wait"}, []string{engine.FlagName(input.Probe)}},
		{[]string{"create"}, []string{engine.FlagName(engine.InputContinue)}},
		{[]string{"rotate-key"}, []string{engine.FlagName(engine.InputFinish)}},
		{[]string{"rotate-key"}, nil},
	} {
		if w := Actions(h.verb, h.args); strings.Contains(w, "--") {
			t.Errorf("Actions(%q, %q) = %q: a CLI flag", h.verb, h.args, w)
		}
	}
}

// TestConvertedMessagesInWizardWords renders messages that named a flag as
// literal text before (aws's access-entry principals, creds's keyring
// backend) with the wizard's Namer: no flag there, the CLI's words as
// they were.
func TestConvertedMessagesInWizardWords(t *testing.T) {
	_, keyringErr := creds.OpenStore(creds.StoreOptions{Backend: "nope"})
	for _, c := range []struct {
		err error
		cli string
	}{
		{aws.CheckPrincipal(input.Admin, "arn:aws:sts::123456789012:assumed-role/dev/s"), "--admin arn:aws:sts::123456789012:assumed-role/dev/s: an STS assumed-role session"},
		{aws.CheckPrincipal(input.Viewer, "ci"), "--viewer ci: not an IAM role or user ARN"},
		{keyringErr, `--keyring-backend: unknown backend "nope"`},
	} {
		if c.err == nil {
			t.Fatalf("no error for %q", c.cli)
		}
		if !strings.HasPrefix(c.err.Error(), c.cli) {
			t.Errorf("CLI words %q, want them to start %q", c.err, c.cli)
		}
		w := input.Render(c.err, InputName)
		if strings.Contains(w, "--") || w == c.err.Error() {
			t.Errorf("wizard words %q: a CLI flag, or the CLI's words", w)
		}
	}
}

package aws

import (
	"strings"
	"testing"

	"github.com/kilnctl/kiln/engine"
)

// TestProviderHintsAreTheFrontendsWords: once the engine hands the
// provider its Actions (engine.ActionsTaker), the provider's own hints
// ("run `…` again") are the frontend's words; before, the kiln command.
func TestProviderHintsAreTheFrontendsWords(t *testing.T) {
	p := &Provider{}
	if got := p.command("destroy", "dev1", "eu-west-1"); got != "kiln destroy aws dev1 --region eu-west-1" {
		t.Errorf("without Actions: %q", got)
	}
	var _ engine.ActionsTaker = p
	p.TakeActions(func(verb, args []string) string { return "ACT " + strings.Join(append(verb, args...), " ") })
	if got := p.command("destroy", "dev1", "eu-west-1"); got != "ACT destroy" {
		t.Errorf("with Actions: %q", got)
	}
}

package engine

import (
	"strings"
	"testing"
)

// TestActionsWordEveryHintOfARequest: with Engine.Actions set, the hints
// of a request (Command, the create decision's, the project operations')
// are the frontend's words; without it, the kiln command.
func TestActionsWordEveryHintOfARequest(t *testing.T) {
	act := func(verb, args []string) string { return "ACT " + strings.Join(append(verb, args...), " ") }
	e := &Engine{Actions: act}
	tg := e.hinted(Target{Name: "dev1"})
	if got := command(tg, "kiln-a", "destroy"); got != "ACT destroy" {
		t.Errorf("command = %q", got)
	}
	if got := (Facts{Location: "kiln-a"}).command(Asked{Name: "dev1", actions: tg.actions}, "create", FlagName(InputContinue)); got != "ACT create "+FlagName(InputContinue) {
		t.Errorf("Facts.command = %q", got)
	}
	plain := (&Engine{}).hinted(Target{Name: "dev1"})
	if got := command(plain, "", "destroy"); got != "kiln destroy PROVIDER dev1" {
		t.Errorf("without Actions: %q", got)
	}
}

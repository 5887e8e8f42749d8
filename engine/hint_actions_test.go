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

// taker is a Provider (the interface embedded, unused) that records the
// Actions the engine hands it.
type taker struct {
	Provider
	got Actions
}

func (p *taker) TakeActions(a Actions) { p.got = a }

// TestActionsReachTheProvider: a request's provider gets the engine's
// Actions for the hints of its own messages; none without them.
func TestActionsReachTheProvider(t *testing.T) {
	p := &taker{}
	(&Engine{}).hinted(Target{Provider: p, Name: "dev1"})
	if p.got != nil {
		t.Fatal("an engine without Actions handed some to the provider")
	}
	(&Engine{Actions: func(verb, args []string) string { return "ACT" }}).hinted(Target{Provider: p, Name: "dev1"})
	if p.got == nil || p.got(nil, nil) != "ACT" {
		t.Error("the provider did not get the engine's Actions")
	}
}

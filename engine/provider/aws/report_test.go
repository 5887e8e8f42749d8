package aws

import (
	"strings"
	"testing"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/event"
)

// The provider reports through the operation's Reporter: text from AWS
// (a node group's health issue, an API error) reaches the frontend
// cleaned of control characters, as every other event does.
func TestProviderEventsAreCleaned(t *testing.T) {
	var got []engine.Event
	rep := event.NewReporter(engine.SinkFunc(func(ev engine.Event) { got = append(got, ev) }), nil)
	emit(rep, KindNodegroup, "kiln-nodes\x1b[2J", engine.StatusFailed, "DEGRADED: \x1b]0;pwned\x07 issue")
	logf(rep, engine.LevelWarn, "could not release the claim: %s", "\u202eevil\x9b31m")
	if len(got) != 2 {
		t.Fatalf("%d events, want 2", len(got))
	}
	res := got[0].Payload.(event.ResourceEvent)
	for _, s := range []string{res.Name, res.Message, event.MessageOf(got[1].Payload)} {
		if strings.ContainsAny(s, "\x1b\u202e\u009b") || strings.Contains(s, "\x9b") {
			t.Errorf("control character left in %q", s)
		}
	}
	if got[0].Time.IsZero() || got[1].Time.IsZero() {
		t.Error("provider events are not stamped")
	}
}

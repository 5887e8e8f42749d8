package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/kilnctl/kiln/engine/event"
)

// Strings from a cluster reach the terminal without escape sequences or
// bidi overrides, in events and in the statuses frontends print, including
// fields nested in slices and pointers.
func TestCleanRemovesTerminalControls(t *testing.T) {
	hostile := "web\x1b]0;pwned\x07\x1b[2J\u202eevil\u0085 ok\tdone\nnext"
	if got, want := CleanText(hostile), "web]0;pwned[2Jevil ok\tdone\nnext"; got != want {
		t.Fatalf("CleanText = %q, want %q", got, want)
	}
	st := &ClusterStatus{Name: "c\x1b[31m", Objects: []ObjectStatus{{Message: "m\x1b[1m"}},
		Projects: []ProjectStatus{{Project: "p", Reasons: []string{"r\x9b31m", "s\u009b1m"}, Created: time.Now()}}}
	var got []Event
	e := &Engine{Sink: SinkFunc(func(ev Event) { got = append(got, ev) })}
	e.emit(st)
	e.emit(event.LogEvent{Message: "x\x1b[0m"})
	e.emit(&ClusterSummary{Err: "dial \x1b[5m"})
	snap := got[0].Payload.(*ClusterStatus)
	msg := got[1].Payload.(event.LogEvent).Message
	cl := got[2].Payload.(*ClusterSummary)
	for _, s := range []string{msg, snap.Name, snap.Objects[0].Message, snap.Projects[0].Reasons[0], snap.Projects[0].Reasons[1], cl.Err} {
		if strings.ContainsAny(s, "\x1b\u009b") || strings.Contains(s, "\x9b") {
			t.Errorf("control character left in %q", s)
		}
	}
	if snap.Projects[0].Created.IsZero() {
		t.Error("cleaning touched a time")
	}
}

package engine

import (
	"strings"
	"testing"
	"time"
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
	e.emit(Event{Type: TypeSnapshot, Snapshot: st, Message: "x\x1b[0m", Cluster: &ClusterSummary{Err: "dial \x1b[5m"}})
	ev := got[0]
	for _, s := range []string{ev.Message, ev.Snapshot.Name, ev.Snapshot.Objects[0].Message, ev.Snapshot.Projects[0].Reasons[0], ev.Snapshot.Projects[0].Reasons[1], ev.Cluster.Err} {
		if strings.ContainsAny(s, "\x1b\u009b") || strings.Contains(s, "\x9b") {
			t.Errorf("control character left in %q", s)
		}
	}
	if ev.Snapshot.Projects[0].Created.IsZero() {
		t.Error("cleaning touched a time")
	}
}

package event

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

type hostileStatus struct {
	Name    string
	Reasons []string
	At      time.Time
}

func (*hostileStatus) EventType() Type { return "hostile" }

// Every producer's event reaches the sink stamped and cleaned: payloads
// held by value and by pointer, nested strings, but never the failure
// itself (Err) or a time.
func TestReporterStampsAndCleans(t *testing.T) {
	var got []Event
	at := time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)
	r := NewReporter(SinkFunc(func(e Event) { got = append(got, e) }), func() time.Time { return at })
	errSeen := errors.New("raw \x1b[31m error")
	r.Resource("Deployment", "ns", "web\x1b]0;pwned\x07", StatusFailed, "crash\u202eloop")
	r.Logf(LevelWarn, "careful %s", "\x1b[2J")
	r.Debug("k8s GET /api \x9b31m")
	r.Report(ResultEvent{Err: errSeen, Message: "failed \x1b[1m"})
	st := &hostileStatus{Name: "c\x1b[31m", Reasons: []string{"r\u0085"}, At: at}
	r.Report(st)
	if len(got) != 5 {
		t.Fatalf("%d events, want 5", len(got))
	}
	for _, e := range got {
		if !e.Time.Equal(at) {
			t.Errorf("%s event at %v, want %v", e.Type(), e.Time, at)
		}
	}
	res := got[0].Payload.(ResourceEvent)
	texts := []string{res.Name, res.Message, MessageOf(got[1].Payload), MessageOf(got[2].Payload), MessageOf(got[3].Payload), st.Name, st.Reasons[0]}
	for _, s := range texts {
		if strings.ContainsAny(s, "\x1b\u009b\u202e\u0085") || strings.Contains(s, "\x9b") {
			t.Errorf("control character left in %q", s)
		}
	}
	if l := got[2].Payload.(LogEvent); l.Level != LevelDebug {
		t.Errorf("Debug reported level %q", l.Level)
	}
	if r := got[3].Payload.(ResultEvent); r.Err != errSeen {
		t.Errorf("the result's Err was replaced: %v", r.Err)
	}
	if !st.At.Equal(at) {
		t.Error("cleaning touched a time")
	}
}

// A nil Reporter, or one without a sink, drops events (a provider called
// without one, say).
func TestReporterWithoutSink(t *testing.T) {
	var r *Reporter
	r.Logf(LevelInfo, "dropped")
	NewReporter(nil, nil).Resource("Namespace", "", "x", StatusCurrent, "")
}

func TestEventTypeIsThePayloads(t *testing.T) {
	for _, c := range []struct {
		p    Payload
		want Type
	}{
		{PhaseEvent{}, TypePhase}, {DiscoveryEvent{}, TypeDiscovery}, {DecisionEvent{}, TypeDecision},
		{ResourceEvent{}, TypeResource}, {LogEvent{}, TypeLog}, {PlanEvent{}, TypePlan}, {ResultEvent{}, TypeResult},
	} {
		if got := (Event{Payload: c.p}).Type(); got != c.want {
			t.Errorf("%T: type %q, want %q", c.p, got, c.want)
		}
	}
	if got := (Event{}).Type(); got != "" {
		t.Errorf("no payload: type %q", got)
	}
}

// An event is never marshaled as its Go shape: that is not the §8 schema.
func TestEventRefusesPlainJSON(t *testing.T) {
	if b, err := json.Marshal(Event{Payload: LogEvent{Level: LevelInfo, Message: "m"}}); err == nil {
		t.Errorf("json.Marshal(Event) = %s, want an error", b)
	}
}

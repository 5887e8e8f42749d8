package event

import (
	"fmt"
	"time"
)

// Reporter is how every producer reports: the engine, project operations,
// providers and the debug trace of an operation's API requests. It stamps
// each event with the time and cleans every string of its payload
// (CleanText) before the sink gets it, so no text from a cluster or a
// cloud reaches a terminal with control characters, whoever reported it.
// A nil Reporter, or one without a Sink, drops events.
type Reporter struct {
	Sink Sink
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// NewReporter reports to sink with the clock now (nil: time.Now).
func NewReporter(sink Sink, now func() time.Time) *Reporter {
	return &Reporter{Sink: sink, Now: now}
}

func (r *Reporter) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Report sends one event with payload p, stamped now and cleaned.
func (r *Reporter) Report(p Payload) {
	if r == nil || r.Sink == nil || p == nil {
		return
	}
	r.Send(Event{Payload: p})
}

// Send sends ev, stamping it now if it has no time, and cleaned.
func (r *Reporter) Send(ev Event) {
	if r == nil || r.Sink == nil {
		return
	}
	if ev.Time.IsZero() {
		ev.Time = r.now()
	}
	ev.Payload = cleanPayload(ev.Payload)
	r.Sink.Emit(ev)
}

// Logf reports a log line.
func (r *Reporter) Logf(level Level, format string, args ...any) {
	r.Report(LogEvent{Level: level, Message: fmt.Sprintf(format, args...)})
}

// Debug reports a debug line (an API request, a retry): the trace of the
// operation this Reporter belongs to.
func (r *Reporter) Debug(msg string) {
	r.Report(LogEvent{Level: LevelDebug, Message: msg})
}

// Resource reports an object's status.
func (r *Reporter) Resource(kind, namespace, name string, status Status, message string) {
	r.Report(ResourceEvent{Kind: kind, Namespace: namespace, Name: name, Status: status, Message: message})
}

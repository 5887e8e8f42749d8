package engine

import (
	"context"
	"testing"

	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/trace"
)

// An operation's API request trace goes through that operation's
// Reporter (stamped, cleaned, to its own sink), never to another
// operation's sink, whoever set the trace up.
func TestTraceGoesToTheOperationsOwnReporter(t *testing.T) {
	var a, b []event.Event
	var elsewhere []string
	ea := &Engine{Sink: SinkFunc(func(ev Event) { a = append(a, ev) })}
	eb := &Engine{Sink: SinkFunc(func(ev Event) { b = append(b, ev) })}
	ctx := trace.With(context.Background(), func(msg string) { elsewhere = append(elsewhere, msg) }, 1)
	trace.Logf(ea.traced(ctx), "k8s GET /a \x1b[31m-> 200")
	trace.Logf(eb.traced(ctx), "k8s GET /b -> 200")
	if len(a) != 1 || len(b) != 1 || len(elsewhere) != 0 {
		t.Fatalf("operation a got %v, b got %v, elsewhere %v", a, b, elsewhere)
	}
	la, lb := a[0].Payload.(event.LogEvent), b[0].Payload.(event.LogEvent)
	if la.Level != LevelDebug || la.Message != "k8s GET /a [31m-> 200" || a[0].Time.IsZero() {
		t.Errorf("a's debug line %+v at %v, want it cleaned and stamped", la, a[0].Time)
	}
	if lb.Message != "k8s GET /b -> 200" {
		t.Errorf("b's debug line %+v", lb)
	}
	// Without a trace (no -v, no --log-file) nothing is traced.
	trace.Logf(ea.traced(context.Background()), "nothing")
	if len(a) != 1 {
		t.Errorf("traced without -v: %v", a)
	}
}

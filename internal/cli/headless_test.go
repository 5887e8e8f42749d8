package cli

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kilnctl/kiln/engine/event"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/internal/exit"
)

func TestTextLines(t *testing.T) {
	cases := []struct {
		ev    engine.Event
		quiet bool
		want  string
	}{
		{engine.Event{Payload: event.PhaseEvent{Phase: "platform", State: engine.PhaseSucceeded, ElapsedMS: 239}}, false, "✓ platform (239ms)"},
		{engine.Event{Payload: event.PhaseEvent{Phase: "platform", State: engine.PhaseFailed, ElapsedMS: 1500}}, false, "✗ platform (1.5s)"},
		{engine.Event{Payload: event.PhaseEvent{Phase: "platform", State: engine.PhaseSucceeded}}, true, ""},
		{engine.Event{Payload: event.PhaseEvent{Phase: "infrastructure", State: engine.PhaseSkipped, Message: "exists"}}, false, "- infrastructure skipped: exists"},
		{engine.Event{Payload: event.ResourceEvent{Kind: "Deployment", Namespace: "kiln-system", Name: "kiln-gateway", Status: "InProgress", Message: "0/1 replicas available"}}, false, "  … deployment kiln-system/kiln-gateway InProgress — 0/1 replicas available"},
		{engine.Event{Payload: event.ResourceEvent{Kind: "Namespace", Name: "kiln-system", Status: "Current"}}, false, "  ✓ namespace/kiln-system Current"},
		{engine.Event{Payload: event.DecisionEvent{Decision: "continue", Reason: "installed"}}, false, "→ continue: installed"},
		{engine.Event{Payload: event.LogEvent{Level: engine.LevelWarn, Message: "careful"}}, true, "  warn: careful"},
		{engine.Event{Payload: event.LogEvent{Level: engine.LevelInfo, Message: "fyi"}}, true, ""},
		{engine.Event{Payload: event.ResultEvent{OK: false, Err: failure.Lock("locked"), Message: "locked"}}, true, "✗ locked (exit 4)"},
		{engine.Event{Payload: event.ResultEvent{OK: true, Message: "done"}}, false, "✓ done"},
		{engine.Event{Payload: &engine.FrontDoor{Mode: "loadBalancer", Address: "lb.example.test", DNS: "*.dev1.example.test CNAME lb.example.test", Ready: true, TLS: "at the gateway", Message: "load balancer"}}, false,
			"  front door loadBalancer at lb.example.test (load balancer)\n  DNS record to create: *.dev1.example.test CNAME lb.example.test\n  TLS: at the gateway"},
		{engine.Event{Payload: &engine.FrontDoor{Mode: "none", TLS: "none", Message: "no front door: reach the gateway with kubectl port-forward"}}, false,
			"  front door none: no front door: reach the gateway with kubectl port-forward\n  TLS: none"},
		{engine.Event{Payload: &engine.FrontDoor{Mode: "none"}}, true, ""},
		{engine.Event{Payload: &engine.Isolation{State: "unknown", Reason: "not permitted to list daemonsets"}}, false, "  network isolation: unknown: not permitted to list daemonsets"},
	}
	for _, tc := range cases {
		if got := formatText(tc.ev, tc.quiet); got != tc.want {
			t.Errorf("formatText(%+v, quiet=%v) = %q, want %q", tc.ev, tc.quiet, got, tc.want)
		}
	}
}

func TestJSONPrinterWritesOneLinePerEvent(t *testing.T) {
	var buf bytes.Buffer
	s := newJSONPrinter(&buf)
	s.Emit(engine.Event{Payload: event.LogEvent{Level: "info", Message: "a"}})
	s.Emit(engine.Event{Payload: event.ResultEvent{OK: true}})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], `{"time":`) || !strings.Contains(lines[1], `"type":"result"`) {
		t.Fatalf("NDJSON output:\n%s", buf.String())
	}
}

// The result's exit_code is the CLI's: the engine's result event carries
// the error, and the JSON sink turns its failure kind into the number
// (DESIGN.md §4), also on the failures line.
func TestJSONPrinterExitCodeFromTheError(t *testing.T) {
	for _, c := range []struct {
		ev   event.ResultEvent
		want int
	}{
		{event.ResultEvent{OK: true, Message: "done"}, 0},
		{engine.FailedResult(fmt.Errorf("plan: %w", failure.NeedsConfirm("needs --yes")), nil, ""), 3},
		{engine.FailedResult(failure.Lock("held by ci"), nil, ""), 4},
		{engine.FailedResult(failure.Interrupt("stopped"), nil, ""), 130},
		{engine.FailedResult(errors.New("boom"), nil, ""), 1},
		// A failed result without an error is still a failure.
		{event.ResultEvent{Message: "failed"}, 1},
	} {
		var out, fails bytes.Buffer
		s := newJSONPrinter(&out)
		s.failures = &fails
		s.Emit(event.Event{Payload: c.ev})
		if want := fmt.Sprintf(`"ok":%v,"exit_code":%d,`, c.ev.OK, c.want); !strings.Contains(out.String(), want) {
			t.Errorf("%s: NDJSON %s, want %s", c.ev.Message, out.String(), want)
		}
		if want := fmt.Sprintf("(exit %d)\n", c.want); !c.ev.OK && !strings.HasSuffix(fails.String(), want) {
			t.Errorf("%s: failures line %q, want it to end in %q", c.ev.Message, fails.String(), want)
		}
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	cases := [][]string{
		{"create"},
		{"create", "kube"},
		{"version", "extra"},
		{"--nope"},
		{"-o", "xml", "version"},
		{"completion", "tcsh"},
	}
	for _, args := range cases {
		root := NewRoot(BuildInfo{Version: "t"})
		var out bytes.Buffer
		root.SetArgs(args)
		root.SetOut(&out)
		root.SetErr(&out)
		err := root.Execute()
		if code := exit.Code(err); code != 2 {
			t.Errorf("kiln %v: exit %d (%v), want 2", args, code, err)
		}
	}
}

// status --watch in text mode: quiet until the engine's snapshot event,
// which prints the table; every change after it is printed. JSON output
// leaves the snapshot out (it is not in the NDJSON schema).
func TestSnapshotEndsQuietAndIsNotNDJSON(t *testing.T) {
	var out bytes.Buffer
	var table []string
	s := &textPrinter{w: &out, quiet: true, snapshot: func(st *engine.ClusterStatus) { table = append(table, st.Name) }}
	ok := engine.Event{Payload: event.PhaseEvent{Phase: engine.PhaseReadiness, State: engine.PhaseSucceeded, ElapsedMS: 5}}
	s.Emit(ok)
	if out.Len() != 0 {
		t.Fatalf("quiet before the snapshot, got %q", out.String())
	}
	s.Emit(engine.Event{Payload: &engine.ClusterStatus{Name: "dev1"}})
	if len(table) != 1 || table[0] != "dev1" {
		t.Fatalf("snapshot printed %v, want [dev1]", table)
	}
	s.Emit(ok)
	if !strings.Contains(out.String(), "✓ readiness") {
		t.Fatalf("after the snapshot changes are printed, got %q", out.String())
	}
	var js bytes.Buffer
	newJSONPrinter(&js).Emit(engine.Event{Payload: &engine.ClusterStatus{Name: "dev1"}})
	if js.Len() != 0 {
		t.Fatalf("NDJSON carries the snapshot: %s", js.String())
	}
}

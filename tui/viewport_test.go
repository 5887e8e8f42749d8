package tui_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kilnctl/kiln/engine/event"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/tui"
	"github.com/kilnctl/kiln/tui/tuitest"
)

// TestDetailViewScrolls: the whole log in full (enter on the log) is a
// viewport: the last row says which lines show, end shows the last ones
// and the result, home the first again.
func TestDetailViewScrolls(t *testing.T) {
	b := backend()
	b.OnCreate = func(ctx context.Context, sink engine.Sink, _ engine.Confirmer) error {
		sink.Emit(engine.Event{Payload: event.PhaseEvent{Phase: "discover", State: engine.PhaseStarted}})
		for i := range 60 {
			sink.Emit(engine.Event{Payload: event.LogEvent{Level: engine.LevelInfo, Message: fmt.Sprintf("log line %02d", i)}})
		}
		sink.Emit(engine.Event{Payload: event.PhaseEvent{Phase: "discover", State: engine.PhaseFailed}})
		sink.Emit(engine.Event{Payload: event.ResultEvent{Err: failure.Deadline("timed out"), Message: "timed out"}})
		return failure.Deadline("timed out")
	}
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("c")
	h.WaitFor(t, "(timed out)")
	h.Key("tab")
	h.Key("enter")
	got := ansi.Strip(h.WaitFor(t, "── lines 1–"))
	if !strings.Contains(got, "log line 00") || strings.Contains(got, "log line 59") {
		t.Errorf("the log in full does not start at its first line:\n%s", got)
	}
	checkWidth(t, h.Screen(), 80, 24)
	h.Send(keyEnd())
	got = ansi.Strip(h.WaitFor(t, "Result (timed out): timed out"))
	if !strings.Contains(got, "log line 59") || strings.Contains(got, "log line 00") {
		t.Errorf("end does not show the last lines:\n%s", got)
	}
	h.Send(keyHome())
	h.WaitFor(t, "log line 00")
	h.Key("esc")
	h.WaitFor(t, "Resources (0)")
}

func keyEnd() tea.KeyPressMsg  { return tea.KeyPressMsg{Code: tea.KeyEnd} }
func keyHome() tea.KeyPressMsg { return tea.KeyPressMsg{Code: tea.KeyHome} }

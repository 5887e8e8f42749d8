package tui_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/tui"
	"github.com/kilnctl/kiln/tui/tuitest"
)

// feedBackend is the inspect backend whose team-a/api has two pods (one
// crash looping), two Events and a log.
func feedBackend() *tuitest.FeedBackend {
	b := inspectBackend()
	api := &b.Inspections[0].Projects[1]
	api.Pods = []engine.PodInfo{
		{Name: "api-7d9f5-x2k4p", Phase: "Running", Ready: true, Restarts: 0},
		{Name: "api-7d9f5-q8w1z", Phase: "Running", Restarts: 4, Waiting: "CrashLoopBackOff", LastTermination: "Error", LastExitCode: 1},
	}
	f := tuitest.NewFeedBackend(b)
	f.Events = []engine.EventInfo{
		{Object: "Pod/api-7d9f5-q8w1z", Type: "Warning", Reason: "BackOff", Count: 12, Last: tuitest.T0.Add(-30 * time.Second), Message: "Back-off restarting failed container api"},
		{Object: "Deployment/api", Type: "Normal", Reason: "ScalingReplicaSet", Count: 1, Last: tuitest.T0.Add(-5 * time.Hour), Message: "Scaled up replica set api-7d9f5 to 2"},
	}
	f.Logs = []engine.PodLogLine{
		{Pod: "api-7d9f5-x2k4p", Container: "api", Line: "listening on :8080"},
		{Pod: "api-7d9f5-q8w1z", Container: "api", Line: "panic: token verification failed"},
	}
	return f
}

// TestProjectScreenShowsWhy: the project screen shows the project's pods
// (restarts, waiting and last termination reasons), its Events newest
// first, and the last lines of its pods' logs, following: a new line
// shows as it comes. Leaving the screen ends the follow (the follower
// returns: no goroutine outlives the screen); coming back starts it again.
func TestProjectScreenShowsWhy(t *testing.T) {
	f := feedBackend()
	h := tuitest.Start(t, f, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Send(tea.WindowSizeMsg{Width: 100, Height: 48})
	h.Key("i")
	h.WaitFor(t, "Projects (3)")
	h.Key("down")
	h.Key("enter")
	if ref := <-f.Following; ref != "team-a/api" {
		t.Fatalf("follows the logs of %s, want team-a/api", ref)
	}
	h.WaitFor(t, "panic: token verification failed")
	f.Lines <- engine.PodLogLine{Pod: "api-7d9f5-x2k4p", Container: "api", Line: "GET /healthz 200"}
	got := h.WaitFor(t, "[api-7d9f5-x2k4p] GET /healthz 200")
	plain := ansi.Strip(got)
	for _, want := range []string{
		"Pods (2)", "api-7d9f5-q8w1z", "restarts 4 · waiting CrashLoopBackOff · last Error (exit 1)",
		"Events (2, newest first)", "30s BackOff", "12 Pod/api-7d9f5-q8w1z", "Back-off restarting failed container api",
		"5h ScalingReplicaSet", "Log ", "following",
	} {
		if !strings.Contains(plain, want) {
			t.Errorf("project screen lacks %q:\n%s", want, plain)
		}
	}
	if strings.Index(plain, "BackOff") > strings.Index(plain, "ScalingReplicaSet") {
		t.Errorf("events not newest first:\n%s", plain)
	}
	checkWidth(t, got, 100, 48)
	golden.RequireEqual(t, got)

	// A change the watch reports reads the Events again.
	reads := f.EventReads()
	f.Updates <- tuitest.Inspection("dev1", "kiln-local")
	for f.EventReads() == reads {
		time.Sleep(5 * time.Millisecond) // polling the backend, not waiting for settling
	}

	h.Key("esc")
	h.WaitFor(t, "Projects (3)")
	<-f.Followed // hangs (the test times out) if leaving did not stop the follow

	// Back on the screen: a new follow; a project operation's run view
	// leaves the screen, so it ends too.
	h.Key("enter")
	<-f.Following
	h.WaitFor(t, "Events (2, newest first)")
	f.OnProject = tuitest.ProjectScript(engine.ProjectStart, "team-a/api")
	h.Key("s")
	h.Key("y")
	h.WaitFor(t, "project team-a/api start done")
	<-f.Followed
}

// TestProjectLogPaneScrolls: tab gives the log pane ↑/↓; scrolling back
// stops following (a new line does not move the view), end follows again.
func TestProjectLogPaneScrolls(t *testing.T) {
	f := feedBackend()
	for i := range 20 {
		f.Logs = append(f.Logs, engine.PodLogLine{Pod: "api-7d9f5-x2k4p", Line: "line " + string(rune('a'+i))})
	}
	h := tuitest.Start(t, f, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Send(tea.WindowSizeMsg{Width: 100, Height: 60})
	h.Key("i")
	h.WaitFor(t, "Projects (3)")
	h.Key("down")
	h.Key("enter")
	h.WaitFor(t, "line t")
	h.Key("tab")
	h.WaitFor(t, "tab: page")
	for range 5 {
		h.Key("up")
	}
	got := ansi.Strip(h.WaitFor(t, "scrolled back"))
	if strings.Contains(got, "line t") {
		t.Errorf("scrolled back, the newest line still shows:\n%s", got)
	}
	f.Lines <- engine.PodLogLine{Pod: "api-7d9f5-x2k4p", Line: "line new"}
	h.WaitFor(t, "Log (scrolled back")
	h.Send(tea.KeyPressMsg{Code: tea.KeyEnd})
	h.WaitFor(t, "line new")
	h.WaitFor(t, "following")
}

// TestProjectEventsPaneScrolls: more Events than the pane's rows show the
// newest; tab gives the pane ↑/↓ and the oldest come into view, a second
// tab moves on to the log.
func TestProjectEventsPaneScrolls(t *testing.T) {
	f := feedBackend()
	f.Events = nil
	for i := range 15 {
		f.Events = append(f.Events, engine.EventInfo{Object: "Pod/api-7d9f5-q8w1z", Type: "Normal", Reason: fmt.Sprintf("Reason%02d", i), Count: 1,
			Last: tuitest.T0.Add(-time.Duration(i) * time.Minute), Message: "event"})
	}
	h := tuitest.Start(t, f, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Send(tea.WindowSizeMsg{Width: 100, Height: 60})
	h.Key("i")
	h.WaitFor(t, "Projects (3)")
	h.Key("down")
	h.Key("enter")
	got := ansi.Strip(h.WaitFor(t, "Events (15, newest first)"))
	if !strings.Contains(got, "Reason00") || strings.Contains(got, "Reason14") || !strings.Contains(got, "10 shown") {
		t.Errorf("the Events pane does not show the newest 10:\n%s", got)
	}
	h.Key("tab")
	h.WaitFor(t, "tab: log")
	for range 5 {
		h.Key("down")
	}
	got = ansi.Strip(h.WaitFor(t, "Reason14"))
	if strings.Contains(got, "Reason00") {
		t.Errorf("scrolled to the oldest, the newest still shows:\n%s", got)
	}
	h.Key("tab")
	h.WaitFor(t, "tab: page")
}

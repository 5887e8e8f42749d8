package tui_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/tui"
	"github.com/kilnctl/kiln/tui/tuitest"
)

// TestInspectWatchIsLive: with a Watcher backend the inspect screen shows
// each read the watch delivers (no polling: Status is never called), the
// watch starts once for the inspect and project screens together, and it
// ends when the user leaves them.
func TestInspectWatchIsLive(t *testing.T) {
	w := tuitest.NewWatchBackend(inspectBackend())
	h := tuitest.Start(t, w, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("i")
	h.WaitFor(t, "degraded")
	next := tuitest.Inspection("dev1", "kiln-local")
	next.Projects[1].State, next.Projects[1].Reasons = "running", []string{}
	next.Ready = false
	next.Objects[5].Status, next.Objects[5].Message = engine.StatusInProgress, "0/1 replicas available"
	w.Updates <- next
	got := ansi.Strip(h.WaitFor(t, "platform not ready"))
	if strings.Contains(got, "degraded") || !strings.Contains(got, "Platform objects (6 of 7 current)") {
		t.Errorf("screen after the watch's update:\n%s", got)
	}
	h.Key("enter") // the project screen shares the watch
	h.WaitFor(t, "Token sync")
	h.Key("esc")
	h.WaitFor(t, "Projects (3)")
	h.Key("esc")
	h.WaitFor(t, "Kiln clusters")
	<-w.Stopped // the watch ended on leaving (the test hangs, then times out, if not)
	if n := w.Started(); n != 1 {
		t.Errorf("%d watches started, want 1", n)
	}
	if n := w.Reads(); n != 0 {
		t.Errorf("%d polled reads next to the watch, want 0", n)
	}
}

// TestInspectFilter: / filters the project table as it is typed, enter
// keeps the filter, esc clears it; the selection stays on a shown row.
func TestInspectFilter(t *testing.T) {
	h := tuitest.Start(t, tuitest.NewWatchBackend(inspectBackend()), tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("i")
	h.WaitFor(t, "Projects (3)")
	h.Key("/")
	for _, k := range []string{"t", "e", "a", "m"} {
		h.Key(k)
	}
	h.WaitFor(t, "Projects (2 of 3 match)")
	for range 4 {
		h.Key("backspace")
	}
	h.Key("a")
	h.Key("p")
	h.Key("i")
	h.WaitFor(t, "Projects (1 of 3 match)")
	h.Key("enter")
	got := h.WaitFor(t, "> team-a/api")
	if strings.Contains(ansi.Strip(got), "default/web") {
		t.Errorf("filtered table shows default/web:\n%s", got)
	}
	requireGolden(t, got)
	h.Key("enter") // the project of the filtered selection
	h.WaitFor(t, "Project team-a/api")
	h.Key("esc")
	h.Key("esc") // clears the filter, stays on the screen
	h.WaitFor(t, "Projects (3)")
}

// TestInspectMouseWheel: the wheel moves the project selection.
func TestInspectMouseWheel(t *testing.T) {
	h := tuitest.Start(t, tuitest.NewWatchBackend(inspectBackend()), tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("i")
	h.WaitFor(t, "> default/web")
	h.Send(tea.MouseWheelMsg{Button: tea.MouseWheelDown})
	h.Send(tea.MouseWheelMsg{Button: tea.MouseWheelDown})
	h.WaitFor(t, "> team-a/batch")
	h.Send(tea.MouseWheelMsg{Button: tea.MouseWheelUp})
	h.WaitFor(t, "> team-a/api")
}

// TestInspectReadOnly: kiln inspect --read-only opens the inspector
// directly and offers no action: s/p/r change nothing and say why.
func TestInspectReadOnly(t *testing.T) {
	w := tuitest.NewWatchBackend(inspectBackend())
	h := tuitest.Start(t, w, tui.Options{ReadOnly: true, InspectOnly: true, Inspect: &engine.ClusterRef{Provider: "kube", Name: "dev1", Location: "kiln-local"}})
	got := h.WaitFor(t, "Projects (3)")
	plain := ansi.Strip(got)
	for _, bad := range []string{"[s] start", "[p] suspend", "[r] restack", "s start"} {
		if strings.Contains(plain, bad) {
			t.Errorf("read-only inspector offers %q:\n%s", bad, plain)
		}
	}
	requireGolden(t, got)
	for _, k := range []string{"s", "p", "r"} {
		h.Key(k)
		h.WaitFor(t, "read-only: this inspector changes nothing")
	}
	h.Key("enter")
	got = ansi.Strip(h.WaitFor(t, "Token sync"))
	if strings.Contains(got, "[s] start") || !strings.Contains(got, "read-only") {
		t.Errorf("read-only project screen:\n%s", got)
	}
	if ops := w.Ops(); len(ops) != 0 {
		t.Errorf("read-only inspector ran %v", ops)
	}
}

// TestInspectSelectionIsAProject: the selection is a project, not a row
// number. A filter that hides it leaves nothing selected (said under the
// table, and s acts on nothing) instead of moving it to another project;
// clearing the filter and live updates that move its row keep it; a
// project that disappears is said to be gone.
func TestInspectSelectionIsAProject(t *testing.T) {
	w := tuitest.NewWatchBackend(inspectBackend())
	h := tuitest.Start(t, w, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("i")
	h.WaitFor(t, "> default/web")
	h.Key("down")
	h.WaitFor(t, "> team-a/api")

	h.Key("/")
	for _, k := range []string{"b", "a", "t"} {
		h.Key(k)
	}
	got := ansi.Strip(h.WaitFor(t, "team-a/api is selected but hidden by the filter /bat"))
	if strings.Contains(got, "> team-a/batch") {
		t.Errorf("the hidden selection moved to team-a/batch:\n%s", got)
	}
	h.Key("enter")
	h.Key("s")
	got = ansi.Strip(h.WaitFor(t, "no project selected"))
	if strings.Contains(got, "Start project") {
		t.Errorf("s asked about a project the user did not select:\n%s", got)
	}
	h.Key("esc") // clears the filter: the same project is selected again
	h.WaitFor(t, "> team-a/api")

	moved := tuitest.Inspection("dev1", "kiln-local")
	moved.Projects = append([]engine.ProjectStatus{{Tenant: "aaa", Project: "first", State: "running", Stack: "default"}}, moved.Projects...)
	w.Updates <- moved
	got = ansi.Strip(h.WaitFor(t, "aaa/first"))
	if !strings.Contains(got, "> team-a/api") {
		t.Errorf("a new row above moved the selection off team-a/api:\n%s", got)
	}

	gone := tuitest.Inspection("dev1", "kiln-local")
	gone.Projects = slices.DeleteFunc(gone.Projects, func(p engine.ProjectStatus) bool { return p.Project == "api" })
	w.Updates <- gone
	got = ansi.Strip(h.WaitFor(t, "team-a/api is gone from the cluster"))
	if strings.Contains(got, "> ") {
		t.Errorf("a row is selected after the selected project went away:\n%s", got)
	}
	h.Key("down")
	h.WaitFor(t, "> default/web")
}

// TestGoneSelectionKeepsTheTableInView: back on the inspect screen after
// the selected project went away meanwhile (deleted from its project
// screen, as the wizard's x does), the page shows the note saying so and
// the table's remaining rows, not the platform objects above them with
// the table scrolled out of sight (seen at 100x30 in the tmux test).
func TestGoneSelectionKeepsTheTableInView(t *testing.T) {
	// Platform objects enough to push the table below an 80x24 screen.
	tall := func(st *engine.ClusterStatus) *engine.ClusterStatus {
		st.Isolation = &engine.Isolation{State: "unknown", Reason: "no recognised network plugin among the cluster's 0 DaemonSets; kiln cannot establish that NetworkPolicies are enforced"}
		for i := range 7 {
			st.Objects = append(st.Objects, engine.ObjectStatus{Kind: "NetworkPolicy", Namespace: "kiln-system", Name: fmt.Sprintf("kiln-policy-%d", i), Status: engine.StatusCurrent, Message: "exists"})
		}
		return st
	}
	b := backend()
	b.Inspections = []*engine.ClusterStatus{tall(tuitest.Inspection("dev1", "kiln-local"))}
	w := tuitest.NewWatchBackend(b)
	h := tuitest.Start(t, w, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Send(tea.WindowSizeMsg{Width: 100, Height: 30})
	h.Key("i")
	h.WaitFor(t, "> default/web")
	h.Key("down")
	h.WaitFor(t, "> team-a/api")
	h.Key("enter")
	h.WaitFor(t, "Project team-a/api")
	gone := tall(tuitest.Inspection("dev1", "kiln-local"))
	gone.Projects = slices.DeleteFunc(gone.Projects, func(p engine.ProjectStatus) bool { return p.Project == "api" })
	w.Updates <- gone
	h.Key("esc")
	got := ansi.Strip(h.WaitFor(t, "team-a/api is gone from the cluster"))
	for _, row := range []string{"default/web", "team-a/batch"} {
		if !strings.Contains(got, row) {
			t.Errorf("the project row %s is out of sight beside the gone note:\n%s", row, got)
		}
	}
}

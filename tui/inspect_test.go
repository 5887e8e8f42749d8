package tui_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/tui"
	"github.com/kilnctl/kiln/tui/tuitest"
)

func inspectBackend() *tuitest.Backend {
	b := backend()
	b.Inspections = []*engine.ClusterStatus{tuitest.Inspection("dev1", "kiln-local")}
	return b
}

func TestInspectScreen(t *testing.T) {
	h := tuitest.Start(t, inspectBackend(), tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("i")
	h.WaitFor(t, "Projects (3)")
	h.Key("down")
	requireGolden(t, h.WaitFor(t, "> team-a/api"))
}

func TestProjectDetailScreen(t *testing.T) {
	h := tuitest.Start(t, inspectBackend(), tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("i")
	h.WaitFor(t, "Projects (3)")
	h.Key("down")
	h.Key("enter")
	got := h.WaitFor(t, "Token sync")
	for _, want := range []string{"Project team-a/api", "degraded", "✗ token out of sync", "• no ready endpoints", "age 5h"} {
		if !strings.Contains(ansi.Strip(got), want) {
			t.Errorf("detail screen lacks %q", want)
		}
	}
	requireGolden(t, got)
	h.Key("esc")
	h.WaitFor(t, "> team-a/api")
}

// TestInspectLiveUpdates: the inspect screen re-reads the cluster on its
// own and shows the new state.
func TestInspectLiveUpdates(t *testing.T) {
	b := inspectBackend()
	next := tuitest.Inspection("dev1", "kiln-local")
	next.Projects[1].State, next.Projects[1].Reasons = "running", []string{}
	next.Ready = false
	next.Objects[5].Status, next.Objects[5].Message = engine.StatusInProgress, "0/1 replicas available"
	b.Inspections = append(b.Inspections, next)
	// The first read is let through alone, so the test sees its state
	// before the re-read replaces it.
	b.StatusGate = make(chan struct{})
	h := tuitest.Start(t, b, tui.Options{InspectEvery: 20 * time.Millisecond})
	h.WaitFor(t, "dev1")
	h.Key("i")
	b.StatusGate <- struct{}{}
	h.WaitFor(t, "degraded")
	close(b.StatusGate)
	got := h.WaitFor(t, "platform not ready")
	got = ansi.Strip(got)
	if strings.Contains(got, "degraded") {
		t.Errorf("project still degraded after the re-read:\n%s", got)
	}
	if !strings.Contains(got, "Platform objects (6 of 7 current)") {
		t.Errorf("platform objects not updated:\n%s", got)
	}
	// Leaving the screens ends the refresh cycle.
	h.Key("esc")
	h.WaitFor(t, "Kiln clusters")
	n := b.Reads()
	time.Sleep(100 * time.Millisecond) // five refresh periods: none may read
	if got := b.Reads(); got > n+1 {   // one read may have been in flight
		t.Errorf("%d reads after leaving inspect", got-n)
	}
}

func TestProjectActionsAreConfirmed(t *testing.T) {
	b := inspectBackend()
	b.OnProject = tuitest.ProjectScript("suspend", "team-a/api")
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("i")
	h.WaitFor(t, "Projects (3)")
	h.Key("down")
	h.Key("enter")
	h.WaitFor(t, "Token sync")

	// Declined: nothing runs.
	h.Key("s")
	h.WaitFor(t, "Start project team-a/api?")
	h.Key("n")
	h.WaitFor(t, "[s] start")

	// Suspend, confirmed, runs through the run view and comes back.
	h.Key("p")
	h.WaitFor(t, "Suspend project team-a/api?")
	h.Key("y")
	h.WaitFor(t, "✓ project team-a/api suspend done")
	h.WaitFor(t, "esc back") // the run has ended: esc goes back
	h.Key("esc")
	h.WaitFor(t, "Project team-a/api")

	// Restack offers the other stacks of kiln-config (restacking onto
	// the current one would change nothing).
	h.Key("r")
	h.WaitFor(t, "Restack team-a/api from gpu onto ‹ default ›?")
	h.WaitFor(t, "(1 of 1)")
	h.Key("right")
	h.WaitFor(t, "onto ‹ default ›?")
	h.Key("enter")
	h.WaitFor(t, "✓ project team-a/api suspend done") // the scripted result
	want := []engine.ProjectRequest{{Op: engine.ProjectSuspend, Ref: "team-a/api"}, {Op: engine.ProjectRestack, Ref: "team-a/api", Stack: "default"}}
	if got := b.Ops(); !reflect.DeepEqual(got, want) {
		t.Errorf("project ops = %+v, want %+v", got, want)
	}
}

// TestTokenSyncNeedsTheDeployment: token sync is never claimed in sync
// without the Deployment it is judged from.
func TestTokenSyncNeedsTheDeployment(t *testing.T) {
	b := backend()
	in := tuitest.Inspection("dev1", "kiln-local")
	web := &in.Projects[0]
	web.TokenSync = engine.TokenInSync // stale or wrong: no Deployment in the read
	for i := range web.Objects {
		if web.Objects[i].Kind == "Deployment" {
			web.Objects[i].Status, web.Objects[i].Message = engine.StatusNotFound, "not found"
		}
	}
	b.Inspections = []*engine.ClusterStatus{in}
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("i")
	h.WaitFor(t, "> default/web")
	h.Key("enter")
	got := ansi.Strip(h.WaitFor(t, "Token sync"))
	if strings.Contains(got, "Token sync  ✓") || !strings.Contains(got, "Token sync  ? unknown: no deployment runs a token") {
		t.Errorf("token sync claimed without a Deployment:\n%s", got)
	}
}

// TestInspectShowsProgressAndRefreshing: while the first read is under way
// the screen says what it reads; a later read shows "refreshing…" over
// the last one; a project operation's end starts a read at once.
func TestInspectShowsProgressAndRefreshing(t *testing.T) {
	b := inspectBackend()
	b.StatusGate = make(chan struct{})
	b.OnProject = tuitest.ProjectScript("suspend", "team-a/api")
	h := tuitest.Start(t, b, tui.Options{InspectEvery: time.Hour})
	h.WaitFor(t, "dev1")
	h.Key("i")
	got := h.WaitFor(t, "reading the live objects of cluster dev1")
	if !strings.Contains(ansi.Strip(got), "esc back") {
		t.Errorf("no way back while loading:\n%s", ansi.Strip(got))
	}
	// A key pressed before the read lands says why it does nothing.
	h.Key("s")
	h.WaitFor(t, "! still reading the cluster")
	b.StatusGate <- struct{}{}
	h.WaitFor(t, "Projects (3)")
	h.Key("down")
	h.Key("p")
	h.Key("y")
	h.WaitFor(t, "✓ project team-a/api suspend done")
	got = h.WaitFor(t, "esc back") // the run has ended
	// The finished run's footer offers esc back, not a cancel.
	if s := ansi.Strip(got); !strings.Contains(s, "esc back") || strings.Contains(s, "ctrl+c cancel") {
		t.Errorf("footer of a finished project run:\n%s", s)
	}
	h.Key("esc")
	// The read started when the run ended is still held: refreshing.
	h.WaitFor(t, "refreshing…")
	b.StatusGate <- struct{}{}
	h.WaitFor(t, "updated 03:04:05")
}

// TestNoOpActionsAreDisabled: start on a running project and restack with
// no other stack are refused with the reason, and shown as unavailable.
func TestNoOpActionsAreDisabled(t *testing.T) {
	b := backend()
	in := tuitest.Inspection("dev1", "kiln-local")
	in.Stacks = []string{"default"}
	b.Inspections = []*engine.ClusterStatus{in}
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("i")
	got := ansi.Strip(h.WaitFor(t, "> default/web"))
	for _, want := range []string{"(start: n/a)", "(restack: n/a)", "[p] suspend", "start: default/web is already running"} {
		if !strings.Contains(got, want) {
			t.Errorf("inspect screen lacks %q:\n%s", want, got)
		}
	}
	h.Key("s")
	h.WaitFor(t, "! start: default/web is already running")
	h.Key("r")
	h.WaitFor(t, "! restack: kiln-config lists no stack other than default")
	if ops := b.Ops(); len(ops) != 0 {
		t.Errorf("ops ran: %+v", ops)
	}
	requireGolden(t, h.Screen())
}

// TestInspectShowsFrontDoorAndIsolation: the inspect screen shows the
// entry point with the DNS record to create, and whether isolation is
// enforced (never a check mark without evidence).
func TestInspectShowsFrontDoorAndIsolation(t *testing.T) {
	b := backend()
	in := tuitest.Inspection("dev1", "kiln-local")
	in.FrontDoor = &engine.FrontDoor{Mode: "nodePort", Address: "10.0.0.2:31080", DNS: "*.dev1.kiln.test A 10.0.0.2", Ready: true}
	in.Isolation = &engine.Isolation{State: engine.IsolationNotEnforced, Plugin: "flannel", Reason: "flannel alone does not enforce NetworkPolicy"}
	b.Inspections = []*engine.ClusterStatus{in}
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("i")
	got := ansi.Strip(h.WaitFor(t, "Projects (3)"))
	for _, want := range []string{"Entry", "nodePort 10.0.0.2:31080; DNS: *.dev1.kiln.test A 10.0.0.2", "network isolation not enforced: flannel alone"} {
		if !strings.Contains(got, want) {
			t.Errorf("inspect screen lacks %q:\n%s", want, got)
		}
	}
}

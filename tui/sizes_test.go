package tui_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kilnctl/kiln/engine/event"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/tui"
	"github.com/kilnctl/kiln/tui/tuitest"
)

// longBackend is the feed backend with the long names the issue was
// filed with: a NetworkPolicy among the platform objects, a long project
// name, long reasons and Events.
func longBackend() *tuitest.FeedBackend {
	f := feedBackend()
	st := f.Inspections[0]
	st.Objects = append(st.Objects, engine.ObjectStatus{Kind: "NetworkPolicy", Namespace: "kiln-tenant-default", Name: "kiln-tenant-isolation", Status: engine.StatusCurrent, Message: "ingress only from kiln-system/kiln-gateway"})
	p := &st.Projects[0]
	p.Project = "a-rather-long-project-name"
	p.State, p.Reasons = "degraded", []string{"deployment a-rather-long-project-name: 0/2 replicas available (ImagePullBackOff)", "no ready endpoints"}
	f.Events = append(f.Events, engine.EventInfo{Object: "ReplicaSet/api-7d9f5", Type: "Warning", Reason: "FailedCreate", Count: 3,
		Last: tuitest.T0.Add(-2 * time.Minute), Message: "Error creating: pods \"api-7d9f5-zz\" is forbidden: exceeded quota: kiln-tenant-team-a, requested: cpu=100m"})
	return f
}

// TestScreensAtSizes: every screen — home, the create form, upgrade,
// rotate key, help, inspect, project, delete project, new project, a
// create's run view and its final screen, and (asked) the destroy's typed
// confirmation, the upgrade plan, the rotate key's typed confirmation, a
// create's discovery and its continue question — at 80x24, 120x40 and
// 200x50 (goldens), no line wider than the terminal, the columns grown
// with the width. At 200 columns nothing on the inspect and project
// screens is cut (no …): the widths are the values' own.
func TestScreensAtSizes(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {120, 40}, {200, 50}} {
		w, hgt := size[0], size[1]
		t.Run(fmt.Sprintf("%dx%d", w, hgt), func(t *testing.T) {
			f := longBackend()
			gate := make(chan struct{})
			f.OnCreate = tuitest.CreateScript("dev2", "lab", false, gate)
			h, shot := sized(t, f, w, hgt)
			// visit opens a screen with k, shoots it, and goes back with esc.
			visit := func(k, name, want, back string) string {
				t.Helper()
				h.Key(k)
				got := shot(name, want)
				h.Key("esc")
				h.WaitFor(t, back)
				return got
			}
			shot("home", "dev1")
			for _, v := range [][3]string{
				{"n", "create-form", "New kiln cluster"},
				{"u", "upgrade", "Upgrade kiln platform dev1"},
				{"K", "rotate-key", "Rotate the signing key of kiln cluster dev1"},
				{"?", "help", "Keys on this screen"},
			} {
				visit(v[0], v[1], v[2], "Kiln clusters")
			}
			h.Key("i")
			insp := shot("inspect", "Projects (3)")
			// o: every platform object whole, also those the screen leaves
			// out or cuts.
			h.Key("o")
			objs := ansi.Strip(h.WaitFor(t, "NetworkPolicy kiln-tenant-default/kiln-tenant-isolation: Current"))
			if !strings.Contains(strings.Join(strings.Fields(objs), " "), "ingress only from kiln-system/kiln-gateway") {
				t.Errorf("the objects in full lack the NetworkPolicy's message:\n%s", objs)
			}
			h.Key("esc")
			h.WaitFor(t, "Projects (3)")
			// enter: the first project, the long one. Its Events are read
			// after the screen opens; at 24 rows they are below the fold.
			projWant := "FailedCreate"
			if hgt < 40 {
				projWant = "Reasons"
			}
			proj := visit("enter", "project", projWant, "Projects (3)")
			visit("x", "delete-project", "Type the project name", "Projects (3)")
			visit("n", "new-project", "New project on kiln cluster dev1", "Projects (3)")
			h.Key("esc")
			h.WaitFor(t, "Kiln clusters")
			// A create: its run view mid-way and its final screen.
			h.Key("n")
			h.WaitFor(t, "New kiln cluster")
			h.TM.Type("dev2")
			h.Key("tab")
			h.Key("right") // lab
			h.WaitFor(t, "‹ lab ›")
			for range 4 {
				h.Key("enter")
			}
			shot("run", "no ready endpoints")
			close(gate)
			shot("final", "Next")
			if w >= 200 {
				for name, s := range map[string]string{"inspect": insp, "project": proj} {
					if strings.Contains(s, "…") {
						t.Errorf("the %s screen cuts a value at %d columns:\n%s", name, w, s)
					}
				}
			}
			if w <= 80 && !strings.Contains(insp, "…") {
				t.Errorf("the long reasons fit at 80 columns? the fixture no longer tests cutting:\n%s", insp)
			}
			asked(t, w, hgt)
		})
	}
}

// sized starts a harness on ops, resizes it to w x hgt once home shows
// dev1, and returns it with shot: shot waits for want on a screen of the
// new height, checks that no line is wider than w and compares the screen
// with the golden of the subtest name; it returns the screen, plain.
func sized(t *testing.T, ops tui.Ops, w, hgt int) (*tuitest.Harness, func(name, want string) string) {
	t.Helper()
	h := tuitest.Start(t, ops, tui.Options{})
	// After the first frame, so the harness's own initial size cannot
	// land after this one.
	h.WaitFor(t, "dev1")
	h.Send(tea.WindowSizeMsg{Width: w, Height: hgt})
	shot := func(name, want string) string {
		t.Helper()
		got := h.WaitFor(t, want)
		// The resize has landed when the screen has its height.
		deadline := time.Now().Add(5 * time.Second)
		for strings.Count(got, "\n")+1 != hgt {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the screen never took the size %dx%d:\n%s", name, w, hgt, got)
			}
			time.Sleep(5 * time.Millisecond)
			got = h.WaitFor(t, want)
		}
		for i, l := range strings.Split(ansi.Strip(got), "\n") {
			if n := ansi.StringWidth(l); n > w {
				t.Errorf("%s line %d is %d wide, more than %d: %q", name, i+1, n, w, l)
			}
		}
		t.Run(name, func(t *testing.T) { golden.RequireEqual(t, got) })
		return ansi.Strip(got)
	}
	return h, shot
}

// gatedSink holds the end of the discover phase until gate is closed, so
// a create's discovery screen can be looked at.
type gatedSink struct {
	engine.Sink
	ctx  context.Context
	gate <-chan struct{}
}

func (s gatedSink) Emit(ev engine.Event) {
	if p, ok := ev.Payload.(event.PhaseEvent); ok && p.Phase == "discover" && p.State == engine.PhaseSucceeded {
		select {
		case <-s.gate:
		case <-s.ctx.Done():
		}
	}
	s.Sink.Emit(ev)
}

// asked shoots, at w x hgt, the screens that ask before anything is
// changed: the destroy's typed confirmation (a wrong name typed), the
// upgrade plan, the rotate key's typed confirmation, the discovery of a
// create (c: continue dev1) and its question on a platform already
// installed. Each is declined.
func asked(t *testing.T, w, hgt int) {
	b := backend()
	b.OnDestroy = func(ctx context.Context, sink engine.Sink, c engine.Confirmer) error {
		ok, err := c.ConfirmDestroy(ctx, engine.DestroyQuestion{Provider: "kube", Name: "dev1", Location: "kiln-local",
			Tenants: []string{"default", "team-a"}, TokenDir: "/home/dev/.local/state/kiln/kube/dev1/tokens",
			Projects: "3 projects (2 meant to be running: default/api, default/blog)"})
		if err == nil && ok {
			t.Errorf("the destroy was confirmed")
		}
		sink.Emit(engine.Event{Payload: event.ResultEvent{Err: failure.NeedsConfirm("nothing was changed"), Message: "nothing was changed"}})
		return err
	}
	b.OnUpgrade = tuitest.UpgradeScript("dev1", "kiln-local", tuitest.UpgradePlan("dev1"))
	b.OnRotate = tuitest.RotateScript("dev1", "kiln-local", engine.RotateStart, 24*time.Hour)
	gate := make(chan struct{})
	create := tuitest.CreateScript("dev1", "kiln-local", true, nil)
	b.OnCreate = func(ctx context.Context, sink engine.Sink, c engine.Confirmer) error {
		return create(ctx, gatedSink{Sink: sink, ctx: ctx, gate: gate}, c)
	}
	h, shot := sized(t, b, w, hgt)
	home := func() {
		t.Helper()
		h.WaitFor(t, "esc back") // the run has ended
		h.Key("esc")
		h.WaitFor(t, "Kiln clusters")
	}
	h.Key("d")
	h.WaitFor(t, "Type the cluster name to confirm")
	h.TM.Type("dev")
	h.Key("enter")
	shot("destroy", "type the cluster name exactly")
	h.Key("esc")
	home()
	h.Key("u")
	h.WaitFor(t, "Upgrade kiln platform dev1")
	for range 4 { // past the fields to Plan, and Plan
		h.Key("enter")
	}
	shot("upgrade-plan", "[ Apply 7 changes ]")
	h.Key("esc")
	home()
	h.Key("K")
	h.WaitFor(t, "Rotate the signing key of kiln cluster dev1")
	h.TM.Type("24h")
	h.WaitFor(t, "✓ both keys stay trusted for 24h after")
	h.Key("enter")
	h.Key("enter")
	shot("rotate-confirm", "Type the cluster name to confirm")
	h.Key("esc")
	home()
	h.Key("c") // continue the selected cluster, dev1
	shot("discover", "unreachable (connection refused)")
	close(gate)
	shot("continue", "[ Continue with existing credentials ]")
	h.Key("esc")
	h.WaitFor(t, "esc back")
}

// TestInspectBudgetCountsWrappedLines: the inspect screen sizes its
// platform objects from what is left once the lines under them are
// rendered, wrapped: a long entry, isolation and access line at 80x30
// (three lines each) never push the page into scrolling (the budget once counted each as one
// line and Access not at all, and the page scrolled).
func TestInspectBudgetCountsWrappedLines(t *testing.T) {
	f := longBackend()
	st := f.Inspections[0]
	st.FrontDoor = &engine.FrontDoor{Mode: "LoadBalancer", Message: "the Service kiln-system/kiln-gateway has no load balancer address yet: the cluster has no load balancer controller, or it is still provisioning one"}
	st.Isolation = &engine.Isolation{State: "not-enforced", Plugin: "flannel", Reason: "flannel does not enforce NetworkPolicy: the tenants' NetworkPolicies are accepted and have no effect"}
	st.Access = &engine.Access{Mode: "API_AND_CONFIG_MAP", Problem: "the access entries could not be read: AccessDeniedException: the caller is not allowed to call eks:ListAccessEntries on this cluster"}
	h, shot := sized(t, f, 80, 30)
	h.Key("i")
	got := shot("inspect-wrapped", "Projects (3)")
	if strings.Contains(got, "pgup/pgdn scroll") {
		t.Errorf("the inspect screen scrolls at 80x30: its budget does not count the wrapped lines:\n%s", got)
	}
	for _, want := range []string{"Platform objects", "… 5 more, current", "Entry", "Isolation", "Access", "> default/a-rather", "team-a/batch", "[n] new project"} {
		if !strings.Contains(got, want) {
			t.Errorf("the inspect screen at 80x30 lacks %q:\n%s", want, got)
		}
	}
}

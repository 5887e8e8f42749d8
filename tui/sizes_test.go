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
// create's run view and its final screen — at 80x24, 120x40 and 200x50
// (goldens), the columns grown with the width. At 200 columns nothing on the inspect and project screens is cut
// (no …): the widths are the values' own.
func TestScreensAtSizes(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {120, 40}, {200, 50}} {
		w, hgt := size[0], size[1]
		t.Run(fmt.Sprintf("%dx%d", w, hgt), func(t *testing.T) {
			f := longBackend()
			gate := make(chan struct{})
			f.OnCreate = tuitest.CreateScript("dev2", "lab", false, gate)
			h := tuitest.Start(t, f, tui.Options{})
			// After the first frame, so the harness's own initial size
			// cannot land after this one.
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
		})
	}
}

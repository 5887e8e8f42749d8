package tui_test

import (
	"fmt"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/tui"
	"github.com/kilnctl/kiln/tui/tuitest"
)

// TestTablesMeasureDisplayWidth: columns are sized in terminal cells, so
// a context named with wide characters (two cells each) keeps the next
// columns aligned and no line wider than the terminal.
func TestTablesMeasureDisplayWidth(t *testing.T) {
	b := backend()
	b.List = append(b.List,
		tui.Cluster{Provider: "kube", Name: "wide1", Location: "開発クラスタ", Platform: engine.PlatformInstalled},
		tui.Cluster{Provider: "kube", Name: "wide2", Location: "本番環境のとても長いコンテキスト名です", Platform: engine.PlatformAbsent})
	h := tuitest.Start(t, b, tui.Options{})
	got := h.WaitFor(t, "wide2")
	checkWidth(t, got, 80, 24)
	col := -1
	for _, l := range plain(got) {
		i := strings.Index(l, "installed")
		if i < 0 {
			i = strings.Index(l, "absent")
		}
		if i < 0 || !strings.Contains(l, "kube ") {
			continue
		}
		c := ansi.StringWidth(l[:i])
		if col >= 0 && c != col {
			t.Errorf("PLATFORM at column %d, want %d, in %q:\n%s", c, col, l, ansi.Strip(got))
		}
		col = c
	}
	if col < 0 {
		t.Fatalf("no table rows:\n%s", ansi.Strip(got))
	}
	if !strings.Contains(ansi.Strip(got), "本番環境のとても…") {
		t.Errorf("the long wide context is not cut to its column with …:\n%s", ansi.Strip(got))
	}
}

// TestInspectTableScrollsToSelection: with more projects than rows the
// project table scrolls to keep the selection in view, both ways.
func TestInspectTableScrollsToSelection(t *testing.T) {
	b := inspectBackend()
	st := b.Inspections[0]
	base := st.Projects[0]
	st.Projects = nil
	for i := range 60 {
		p := base
		p.Tenant, p.Project = "team-a", fmt.Sprintf("p%02d", i)
		st.Projects = append(st.Projects, p)
	}
	h := tuitest.Start(t, tuitest.NewWatchBackend(b), tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("i")
	h.WaitFor(t, "> team-a/p00")
	for range 40 {
		h.Key("down")
	}
	got := h.WaitFor(t, "> team-a/p40")
	checkWidth(t, got, 80, 24)
	for range 35 {
		h.Key("up")
	}
	h.WaitFor(t, "> team-a/p05")
}

// TestHomeKeepsSelectionInView: on a terminal too short for the cluster
// list the selected row stays on screen as it moves down.
func TestHomeKeepsSelectionInView(t *testing.T) {
	b := backend()
	b.List = nil
	for i := range 12 {
		b.List = append(b.List, tui.Cluster{Provider: "kube", Name: fmt.Sprintf("c%02d", i), Location: fmt.Sprintf("ctx%02d", i), Platform: engine.PlatformInstalled})
	}
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "c00")
	h.Send(tea.WindowSizeMsg{Width: 80, Height: 10})
	for range 11 {
		h.Key("down")
	}
	got := h.WaitFor(t, "> kube   c11")
	checkWidth(t, got, 80, 10)
}

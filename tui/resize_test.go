package tui_test

import (
	"bytes"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/kilnctl/kiln/tui"
	"github.com/kilnctl/kiln/tui/tuitest"
)

// TestResizeResetsScrollRegionThenRepaints: after a resize the wizard
// sets the terminal's scroll region back to the whole screen (DECSTBM
// without margins), then repaints every row. Bubble Tea's renderer leaves
// the region at the rows it believed the screen had; a frame drawn while
// the terminal had already grown (tmux tells a pane of its new size up to
// 250ms late) left one shorter than the screen, and every later scroll
// moved only part of it: the continue question lost its buttons under
// the discovery screen's key help
// (TestWizardRepaintsWholeAfterResizeInTmux shows it in a real terminal).
// The first size is no resize: nothing is written before the wizard has
// the alternate screen (DECSTBM homes the cursor, and the shell's would
// come back at the top).
func TestResizeResetsScrollRegionThenRepaints(t *testing.T) {
	h := tuitest.Start(t, backend(), tui.Options{})
	h.WaitFor(t, "dev1")
	reset := []byte(ansi.SetTopBottomMargins(0, 0))
	repaint := []byte(ansi.CursorHomePosition + ansi.EraseEntireScreen)

	var out bytes.Buffer
	// The size it has, once more: no resize.
	h.TM.Send(tea.WindowSizeMsg{Width: 80, Height: 24})
	h.TM.Send(tea.WindowSizeMsg{Width: 60, Height: 17})
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := out.ReadFrom(h.TM.Output()); err != nil {
			t.Fatal(err)
		}
		b := out.Bytes()
		if i := bytes.Index(b, reset); i >= 0 && bytes.Contains(b[i:], repaint) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a resize reset no scroll region before a full repaint; output:\n%q", b)
		}
		time.Sleep(5 * time.Millisecond) // polling the program's output
	}
	if n := bytes.Count(out.Bytes(), reset); n != 1 {
		t.Errorf("the scroll region was reset %d times, want once (the one resize)", n)
	}
}

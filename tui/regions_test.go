package tui_test

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/kilnctl/kiln/tui"
	"github.com/kilnctl/kiln/tui/tuitest"
)

// TestHomeShowsRegionsSearch: while AWS regions are searched the home
// screen shows a spinner per region still under way and ✓/✗ for those
// done; a region that fails is reported with its cause, the screen lists
// the clusters found all the same.
func TestHomeShowsRegionsSearch(t *testing.T) {
	b := &tuitest.RegionBackend{Backend: backend(), Regions: []string{"eu-west-1", "sa-east-1", "us-east-1"}, Early: 2,
		Failed: map[string]string{"sa-east-1": "region sa-east-1: no answer within 10s"}, Gate: make(chan struct{})}
	h := tuitest.Start(t, b, tui.Options{})
	got := h.WaitFor(t, "AWS regions: 2 of 3 searched")
	plain := ansi.Strip(got)
	for _, want := range []string{"✓ eu-west-1", "✗ sa-east-1", "⠋ us-east-1", "✗ sa-east-1: region sa-east-1: no answer within 10s"} {
		if !strings.Contains(plain, want) {
			t.Errorf("home while searching lacks %q:\n%s", want, plain)
		}
	}
	requireGolden(t, got)
	close(b.Gate)
	got = ansi.Strip(h.WaitFor(t, "AWS regions: 3 searched, 1 failed"))
	if !strings.Contains(got, "> kube   dev1") || !strings.Contains(got, "✗ sa-east-1: region sa-east-1: no answer within 10s") {
		t.Errorf("home after the search:\n%s", got)
	}
}

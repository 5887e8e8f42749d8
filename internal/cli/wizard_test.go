package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/kilnctl/kiln/internal/cli/ndjson"
	"github.com/kilnctl/kiln/tui"
	"github.com/kilnctl/kiln/tui/tuitest"
)

// TestWizardAndHeadlessReceiveSameEvents runs one create through both
// frontends, the headless NDJSON sink and the wizard's bridge, from the same
// scripted event source, and compares the event sequences they received.
func TestWizardAndHeadlessReceiveSameEvents(t *testing.T) {
	for _, tc := range []struct {
		name      string
		installed bool
		keys      []string // "@text" waits until the screen shows text
	}{
		{name: "fresh", keys: []string{"n", "d", "e", "v", "2", "enter", "right", "@‹ kiln-free ›", "enter", "enter", "enter", "enter"}},
		{name: "continue", installed: true, keys: []string{"c", "@Continue with existing credentials", "left", "enter"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "dev2"
			if tc.installed {
				name = "dev1"
			}
			script := tuitest.CreateScript(name, "kiln-local", tc.installed, nil)

			var headless bytes.Buffer
			if err := script(context.Background(), newJSONPrinter(&headless), headlessConfirmer{cont: true}); err != nil {
				t.Fatalf("headless: %v", err)
			}
			want := strings.Split(strings.TrimSpace(headless.String()), "\n")

			// kiln-free is a context without a cluster: the form refuses
			// kiln-local, where dev1 lives, for dev2.
			b := &tuitest.Backend{Contexts: []string{"kiln-local", "kiln-free"}, Current: "kiln-local", OnCreate: script,
				List: []tui.Cluster{{Provider: "kube", Name: "dev1", Location: "kiln-local", Platform: "installed"}}}
			h := tuitest.Start(t, b, tui.Options{Record: true})
			h.WaitFor(t, "dev1")
			for _, k := range tc.keys {
				if text, ok := strings.CutPrefix(k, "@"); ok {
					h.WaitFor(t, text)
					continue
				}
				h.Key(k)
			}
			h.WaitFor(t, "Next")
			evs := h.Events()
			if len(evs) != len(want) {
				t.Fatalf("wizard received %d events, headless %d", len(evs), len(want))
			}
			for i, ev := range evs {
				got, err := ndjson.Marshal(ev)
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != want[i] {
					t.Errorf("event %d:\nwizard   %s\nheadless %s", i, got, want[i])
				}
			}
		})
	}
}

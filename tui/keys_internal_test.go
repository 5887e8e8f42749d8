package tui

import (
	"testing"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// TestHelpBindingsMatchTheirKeys: a help entry's binding matches the keys
// it names, symbols included, so the help and the keys cannot drift apart.
func TestHelpBindingsMatchTheirKeys(t *testing.T) {
	for _, tc := range []struct {
		help string
		key  tea.KeyPressMsg
	}{
		{"↑/↓", tea.KeyPressMsg{Code: tea.KeyUp}},
		{"↑/↓", tea.KeyPressMsg{Code: tea.KeyDown}},
		{"pgup/pgdn", tea.KeyPressMsg{Code: tea.KeyPgDown}},
		{"enter/y", tea.KeyPressMsg{Code: 'y', Text: "y"}},
		{"/", tea.KeyPressMsg{Code: '/', Text: "/"}},
	} {
		if b := (keyHelp{tc.help, "x"}).binding(); !key.Matches(tc.key, b) {
			t.Errorf("binding %q (keys %v) does not match %s", tc.help, b.Keys(), tc.key)
		}
	}
	if b := (keyHelp{"↑/↓", "x"}).binding(); key.Matches(tea.KeyPressMsg{Code: tea.KeyLeft}, b) {
		t.Errorf("↑/↓ matches left")
	}
}

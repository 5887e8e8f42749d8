package tui

import (
	"testing"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/kilnctl/kiln/engine"
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

// TestHelpExplainsEveryKey: ? explains every key the main screens offer
// (the help is built from the same bindings as the footer; a binding
// without an explanation would show its two-word hint alone).
func TestHelpExplainsEveryKey(t *testing.T) {
	m := New(Options{})
	ins := &inspectState{target: engine.ClusterRef{Provider: "kube", Name: "dev1"}}
	states := map[string]func(){
		"home":           func() { m.screen = screenHome },
		"home, last run": func() { m.screen, m.lastRun = screenHome, &runState{} },
		"inspect":        func() { m.screen, m.insp = screenInspect, ins },
		"inspect, filter": func() {
			m.screen, m.insp = screenInspect, &inspectState{filtering: true}
		},
		"inspect, asking":   func() { m.screen, m.insp = screenInspect, &inspectState{ask: &projectAsk{op: "start"}} },
		"inspect, restack":  func() { m.screen, m.insp = screenInspect, &inspectState{ask: &projectAsk{op: "restack"}} },
		"inspect read-only": func() { m.screen, m.insp, m.opts.ReadOnly = screenInspect, ins, true },
		"project":           func() { m.screen, m.insp, m.opts.ReadOnly = screenProject, ins, false },
		"new project":       func() { m.screen = screenProjectNew },
		"delete project":    func() { m.screen = screenProjectDelete },
		"run, running":      func() { m.screen, m.run = screenRun, &runState{running: true} },
		"run, ended":        func() { m.screen, m.run = screenRun, &runState{} },
		"final":             func() { m.screen = screenFinal },
		"create form":       func() { m.screen = screenCreate },
		"continue":          func() { m.screen = screenContinue },
		"destroy":           func() { m.screen = screenDestroy },
		// The upgrade and rotate key screens (u and K).
		"upgrade":      func() { m.screen, m.day2.up = screenUpgrade, &upgradeState{} },
		"upgrade plan": func() { m.screen = screenUpgradePlan },
		"rotate key":   func() { m.screen, m.day2.rot = screenRotate, &rotateState{} },
		"rotate key, finishing": func() {
			m.screen, m.day2.rot = screenRotate, &rotateState{keyIDs: []string{"sha256:a", "sha256:b"}}
		},
		"rotate key, confirm": func() { m.screen = screenRotateConfirm },
	}
	for name, set := range states {
		set()
		for _, b := range m.keys(false) {
			if keys, desc, long := explained(b); long == "" {
				t.Errorf("%s: ? does not explain %q %q", name, keys, desc)
			}
		}
	}
}

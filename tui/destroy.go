package tui

import (
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/kilnctl/kiln/engine"
)

// startDestroy destroys cluster t: the engine asks first (the typed
// name), so a rerun from the run view asks again too.
func (m *Model) startDestroy(t engine.ClusterRef) tea.Cmd {
	cmd := m.startOn(t.Provider, opDestroy, t.Name, t.Location, func(o Ops) Op {
		return o.Destroy(t, engine.DestroyRequest{})
	})
	m.run.target = t
	return cmd
}

// destroyKeys are the destroy question's keys (dispatch, footer, help).
var destroyKeys = struct{ Confirm, Cancel, Scroll key.Binding }{
	Confirm: key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "confirm typed name")),
	Cancel:  key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel (nothing changes)")),
	Scroll:  key.NewBinding(key.WithKeys("pgup", "pgdown", "up", "down")),
}

func (m *Model) destroyKey(k tea.KeyPressMsg) tea.Cmd {
	switch {
	case key.Matches(k, destroyKeys.Cancel):
		m.answerDestroy(false)
		return nil
	case key.Matches(k, destroyKeys.Confirm):
		if m.destAsk != nil && m.destIn.Value() != m.destAsk.q.Name {
			m.destErr = "type the cluster name exactly to confirm, or Esc to cancel"
			return nil
		}
		m.answerDestroy(true)
		return nil
	case key.Matches(k, destroyKeys.Scroll):
		m.scrollKey(k.String())
		return nil
	}
	return m.updateFocusedInput(k)
}

func (m *Model) answerDestroy(ok bool) {
	if m.destAsk != nil {
		m.destAsk.reply <- ok
		m.destAsk = nil
	}
	if !ok && m.run != nil {
		m.run.userCancel = true
	}
	m.destIn.Blur()
	m.screen = screenRun
}

func (m *Model) viewDestroy(p *page) {
	q := m.destAsk.q
	p.line(m.st.fail.Render("Destroy cluster " + q.Name))
	p.blank()
	p.add("This removes kiln cluster %s from %s context %s: its platform objects and tenant namespaces (%s), each verified gone. The keyring entry is removed.",
		q.Name, q.Provider, q.Location, strings.Join(q.Tenants, ", "))
	if q.Projects != "" {
		p.add("Their %s are removed with them.", q.Projects)
	}
	if q.TokenDir != "" {
		p.add("The token dir %s is moved aside, never deleted.", q.TokenDir)
	}
	p.blank()
	p.line("Type the cluster name to confirm:")
	p.input("  > ", m.destIn)
	if m.destErr != "" {
		p.hang(m.st.errorText.Render("✗ "+m.destErr), 2)
	}
	p.blank()
	p.line(m.st.faint.Render("Esc cancels; nothing is changed."))
}

func (m *Model) destName() string {
	if m.destAsk != nil {
		return m.destAsk.q.Name
	}
	return ""
}

package tui

import (
	"fmt"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/internal/human"
)

// continueKeys are the continue question's keys (dispatch, footer, help).
var continueKeys = struct{ Choose, Confirm, Cancel key.Binding }{
	Choose:  key.NewBinding(key.WithKeys("left", "right", "tab", "shift+tab", "h", "l"), key.WithHelp("←/→/tab", "choose")),
	Confirm: key.NewBinding(key.WithKeys("enter", "space"), key.WithHelp("enter", "confirm")),
	Cancel:  key.NewBinding(key.WithKeys("esc", "q"), key.WithHelp("esc", "cancel (nothing changes)")),
}

func (m *Model) continueKey(msg tea.KeyPressMsg) tea.Cmd {
	k := continueKeys
	switch {
	case key.Matches(msg, k.Choose):
		m.contFocus = 1 - m.contFocus
	case key.Matches(msg, k.Confirm):
		m.answerContinue(m.contFocus == 0)
	case key.Matches(msg, k.Cancel):
		m.answerContinue(false)
	default:
		m.scrollKey(msg.String())
	}
	return nil
}

func (m *Model) answerContinue(ok bool) {
	if m.contAsk != nil {
		m.contAsk.reply <- ok
		m.contAsk = nil
	}
	if !ok && m.run != nil {
		m.run.userCancel = true
	}
	m.screen = screenRun
}

func (m *Model) viewDiscover(p *page) {
	r := m.run
	el := m.opts.Now().Sub(r.started)
	if ph := r.phase("discover"); ph != nil && ph.state != engine.PhaseStarted {
		el = time.Duration(ph.elapsedMS) * time.Millisecond
	}
	p.line(m.spinner() + " Discovering kiln clusters in every kubeconfig context… " + m.st.faint.Render(human.Elapsed(el)))
	p.blank()
	for _, c := range r.found {
		name := c.Name
		if name == "" {
			name = "no kiln cluster"
		}
		line := fmt.Sprintf("  found %s %s: %s, platform %s", c.Provider, c.Location, name, c.Platform)
		if c.Error != "" {
			line = m.st.warn.Render(fmt.Sprintf("  %s %s: unreachable (%s)", c.Provider, c.Location, c.Error))
		}
		p.hang(line, 4)
	}
}

func (m *Model) viewContinue(p *page) {
	q := m.contAsk.q
	p.line(m.st.header.Render("The kiln platform is already installed"))
	p.blank()
	p.add("Cluster %s already has the kiln platform in %s context %s.", q.Name, q.Provider, q.Location)
	p.blank()
	p.line("  Trusted key ids")
	for _, id := range q.TrustedKeyIDs {
		p.line("    " + id)
	}
	if q.TokenDir != "" {
		p.hang(fmt.Sprintf("  Token dir        %s", q.TokenDir), 19)
		p.line("                   " + m.st.ok.Render("✓ holds a key the cluster trusts"))
	} else {
		p.line("  Token dir        " + m.st.warn.Render("none found with a trusted key"))
	}
	p.blank()
	p.line("Continuing reuses the key material the cluster already trusts: no key is generated, the token dir is kept, and missing or drifted platform objects are put back. Cancel changes nothing.")
	if q.TokenDir == "" {
		p.line(m.st.warn.Render("Without a trusted token dir, continuing stops and says where kiln looked; the create form's Token dir field (n) can name the right one."))
	}
	b1, b2 := "[ Continue with existing credentials ]", "[ Cancel ]"
	b1, b2 = m.button(b1, m.contFocus == 0), m.button(b2, m.contFocus != 0)
	p.pinButtons("  ", b1, b2)
}

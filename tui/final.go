package tui

import (
	"fmt"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/kilnctl/kiln/engine"
)

func (m *Model) viewFinal(p *page) {
	r := m.run
	p.hang(m.st.ok.Render("✓ "+r.result.Message), 2)
	p.blank()
	td := r.result.TokenDir
	if td == "" {
		td = "(none)"
	}
	p.hang(fmt.Sprintf("  Token dir     %s", td), 16)
	prov := r.provider
	if prov == "" {
		prov = "kube"
	}
	next := NextCommands(engine.ClusterRef{Provider: prov, Name: r.name, Location: r.location})
	if r.provider == "aws" {
		p.hang(fmt.Sprintf("  Region        %s", r.location), 16)
	} else {
		p.hang(fmt.Sprintf("  Kube context  %s", r.location), 16)
	}
	p.blank()
	p.line(m.st.header.Render("Next"))
	p.hang("  "+m.actions([]keyHelp{{"i", "inspect " + r.name}})+m.st.faint.Render("   its platform objects and projects; n there makes a project"), 4)
	p.hang("  "+m.actions([]keyHelp{{"u", "upgrade"}, {"K", "rotate key"}, {"l", "review the run"}}), 4)
	p.blank()
	p.line(m.st.faint.Render("From a shell"))
	for _, c := range next {
		line := "  " + c[0]
		if c[1] != "" {
			line += m.st.faint.Render("   # " + c[1])
		}
		p.hang(line, 4)
	}
	p.pin(m.st.faint.Render(fmt.Sprintf("l: review the run (%d resources, %d log lines) · Enter or Esc: back to clusters", len(r.resources), len(r.logs))))
}

// NextCommands are the commands the final screen of a create of cluster t
// suggests, each with what it is for ("" for nothing to say): runnable as
// shown, on the cluster at hand (its context or region named).
func NextCommands(t engine.ClusterRef) [][2]string {
	at := locationFlag(t)
	if t.Provider == "aws" {
		return [][2]string{
			{"kiln status aws " + t.Name + at, "health from live objects"},
			{"kiln wait aws " + t.Name + at + " --timeout 2m", "ready and tokens valid?"},
			{"kiln inspect aws " + t.Name + at, "the live inspector"},
			{"kiln destroy aws " + t.Name + at, "verified removal"},
		}
	}
	return [][2]string{
		{"kiln status kube " + t.Name + at, "health from live objects"},
		{"kiln wait kube " + t.Name + at + " --timeout 2m", "ready and tokens valid?"},
		{"kubectl --context " + t.Location + " -n kiln-system get all", ""},
		{"kiln destroy kube " + t.Name + at, "verified removal"},
	}
}

// locationFlag names t's location as the CLI takes it (" --context C",
// " --region R"; "" when there is none).
func locationFlag(t engine.ClusterRef) string {
	switch {
	case t.Location == "":
		return ""
	case t.Provider == "aws":
		return " --region " + t.Location
	}
	return " --context " + t.Location
}

// finalKeys are the final screen's keys: the wizard's next steps on the
// cluster just made (with u upgrade and K rotate key), the run, home.
var finalKeys = struct{ Inspect, Review, Home, Quit key.Binding }{
	Inspect: key.NewBinding(key.WithKeys("i"), key.WithHelp("i", "inspect")),
	Review:  key.NewBinding(key.WithKeys("l"), key.WithHelp("l", "review the run")),
	Home:    key.NewBinding(key.WithKeys("esc", "q", "enter"), key.WithHelp("enter/esc", "back to clusters")),
	Quit:    key.NewBinding(key.WithKeys("ctrl+c"), key.WithHelp("ctrl+c", "quit")),
}

// finalBindings are the final screen's keys as the footer shows them.
func finalBindings() []key.Binding {
	k := finalKeys
	return []key.Binding{k.Inspect, clusterKeys.Upgrade, clusterKeys.Rotate, k.Review, k.Home, k.Quit}
}

func (m *Model) finalKey(msg tea.KeyPressMsg) tea.Cmd {
	k := finalKeys
	if t, ok := m.finalTarget(); ok {
		switch {
		case key.Matches(msg, k.Inspect):
			return m.openInspect(t)
		case key.Matches(msg, clusterKeys.Upgrade, clusterKeys.Rotate):
			return m.dayTwoKeyPress(msg.String(), t, nil)
		}
	}
	switch {
	case key.Matches(msg, k.Home):
		return m.goHome()
	case key.Matches(msg, k.Review):
		// The run's log and resources; Esc comes back here.
		m.screen, m.runBack, m.runReopened = screenRun, screenFinal, true
	default:
		m.scrollKey(msg.String())
	}
	return nil
}

// finalTarget is the cluster the final screen is about.
func (m *Model) finalTarget() (engine.ClusterRef, bool) {
	r := m.run
	if r == nil || r.result == nil || !r.result.OK {
		return engine.ClusterRef{}, false
	}
	prov := r.provider
	if prov == "" {
		prov = "kube"
	}
	return engine.ClusterRef{Provider: prov, Name: r.name, Location: r.location}, true
}

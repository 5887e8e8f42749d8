package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/table"
	tea "charm.land/bubbletea/v2"

	"github.com/kilnctl/kiln/engine"
)

func (m *Model) goHome() tea.Cmd {
	if m.opts.InspectOnly {
		// kiln inspect: the inspector is the whole program.
		m.closeInspect()
		return tea.Quit
	}
	m.closeInspect()
	m.screen, m.help, m.run, m.insp = screenHome, false, nil, nil
	return m.refresh()
}

// homeKeys are the home screen's keys: they dispatch (homeKey) and the
// footer and ? help list them (homeBindings).
var homeKeys = struct {
	New, Continue, Inspect, Destroy, Refresh, LastRun, Up, Down, Select, Quit, Back, Scroll key.Binding
}{
	New:      key.NewBinding(key.WithKeys("n"), key.WithHelp("n", "new")),
	Continue: key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "continue")),
	Inspect:  key.NewBinding(key.WithKeys("i", "enter"), key.WithHelp("i", "inspect")),
	Destroy:  key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "destroy")),
	Refresh:  key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "refresh")),
	LastRun:  key.NewBinding(key.WithKeys("l"), key.WithHelp("l", "last run")),
	Up:       key.NewBinding(key.WithKeys("up", "k")),
	Down:     key.NewBinding(key.WithKeys("down", "j")),
	Select:   key.NewBinding(key.WithKeys("up", "k", "down", "j"), key.WithHelp("↑/↓", "select")),
	Quit:     key.NewBinding(key.WithKeys("q"), key.WithHelp("q", "quit")),
	Back:     key.NewBinding(key.WithKeys("esc")),
	Scroll:   key.NewBinding(key.WithKeys("pgup", "pgdown", "home", "end")),
}

// homeBindings are the home screen's keys as the footer shows them.
func (m *Model) homeBindings() []key.Binding {
	k := homeKeys
	bs := []key.Binding{k.New, k.Continue, k.Inspect, k.Destroy, clusterKeys.Upgrade, clusterKeys.Rotate, k.Refresh}
	if m.lastRun != nil {
		bs = append(bs, k.LastRun)
	}
	return append(bs, k.Select, k.Quit)
}

func (m *Model) homeKey(msg tea.KeyPressMsg) tea.Cmd {
	k, s := homeKeys, msg.String()
	switch {
	case key.Matches(msg, k.Quit):
		return tea.Quit
	case key.Matches(msg, k.Back):
		return nil // Esc goes back; home is the first screen, so it stays
	case key.Matches(msg, k.Up):
		m.homeSel = clamp(m.homeSel-1, 0, len(m.clusters)-1)
	case key.Matches(msg, k.Down):
		m.homeSel = clamp(m.homeSel+1, 0, len(m.clusters)-1)
	case key.Matches(msg, k.New):
		return m.openCreate(true)
	case key.Matches(msg, k.Refresh):
		return m.refresh()
	case key.Matches(msg, k.LastRun):
		if m.lastRun == nil {
			m.homeNote = "no run yet in this session: the last run's log opens here after one"
			return nil
		}
		m.run, m.screen, m.runBack, m.runReopened = m.lastRun, screenRun, screenHome, true
		return nil
	case key.Matches(msg, k.Scroll):
		m.scrollKey(s)
	case key.Matches(msg, k.Continue, k.Inspect, k.Destroy, clusterKeys.Upgrade, clusterKeys.Rotate):
		if len(m.clusters) == 0 {
			if s == "enter" {
				return m.openCreate(true)
			}
			m.homeNote = "no kiln cluster to act on: press n to create one, or r to search again"
			return nil
		}
		c := m.clusters[m.homeSel]
		if c.Name == "" {
			verb := map[string]string{"c": "continue", "enter": "inspect", "i": "inspect", "d": "destroy", "u": "upgrade", "K": "rotate the key of"}[s]
			noun := locationNoun(c.Provider)
			if c.Err != "" {
				m.homeNote = fmt.Sprintf("%s %s is unreachable, so there is no cluster to %s there; fix the %s (the error is above) and press r to search again", noun, c.Location, verb, noun)
			} else {
				m.homeNote = fmt.Sprintf("%s %s has no kiln cluster to %s; press n to create one", noun, c.Location, verb)
			}
			return nil
		}
		t := engine.ClusterRef{Provider: c.Provider, Name: c.Name, Location: c.Location}
		if isDayTwoKey(s) {
			return m.dayTwoKeyPress(s, t, c.KeyIDs)
		}
		switch {
		case key.Matches(msg, k.Continue):
			// Continue goes through create: the engine finds the platform
			// installed and asks, so the user sees what continuing means.
			return m.startOn(c.Provider, opCreate, c.Name, c.Location, func(o Ops) Op {
				return o.Create(t, engine.Infra{}, engine.CreateRequest{})
			})
		case key.Matches(msg, k.Destroy):
			return m.startDestroy(t)
		default:
			return m.openInspect(t)
		}
	}
	return nil
}

func (m *Model) viewHome(p *page, rows int) {
	p.line(m.st.header.Render("Kiln clusters across kubeconfig contexts"))
	p.blank()
	switch {
	case m.homeLoading && len(m.clusters) == 0:
		p.line(m.spinner() + " discovering kiln clusters in every context…")
	case m.homeErr != "":
		p.hang(m.st.errorText.Render("✗ "+m.homeErr), 2)
	case len(m.clusters) == 0:
		p.line("No kiln cluster found. Press n to create one.")
	default:
		cols := []table.Column{{Title: "PROV", Width: 7}, {Title: "NAME", Width: 15}, {Title: "CONTEXT", Width: 18}, {Title: "PLATFORM", Width: 15}, {Title: "PROJ", Width: 5}, {Title: "TOKEN DIR"}}
		trows := make([]table.Row, len(m.clusters))
		for i, c := range m.clusters {
			td := "not found"
			if c.TokenDir != "" {
				td = "trusted"
			}
			if c.Err != "" {
				td = "unreachable"
			}
			name := c.Name
			if name == "" {
				name = "-"
			}
			// Projects as kiln list counts them: "-" without a platform or
			// when they could not be read.
			projects := fmt.Sprintf("%4s", "-")
			if c.Platform == engine.PlatformInstalled && c.Projects >= 0 {
				projects = fmt.Sprintf("%4d", c.Projects)
			}
			trows[i] = table.Row{c.Provider, name, c.Location, c.Platform, projects, td}
		}
		p.addTable(m.renderTable(&m.homeTable, cols, trows, m.homeSel, p.width, max(rows-len(p.lines)-9, 4)))
		if m.homeLoading {
			p.line(m.spinner() + m.st.faint.Render(" refreshing…"))
		}
		c := m.clusters[m.homeSel]
		p.blank()
		if len(c.KeyIDs) > 0 {
			p.hang(fmt.Sprintf("Trusted keys: %s", strings.Join(shortKeys(c.KeyIDs), ", ")), 14)
		}
		if c.TokenDir != "" {
			p.hang(fmt.Sprintf("Token dir:    %s", c.TokenDir), 14)
		} else if c.Err == "" {
			p.line("Token dir:    none known with a key this cluster trusts")
		}
		if c.Err != "" {
			p.hang(m.st.errorText.Render(fmt.Sprintf("✗ %s %s: %s", locationNoun(c.Provider), c.Location, c.Err)), 2)
		}
	}
	m.viewRegions(p)
	if m.homeNote != "" {
		p.blank()
		p.hang(m.st.warn.Render("! "+m.homeNote), 2)
	}
	acts := []keyHelp{{"n", "new cluster"}, {"c", "continue"}, {"i", "inspect"}, {"d", "destroy"}, {"r", "refresh"}}
	if m.lastRun != nil {
		acts = append(acts, keyHelp{"l", "last run"})
	}
	p.pinParts(m.actionParts(append(acts, keyHelp{"q", "quit"})))
}

package tui

import (
	"context"
	"fmt"
	"strings"

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

func (m *Model) homeKey(s string) tea.Cmd {
	switch s {
	case "q":
		return tea.Quit
	case "esc":
		return nil // Esc goes back; home is the first screen, so it stays
	case "up", "k":
		m.homeSel = clamp(m.homeSel-1, 0, len(m.clusters)-1)
	case "down", "j":
		m.homeSel = clamp(m.homeSel+1, 0, len(m.clusters)-1)
	case "n":
		return m.openCreate(true)
	case "r":
		return m.refresh()
	case "l":
		if m.lastRun == nil {
			m.homeNote = "no run yet in this session: the last run's log opens here after one"
			return nil
		}
		m.run, m.screen, m.runBack, m.runReopened = m.lastRun, screenRun, screenHome, true
		return nil
	case "pgup", "pgdown", "home", "end":
		m.scrollKey(s)
	case "c", "enter", "i", "d", "u", "K":
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
		t := Target{Provider: c.Provider, Name: c.Name, Location: c.Location}
		if isDayTwoKey(s) {
			return m.dayTwoKeyPress(s, t, c.KeyIDs)
		}
		switch s {
		case "c":
			// Continue goes through create: the engine finds the platform
			// installed and asks, so the user sees what continuing means.
			return m.startOn(c.Provider, opCreate, c.Name, c.Location, func(ctx context.Context, b Backend, br *Bridge) error {
				return b.Create(ctx, CreateRequest{Provider: c.Provider, Name: c.Name, Location: c.Location}, br, br)
			})
		case "d":
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

package tui

import (
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/lipgloss/v2"
)

// keyHelp is an action offered in a screen's body ([s] start).
type keyHelp struct{ key, desc string }

// binding is the key binding of a help entry: the keys it names ("↑/↓"
// is up and down, "enter/y" is enter and y) bound with their help.
func (k keyHelp) binding() key.Binding {
	var keys []string
	names := strings.Split(k.key, "/")
	if k.key == "/" {
		names = []string{"/"} // the filter key itself
	}
	for _, n := range names {
		if name, ok := keyNames[n]; ok {
			n = name
		}
		keys = append(keys, n)
	}
	return key.NewBinding(key.WithKeys(keys...), key.WithHelp(k.key, k.desc))
}

// keyNames are the key names (tea.KeyPressMsg.String) of the symbols
// help shows.
var keyNames = map[string]string{"↑": "up", "↓": "down", "←": "left", "→": "right", "pgdn": "pgdown"}

func bindings(ks []keyHelp) []key.Binding {
	out := make([]key.Binding, len(ks))
	for i, k := range ks {
		out[i] = k.binding()
	}
	return out
}

// helpModel renders key help lines in the wizard's styles.
func (m *Model) helpModel(width int) help.Model {
	h := help.New()
	h.ShortSeparator = "  "
	h.Styles.ShortKey, h.Styles.ShortDesc = m.st.key, m.st.faint
	h.Styles.FullKey, h.Styles.FullDesc = m.st.key, m.st.faint
	h.Styles.ShortSeparator, h.Styles.FullSeparator = lipgloss.NewStyle(), lipgloss.NewStyle()
	h.SetWidth(width)
	return h
}

// helpLines renders bindings as help lines of at most width columns,
// wrapped between bindings (the short help view cuts; the footer wraps).
func (m *Model) helpLines(bs []key.Binding, width int) []string {
	h := m.helpModel(0)
	var out []string
	var line []key.Binding
	w := 0
	for _, b := range bs {
		bw := lipgloss.Width(h.ShortHelpView([]key.Binding{b}))
		if len(line) > 0 && w+2+bw > width {
			out, line, w = append(out, h.ShortHelpView(line)), nil, 0
		}
		if len(line) > 0 {
			w += 2
		}
		line, w = append(line, b), w+bw
	}
	if len(line) > 0 {
		out = append(out, h.ShortHelpView(line))
	}
	return out
}

// keys lists the keys of the current screen: the footer shows them (with
// ? help), wrapped; ? lists them.
func (m *Model) keys(short bool) []key.Binding {
	var ks []keyHelp
	switch m.screen {
	case screenHome:
		ks = helpOf(m.homeBindings())
	case screenCreate:
		ks = helpOf(createBindings())
	case screenContinue:
		ks = helpOf([]key.Binding{continueKeys.Choose, continueKeys.Confirm, continueKeys.Cancel})
	case screenDestroy:
		ks = helpOf([]key.Binding{destroyKeys.Confirm, destroyKeys.Cancel})
	case screenDiscover:
		ks = helpOf(m.discoverBindings())
	case screenRun:
		ks = helpOf(m.runBindings())
	case screenFinal:
		ks = helpOf(finalBindings())
	case screenUpgrade, screenUpgradePlan, screenRotate, screenRotateConfirm:
		ks = m.dayTwoKeys()
	case screenProjectNew:
		ks = helpOf(newProjectKeys.bindings())
	case screenProjectDelete:
		ks = helpOf(deleteProjectKeys.bindings())
	case screenInspect, screenProject:
		ks = helpOf(m.inspectBindings())
		if fd := m.feed(); fd != nil && m.screen == screenProject && (m.insp.ask == nil) {
			switch fd.pane {
			case paneLog:
				ks = append(ks, keyHelp{"tab", "page"}, keyHelp{"end", "follow the log"})
			case paneEvents:
				ks = append(ks, keyHelp{"tab", "the log"})
			default:
				ks = append(ks, keyHelp{"tab", "scroll events/log"})
			}
		}
	}
	if short {
		ks = append(ks, keyHelp{"?", "help"})
	}
	return bindings(ks)
}

// keyName is a key's name matched against bindings with key.Matches (a
// key the caller already turned into its name, or the mouse wheel's
// scroll given as the page keys).
type keyName string

func (k keyName) String() string { return string(k) }

// scrollKeys are the scroll vocabulary of every screen that scrolls: a
// screen's body (Model.scrollKey) and a viewport (scrollViewport).
// Space pages a screen's body only: in a viewport's screen it may be a
// form's toggle.
var scrollKeys = struct{ Up, Down, PageUp, PageDown, Space, Top, Bottom key.Binding }{
	Up:       key.NewBinding(key.WithKeys("up", "k")),
	Down:     key.NewBinding(key.WithKeys("down", "j")),
	PageUp:   key.NewBinding(key.WithKeys("pgup")),
	PageDown: key.NewBinding(key.WithKeys("pgdown")),
	Space:    key.NewBinding(key.WithKeys("space")),
	Top:      key.NewBinding(key.WithKeys("home", "g")),
	Bottom:   key.NewBinding(key.WithKeys("end", "G")),
}

// formKeys are what the forms whose arrows move between fields share:
// the page keys scroll the screen, and q leaves when no text field takes
// the key.
var formKeys = struct{ Page, Leave key.Binding }{
	Page:  key.NewBinding(key.WithKeys("pgup", "pgdown")),
	Leave: key.NewBinding(key.WithKeys("q")),
}

package tui

type keyHelp struct{ key, desc string }

// keys lists the keys of the current screen: the footer shows the short
// list, ? the full one.
func (m *Model) keys(short bool) []keyHelp {
	var ks []keyHelp
	switch m.screen {
	case screenHome:
		ks = []keyHelp{{"n", "new"}, {"c", "continue"}, {"i", "inspect"}, {"d", "destroy"}, {"↑/↓", "select"}, {"r", "refresh"}, {"q", "quit"}}
	case screenCreate:
		ks = []keyHelp{{"tab/↓", "next"}, {"↑", "previous"}, {"←/→", "context"}, {"enter", "next/create"}, {"esc", "back"}}
	case screenContinue:
		ks = []keyHelp{{"←/→/tab", "choose"}, {"enter", "confirm"}, {"esc", "cancel (nothing changes)"}}
	case screenDestroy:
		ks = []keyHelp{{"enter", "confirm typed name"}, {"esc", "cancel (nothing changes)"}}
	case screenDiscover, screenRun:
		ks = []keyHelp{{"↑/↓", "scroll"}, {"pgup/pgdn", "page"}, {"tab", "resources/log"}, {"end", "follow"}, {"ctrl+c", "cancel"}}
		if m.run != nil && !m.run.running {
			ks = append(ks, keyHelp{"esc/q", "back"})
		}
	case screenFinal:
		ks = []keyHelp{{"enter/esc", "back to clusters"}, {"ctrl+c", "quit"}}
	case screenInspect, screenProject:
		switch {
		case m.insp != nil && m.insp.ask != nil && m.insp.ask.op == "restack":
			ks = []keyHelp{{"←/→", "stack"}, {"enter/y", "restack"}, {"esc/n", "cancel"}}
		case m.insp != nil && m.insp.ask != nil:
			ks = []keyHelp{{"enter/y", "confirm"}, {"esc/n", "cancel"}}
		case m.screen == screenInspect:
			ks = []keyHelp{{"↑/↓", "select"}, {"enter", "project"}, {"s", "start"}, {"p", "suspend"}, {"r", "restack"}, {"esc/q", "back"}}
		default:
			ks = []keyHelp{{"s", "start"}, {"p", "suspend"}, {"r", "restack"}, {"esc/q", "back"}}
		}
	}
	if short {
		if len(ks) > 5 {
			ks = ks[:5]
		}
		ks = append(ks, keyHelp{"?", "help"})
	}
	return ks
}

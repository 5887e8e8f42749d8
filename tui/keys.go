package tui

type keyHelp struct{ key, desc string }

// keys lists the keys of the current screen: the footer shows them (with
// ? help), wrapped; ? lists them.
func (m *Model) keys(short bool) []keyHelp {
	var ks []keyHelp
	switch m.screen {
	case screenHome:
		ks = append([]keyHelp{{"n", "new"}, {"c", "continue"}, {"i", "inspect"}, {"d", "destroy"}}, dayTwoActions()...)
		ks = append(ks, keyHelp{"r", "refresh"})
		if m.lastRun != nil {
			ks = append(ks, keyHelp{"l", "last run"})
		}
		ks = append(ks, keyHelp{"↑/↓", "select"}, keyHelp{"q", "quit"})
	case screenCreate:
		ks = []keyHelp{{"tab/↓", "next"}, {"↑", "previous"}, {"←/→", "context"}, {"enter", "next/create"}, {"esc", "back"}}
	case screenContinue:
		ks = []keyHelp{{"←/→/tab", "choose"}, {"enter", "confirm"}, {"esc", "cancel (nothing changes)"}}
	case screenDestroy:
		ks = []keyHelp{{"enter", "confirm typed name"}, {"esc", "cancel (nothing changes)"}}
	case screenDiscover, screenRun:
		if m.run != nil && !m.run.running {
			ks = []keyHelp{{"esc", "back"}, {"↑/↓", "select/scroll"}, {"tab", "resources/log"}, {"enter", "in full"}, {"pgup/pgdn", "page"}}
		} else {
			ks = []keyHelp{{"↑/↓", "select/scroll"}, {"tab", "resources/log"}, {"enter", "in full"}, {"end", "follow"}, {"ctrl+c", "cancel"}}
		}
	case screenFinal:
		ks = []keyHelp{{"enter/esc", "back to clusters"}, {"l", "review the run"}, {"ctrl+c", "quit"}}
	case screenUpgrade, screenUpgradePlan, screenRotate, screenRotateConfirm:
		ks = m.dayTwoKeys()
	case screenInspect, screenProject:
		switch {
		case m.insp != nil && m.insp.ask != nil && m.insp.ask.op == "restack":
			ks = []keyHelp{{"←/→", "stack"}, {"enter/y", "restack"}, {"esc/n", "cancel"}}
		case m.insp != nil && m.insp.ask != nil:
			ks = []keyHelp{{"enter/y", "confirm"}, {"esc/n", "cancel"}}
		case m.insp != nil && m.insp.filtering:
			ks = []keyHelp{{"type", "filter projects"}, {"enter", "keep filter"}, {"esc", "clear filter"}}
		case m.screen == screenInspect && m.opts.ReadOnly:
			ks = []keyHelp{{"esc", "back"}, {"↑/↓", "select"}, {"/", "filter"}, {"enter", "project"}, {"read-only", "no actions"}}
		case m.screen == screenInspect:
			ks = append([]keyHelp{{"esc", "back"}, {"↑/↓", "select"}, {"/", "filter"}, {"enter", "project"}, {"s", "start"}, {"p", "suspend"}, {"r", "restack"}}, dayTwoActions()...)
		case m.opts.ReadOnly:
			ks = []keyHelp{{"esc", "back"}, {"↑/↓", "scroll"}, {"read-only", "no actions"}}
		default:
			ks = append([]keyHelp{{"esc", "back"}, {"s", "start"}, {"p", "suspend"}, {"r", "restack"}}, dayTwoActions()...)
			ks = append(ks, keyHelp{"↑/↓", "scroll"})
		}
	}
	if short {
		ks = append(ks, keyHelp{"?", "help"})
	}
	return ks
}

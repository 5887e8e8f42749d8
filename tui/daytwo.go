package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/input"
)

// dayTwoMsg is a message of the upgrade and rotate key screens; the model
// hands it to the screens as it arrives.
type dayTwoMsg interface{ applyTo(m *Model) tea.Cmd }

// dayTwo is the state of the upgrade and rotate key screens.
type dayTwo struct {
	up  *upgradeState
	rot *rotateState
}

type (
	// upgradeAsk is the engine asking to apply an upgrade plan.
	upgradeAsk struct {
		q     engine.UpgradeQuestion
		reply chan<- bool
	}
	// rotateAsk is the engine asking before it rotates the key.
	rotateAsk struct {
		q     engine.RotateQuestion
		reply chan<- bool
	}
)

// ConfirmUpgrade implements engine.UpgradeConfirmer: the engine goroutine
// blocks until the user answers on the plan screen.
func (b *Bridge) ConfirmUpgrade(ctx context.Context, q engine.UpgradeQuestion) (bool, error) {
	return b.ask(ctx, func(reply chan<- bool) tea.Msg { return upgradeAsk{q: q, reply: reply} })
}

// ConfirmRotate implements engine.RotateConfirmer: the user must type the
// cluster name.
func (b *Bridge) ConfirmRotate(ctx context.Context, q engine.RotateQuestion) (bool, error) {
	return b.ask(ctx, func(reply chan<- bool) tea.Msg { return rotateAsk{q: q, reply: reply} })
}

// dayTwoScreen reports whether s is one of the upgrade and rotate key
// screens.
func dayTwoScreen(s screen) bool {
	return s == screenUpgrade || s == screenUpgradePlan || s == screenRotate || s == screenRotateConfirm
}

// dayTwoKey handles a key on the upgrade and rotate key screens.
func (m *Model) dayTwoKey(k tea.KeyPressMsg) tea.Cmd {
	switch m.screen {
	case screenUpgrade:
		return m.upgradeFormKey(k)
	case screenUpgradePlan:
		return m.upgradePlanKey(k)
	case screenRotate:
		return m.rotateFormKey(k)
	case screenRotateConfirm:
		return m.rotateConfirmKey(k)
	}
	return nil
}

// dayTwoInput hands a non-key message (paste) to the focused text input
// of the upgrade and rotate key screens.
func (m *Model) dayTwoInput(msg tea.Msg) tea.Cmd {
	var cmd tea.Cmd
	switch {
	case m.screen == screenUpgrade && m.day2.up != nil && m.day2.up.focus == upFieldConfig:
		m.day2.up.configIn, cmd = m.day2.up.configIn.Update(msg)
		return tea.Batch(cmd, m.checkUpgradeConfig())
	case m.screen == screenUpgrade && m.day2.up != nil && m.day2.up.input(m.day2.up.focus) != nil:
		return m.updateUpgradeAWS(msg)
	case m.screen == screenRotate && m.day2.rot != nil && m.day2.rot.focus == rotFieldKeepOld:
		m.day2.rot.keepIn, cmd = m.day2.rot.keepIn.Update(msg)
		m.checkKeepOld()
	case m.screen == screenRotateConfirm && m.day2.rot != nil:
		m.day2.rot.nameIn, cmd = m.day2.rot.nameIn.Update(msg)
	}
	return cmd
}

// answerDayTwo answers the question the upgrade plan or rotate key
// confirmation screen shows (Esc and Ctrl-C answer no: nothing changes).
func (m *Model) answerDayTwo(ok bool) {
	// The question on screen is the one answered (a question left behind
	// by a run that ended meanwhile is never answered by mistake).
	switch {
	case m.screen == screenUpgradePlan && m.day2.up != nil && m.day2.up.ask != nil:
		m.day2.up.ask.reply <- ok
		m.day2.up.ask = nil
	case m.screen == screenRotateConfirm && m.day2.rot != nil && m.day2.rot.ask != nil:
		m.day2.rot.ask.reply <- ok
		m.day2.rot.ask = nil
		m.day2.rot.nameIn.Blur()
	}
	if !ok && m.run != nil {
		m.run.userCancel = true
	}
	m.screen = screenRun
}

// refuseIfRunEnded answers no to a question asked by a run that has ended
// (there is nothing to show it on) and reports whether it did.
func (m *Model) refuseIfRunEnded(reply chan<- bool) bool {
	if m.run != nil && m.run.running {
		return false
	}
	reply <- false
	return true
}

// dayTwoAsking reports whether an upgrade or rotate key question is on
// screen.
func (m *Model) dayTwoAsking() bool {
	return m.screen == screenUpgradePlan && m.day2.up != nil && m.day2.up.ask != nil ||
		m.screen == screenRotateConfirm && m.day2.rot != nil && m.day2.rot.ask != nil
}

// backFromDayTwo leaves the run view of an upgrade or rotate key: bad
// input (a refused plan, say) goes back to its screen as it was filled
// in, with the engine's message; otherwise back to the inspect screen it
// was opened from, or home.
func (m *Model) backFromDayTwo(r *runState) tea.Cmd {
	if r.failed() == failure.Input && !r.userCancel {
		m.run = nil
		switch {
		case r.kind == opUpgrade && m.day2.up != nil:
			m.day2.up.err = r.result.Message
			m.screen = screenUpgrade
			// The focus goes to the field the refusal names (the result's
			// Input, never its words).
			for _, f := range []struct {
				in    engine.Input
				field int
			}{{engine.InputDeleteProjects, upFieldDelete}, {input.KubernetesVersion, upFieldVersion}, {engine.InputNodes, upFieldNodes}, {engine.InputInstanceType, upFieldType}} {
				if engine.InputOf(r.result.Err) == f.in {
					return m.focusUpgrade(f.field)
				}
			}
			return m.focusUpgrade(m.day2.up.focus)
		case r.kind == opRotate && m.day2.rot != nil:
			m.day2.rot.err = r.result.Message
			m.screen = screenRotate
			return m.focusRotate(m.day2.rot.focus)
		}
	}
	if m.insp != nil {
		return m.returnToInspect()
	}
	return m.goHome()
}

// dayTwoKeys are the key bindings of the upgrade and rotate key screens,
// for the footer and the help.
func (m *Model) dayTwoKeys() []keyHelp {
	var bs []key.Binding
	switch m.screen {
	case screenUpgrade:
		bs = upgradeFormKeys.bindings()
	case screenUpgradePlan:
		bs = upgradePlanKeys.bindings()
	case screenRotate:
		bs = rotateFormKeys.bindings()
		if m.day2.rot != nil && m.day2.rot.finishing() {
			bs = []key.Binding{rotateFormKeys.Enter, rotateFormKeys.Back} // no field to move to
		}
	case screenRotateConfirm:
		bs = rotateConfirmKeys.bindings()
	}
	return helpOf(bs)
}

// dayTwoActions are the keys of the cluster actions upgrade and rotate
// key, as home and the inspect screens offer them.
func dayTwoActions() []keyHelp {
	return helpOf([]key.Binding{clusterKeys.Upgrade, clusterKeys.Rotate})
}

// clusterKeys open the upgrade and rotate key screens from home and the
// inspect screens.
var clusterKeys = struct{ Upgrade, Rotate key.Binding }{
	Upgrade: key.NewBinding(key.WithKeys("u"), key.WithHelp("u", "upgrade")),
	Rotate:  key.NewBinding(key.WithKeys("K"), key.WithHelp("K", "rotate key")),
}

// helpOf turns bindings into the footer's key hints.
func helpOf(bs []key.Binding) []keyHelp {
	out := make([]keyHelp, 0, len(bs))
	for _, b := range bs {
		if b.Enabled() {
			h := b.Help()
			out = append(out, keyHelp{h.Key, h.Desc})
		}
	}
	return out
}

// dayTwoKeyPress handles u and K on home and the inspect screens: open the
// upgrade or rotate key screen of cluster t. keyIDs are the keys the
// cluster trusts as last read (two: a rotation is under way).
func (m *Model) dayTwoKeyPress(s string, t engine.ClusterRef, keyIDs []string) tea.Cmd {
	switch {
	case bound(clusterKeys.Upgrade, s):
		return m.openUpgrade(t)
	case bound(clusterKeys.Rotate, s):
		return m.openRotate(t, keyIDs)
	}
	return nil
}

// isDayTwoKey reports whether the key s opens the upgrade or rotate key
// screen.
func isDayTwoKey(s string) bool { return bound(clusterKeys.Upgrade, s) || bound(clusterKeys.Rotate, s) }

// bound reports whether the key s is one of b's keys.
func bound(b key.Binding, s string) bool { return b.Enabled() && slices.Contains(b.Keys(), s) }

// viewDayTwo renders the upgrade and rotate key screens and returns the
// title.
func (m *Model) viewDayTwo(p *page, rows int) string {
	switch {
	case m.screen == screenUpgrade && m.day2.up != nil:
		m.viewUpgrade(p)
		return "upgrade " + m.day2.up.target.Name
	case m.screen == screenUpgradePlan && m.day2.up != nil && m.day2.up.ask != nil:
		m.viewUpgradePlan(p, rows)
		return "upgrade plan " + m.day2.up.ask.q.Name
	case m.screen == screenRotate && m.day2.rot != nil:
		m.viewRotate(p)
		return "rotate key " + m.day2.rot.target.Name
	case m.screen == screenRotateConfirm && m.day2.rot != nil && m.day2.rot.ask != nil:
		m.viewRotateConfirm(p)
		return "rotate key " + m.day2.rot.ask.q.Name
	}
	return ""
}

// planLogLine is a plan event as a line of the run's log: + create, ~
// update (with its fields), - delete, then the engine's words.
func planLogLine(ev event.PlanEvent) string {
	mark := map[string]string{"create": "+", "update": "~", "delete": "-"}[ev.Action]
	ref := ev.Name
	if ev.Namespace != "" {
		ref = ev.Namespace + "/" + ev.Name
	}
	line := fmt.Sprintf("plan: %s %s %s %s", mark, ev.Action, ev.Kind, ref)
	if len(ev.Fields) > 0 {
		line += " (" + strings.Join(ev.Fields, ", ") + ")"
	}
	if ev.Message != "" {
		line += ": " + ev.Message
	}
	return line
}

package tui

import (
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"github.com/kilnctl/kiln/engine"
)

// The rotate key screen's fields, in focus order.
const (
	rotFieldKeepOld = iota
	rotFieldButton
	rotFields
)

// rotateState is the rotate key screen (what happens, Keep old key) and
// its confirmation (the engine's question, answered by typing the
// cluster name).
type rotateState struct {
	target engine.ClusterRef
	back   screen
	// keyIDs are the keys the cluster trusted when the screen opened;
	// two mean a rotation is under way, which the screen offers to
	// finish.
	keyIDs  []string
	focus   int
	keepIn  textinput.Model
	keepOld time.Duration
	keepErr string
	// err is the engine's message of the last run refused as bad input.
	err string

	ask     *rotateAsk
	nameIn  textinput.Model
	nameErr string
}

// finishing reports whether the screen finishes a rotation under way.
func (r *rotateState) finishing() bool { return len(r.keyIDs) > 1 }

type rotateFormKeyMap struct{ Next, Enter, Back key.Binding }

func (k rotateFormKeyMap) bindings() []key.Binding { return []key.Binding{k.Next, k.Enter, k.Back} }

var rotateFormKeys = rotateFormKeyMap{
	Next:  key.NewBinding(key.WithKeys("tab", "shift+tab", "down", "up"), key.WithHelp("tab/↑/↓", "field/button")),
	Enter: key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "next/continue")),
	Back:  key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back (nothing changes)")),
}

type rotateConfirmKeyMap struct{ Enter, Cancel, Scroll key.Binding }

func (k rotateConfirmKeyMap) bindings() []key.Binding {
	return []key.Binding{k.Enter, k.Cancel, k.Scroll}
}

var rotateConfirmKeys = rotateConfirmKeyMap{
	Enter:  key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "confirm typed name")),
	Cancel: key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel (nothing changes)")),
	Scroll: key.NewBinding(key.WithKeys("pgup", "pgdown"), key.WithHelp("pgup/pgdn", "scroll")),
}

// openRotate opens the rotate key screen of cluster t; keyIDs are the
// keys it trusts as last read.
func (m *Model) openRotate(t engine.ClusterRef, keyIDs []string) tea.Cmd {
	r := &rotateState{target: t, back: m.screen, keyIDs: append([]string(nil), keyIDs...)}
	r.keepIn = m.newInput("(optional) e.g. 24h or 30m")
	r.nameIn = m.newInput("")
	m.day2.rot = r
	m.fitDayTwo()
	m.screen, m.help = screenRotate, false
	if r.finishing() {
		return m.focusRotate(rotFieldButton) // nothing to fill in
	}
	return m.focusRotate(rotFieldKeepOld)
}

func (m *Model) focusRotate(f int) tea.Cmd {
	r := m.day2.rot
	r.focus = (f + rotFields) % rotFields
	if r.finishing() {
		r.focus = rotFieldButton
	}
	if r.focus == rotFieldKeepOld {
		return r.keepIn.Focus()
	}
	r.keepIn.Blur()
	return nil
}

// checkKeepOld parses the Keep old key field as it is typed.
func (m *Model) checkKeepOld() {
	r := m.day2.rot
	r.keepOld, r.keepErr = 0, ""
	v := strings.TrimSpace(r.keepIn.Value())
	if v == "" {
		return
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		r.keepErr = fmt.Sprintf("%q is not a duration: write it like 24h, 90m or 1h30m", v)
	case d <= 0:
		r.keepErr = "must be more than 0; leave it empty to remove the old key at once"
	default:
		r.keepOld = d
	}
}

func (m *Model) rotateFormKey(k tea.KeyPressMsg) tea.Cmd {
	r := m.day2.rot
	switch {
	case key.Matches(k, rotateFormKeys.Back):
		r.keepIn.Blur()
		return m.leaveDayTwo(r.back)
	case key.Matches(k, rotateFormKeys.Next):
		return m.focusRotate(r.focus + 1)
	case key.Matches(k, rotateFormKeys.Enter):
		if r.focus == rotFieldButton {
			return m.submitRotate()
		}
		return m.focusRotate(r.focus + 1)
	case key.Matches(k, formKeys.Page):
		m.scrollKey(k.String())
		return nil
	case r.focus == rotFieldKeepOld:
		var cmd tea.Cmd
		r.keepIn, cmd = r.keepIn.Update(k)
		m.checkKeepOld()
		return cmd
	case key.Matches(k, formKeys.Leave):
		return m.leaveDayTwo(r.back)
	}
	return nil
}

// submitRotate starts the rotation: the engine reads the cluster's keys
// and asks on the confirmation screen before it changes anything.
func (m *Model) submitRotate() tea.Cmd {
	r := m.day2.rot
	if r.keepErr != "" {
		return m.focusRotate(rotFieldKeepOld)
	}
	r.err = ""
	t := r.target
	req := engine.RotateKeyRequest{KeepOld: r.keepOld, Finish: r.finishing()}
	if req.Finish {
		req.KeepOld = 0
	}
	return m.startOn(t.Provider, opRotate, t.Name, t.Location, func(o Ops) Op {
		return o.RotateKey(t, req)
	})
}

func (msg rotateAsk) applyTo(m *Model) tea.Cmd {
	if m.refuseIfRunEnded(msg.reply) {
		return nil
	}
	r := m.day2.rot
	if r == nil {
		r = &rotateState{target: engine.ClusterRef{Provider: msg.q.Provider, Name: msg.q.Name, Location: msg.q.Location}, back: screenHome}
		r.nameIn = m.newInput("")
		m.day2.rot = r
		m.fitDayTwo()
	}
	r.ask, r.nameErr = &msg, ""
	r.nameIn.Reset()
	m.screen = screenRotateConfirm
	return r.nameIn.Focus()
}

func (m *Model) rotateConfirmKey(k tea.KeyPressMsg) tea.Cmd {
	r := m.day2.rot
	switch {
	case key.Matches(k, rotateConfirmKeys.Cancel):
		m.answerDayTwo(false)
		return nil
	case key.Matches(k, rotateConfirmKeys.Enter):
		if r.ask != nil && r.nameIn.Value() != r.ask.q.Name {
			r.nameErr = "type the cluster name exactly to confirm, or Esc to cancel"
			return nil
		}
		m.answerDayTwo(true)
		return nil
	case key.Matches(k, rotateConfirmKeys.Scroll):
		m.scrollKey(k.String())
		return nil
	}
	var cmd tea.Cmd
	r.nameIn, cmd = r.nameIn.Update(k)
	return cmd
}

// rotateSteps says what a rotation does, step by step.
func rotateSteps(keepOld time.Duration) []string {
	last := "3. The old key is removed from kiln-auth and from the token dir: tokens signed with it (copies of the token dir elsewhere) stop working."
	if keepOld > 0 {
		last = fmt.Sprintf("3. The old key stays trusted for %s more (for consumers that cache tokens); once that time is up it goes with the next upgrade, continue or rotate key, or earlier with Finish rotation (K). Tokens signed with it stop working then.", short(keepOld))
	}
	return []string{
		"1. A new key is generated and every tenant token is signed again with it, staged next to the token dir.",
		"2. kiln-auth is made to trust the old and the new key (read back); then the token dir is swapped to the new key and tokens as one unit.",
		last,
	}
}

func (m *Model) viewRotate(p *page) {
	r := m.day2.rot
	t := r.target
	if r.finishing() {
		p.line(m.st.header.Render("Finish the key rotation of kiln cluster "+t.Name) + fmt.Sprintf(" · %s %s", t.Provider, t.Location))
		p.blank()
		p.line(fmt.Sprintf("A rotation is under way: cluster %s trusts %d keys, the key in use and the old one kept trusted.", t.Name, len(r.keyIDs)))
		p.hang("  Trusted keys    "+strings.Join(shortKeys(r.keyIDs), ", "), 18)
		p.blank()
		p.line("Finishing removes the old key from kiln-auth now (read back) and from the token dir: tokens signed with it stop working. The key in use and its tokens stay.")
	} else {
		p.line(m.st.header.Render("Rotate the signing key of kiln cluster "+t.Name) + fmt.Sprintf(" · %s %s", t.Provider, t.Location))
		p.blank()
		if len(r.keyIDs) == 1 {
			p.hang("  Trusted key     "+shortKeys(r.keyIDs)[0], 18)
			p.blank()
		}
		p.line(m.st.header.Render("What happens"))
		for _, s := range rotateSteps(r.keepOld) {
			p.hang("  "+s, 5)
		}
		p.line("Interrupted at any point, rotate key run again finishes the rotation under way; it never starts a second one.")
		p.blank()
		p.input(m.dayTwoLabel("Keep old key", r.focus == rotFieldKeepOld), r.keepIn)
		switch {
		case r.keepErr != "":
			m.dayTwoNote(p, m.st.errorText, "✗ "+r.keepErr)
		case r.keepOld > 0:
			m.dayTwoNote(p, m.st.ok, fmt.Sprintf("✓ both keys stay trusted for %s after the swap", short(r.keepOld)))
		default:
			m.dayTwoNote(p, m.st.faint, "empty: the old key is removed at once")
		}
	}
	label := "[ Continue ]"
	if r.finishing() {
		label = "[ Finish rotation ]"
	}
	btn := m.button(label, r.focus == rotFieldButton)
	p.pinButtons(strings.Repeat(" ", 18), btn)
	p.pin(m.st.faint.Render("kiln reads the cluster's keys first, then asks: you confirm by typing the cluster name."))
	if r.err != "" {
		p.pin(m.st.errorText.Render("✗ the last run was refused: " + r.err))
	}
}

// viewRotateConfirm is the engine's question, worded for what this run
// does (start, resume or retire), answered by typing the cluster name.
func (m *Model) viewRotateConfirm(p *page) {
	q := m.day2.rot.ask.q
	switch q.Step {
	case engine.RotateResume:
		p.line(m.st.warn.Render("Finish the key rotation of cluster " + q.Name))
		p.blank()
		p.add("A rotation of %s's key is under way (replacing %s, in %s %s): this finishes it. The token dir %s is swapped to the new key and tokens as one unit; never a second rotation.",
			q.Name, q.OldKeyID, q.Provider, q.Location, q.TokenDir)
		if q.KeepOld > 0 {
			p.add("The old key then stays trusted for %s more; tokens signed with it stop working after that.", short(q.KeepOld))
		} else {
			p.line("The old key is then removed: tokens signed with it stop working.")
		}
	case engine.RotateRetire:
		p.line(m.st.warn.Render("Remove the old key of cluster " + q.Name))
		p.blank()
		p.add("This removes the old key %s of kiln cluster %s (%s %s) from kiln-auth: tokens signed with it stop working. The key in use, %s, and the tokens of %s stay.",
			q.OldKeyID, q.Name, q.Provider, q.Location, q.KeyID, q.TokenDir)
		if q.KeepOld > 0 {
			p.add("It stays trusted for %s more first.", short(q.KeepOld))
		}
	default:
		p.line(m.st.warn.Render("Rotate the signing key of cluster " + q.Name))
		p.blank()
		p.add("This rotates the signing key of kiln cluster %s (%s %s), now %s, held by the token dir %s.", q.Name, q.Provider, q.Location, q.KeyID, q.TokenDir)
		for _, s := range rotateSteps(q.KeepOld) {
			p.hang("  "+s, 5)
		}
	}
	p.blank()
	p.line("Type the cluster name to confirm:")
	p.input("  > ", m.day2.rot.nameIn)
	if e := m.day2.rot.nameErr; e != "" {
		p.hang(m.st.errorText.Render("✗ "+e), 2)
	}
	p.blank()
	p.line(m.st.faint.Render("Esc cancels; nothing is changed."))
}

// short writes a duration without its zero tail: 24h, not 24h0m0s.
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

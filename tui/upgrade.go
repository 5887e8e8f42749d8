package tui

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/internal/human"
)

// The upgrade screen's fields, in focus order.
const (
	upFieldConfig = iota
	upFieldRestack
	upFieldDelete
	upFieldButton
	upFields
)

// upgradeState is the upgrade screen (config file and options) and its
// plan screen (the engine's question).
type upgradeState struct {
	target Target
	// back is the screen Esc returns to (home, inspect, project).
	back           screen
	focus          int
	configIn       textinput.Model
	cfgCheck       cfgCheck
	restack        bool
	deleteProjects bool
	// err is the engine's message of the last refused run (bad input),
	// said again where it is fixed.
	err string
	// formErr says why Plan did not start.
	formErr string

	ask *upgradeAsk
	// planFocus is the plan screen's button: 0 apply, 1 cancel.
	planFocus int
	// plan is the scrollable diff of the plan screen.
	plan viewport.Model
}

// upgradeCfgMsg is the check of the upgrade screen's config file field.
type upgradeCfgMsg struct {
	path, name string
	problems   []string
}

type upgradeFormKeyMap struct{ Next, Prev, Toggle, Enter, Back key.Binding }

func (k upgradeFormKeyMap) bindings() []key.Binding {
	return []key.Binding{k.Next, k.Prev, k.Toggle, k.Enter, k.Back}
}

var upgradeFormKeys = upgradeFormKeyMap{
	Next:   key.NewBinding(key.WithKeys("tab", "down"), key.WithHelp("tab/↓", "next")),
	Prev:   key.NewBinding(key.WithKeys("shift+tab", "up"), key.WithHelp("↑", "previous")),
	Toggle: key.NewBinding(key.WithKeys("space"), key.WithHelp("space", "toggle option")),
	Enter:  key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "next/plan")),
	Back:   key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back (nothing changes)")),
}

type upgradePlanKeyMap struct{ Scroll, Page, Ends, Choose, Enter, Cancel key.Binding }

func (k upgradePlanKeyMap) bindings() []key.Binding {
	return []key.Binding{k.Scroll, k.Page, k.Ends, k.Choose, k.Enter, k.Cancel}
}

var upgradePlanKeys = upgradePlanKeyMap{
	Scroll: key.NewBinding(key.WithKeys("up", "down", "k", "j"), key.WithHelp("↑/↓", "scroll the plan")),
	Page:   key.NewBinding(key.WithKeys("pgup", "pgdown", "space"), key.WithHelp("pgup/pgdn", "page")),
	Ends:   key.NewBinding(key.WithKeys("home", "end", "g", "G"), key.WithHelp("home/end", "top/bottom")),
	Choose: key.NewBinding(key.WithKeys("left", "right", "tab", "shift+tab", "h", "l"), key.WithHelp("←/→/tab", "choose")),
	Enter:  key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "confirm")),
	Cancel: key.NewBinding(key.WithKeys("esc", "q", "n"), key.WithHelp("esc", "cancel (nothing changes)")),
}

// openUpgrade opens the upgrade screen of cluster t, empty.
func (m *Model) openUpgrade(t Target) tea.Cmd {
	u := &upgradeState{target: t, back: m.screen, planFocus: 1}
	u.configIn = m.newInput("(optional) path to a ClusterConfig file")
	u.configIn.SetWidth(m.dayTwoInputWidth())
	m.day2.up = u
	m.screen, m.help = screenUpgrade, false
	return m.focusUpgrade(upFieldConfig)
}

// dayTwoInputWidth is the width of the upgrade and rotate key screens'
// text inputs: the label column of 18, the rest for the value.
func (m *Model) dayTwoInputWidth() int { return clamp(m.width-19, 8, 60) }

// fitDayTwo sizes the text inputs to the terminal.
func (m *Model) fitDayTwo() {
	if u := m.day2.up; u != nil {
		u.configIn.SetWidth(m.dayTwoInputWidth())
	}
	if r := m.day2.rot; r != nil {
		r.keepIn.SetWidth(m.dayTwoInputWidth())
		r.nameIn.SetWidth(clamp(m.width-5, 8, 60))
	}
}

func (m *Model) focusUpgrade(f int) tea.Cmd {
	u := m.day2.up
	u.focus = (f + upFields) % upFields
	if u.focus == upFieldConfig {
		return u.configIn.Focus()
	}
	u.configIn.Blur()
	return nil
}

// checkUpgradeConfig checks the config file field when it changed, off
// the render loop, with the engine's decoder (as the create form does).
func (m *Model) checkUpgradeConfig() tea.Cmd {
	u := m.day2.up
	path, name := strings.TrimSpace(u.configIn.Value()), u.target.Name
	if path == u.cfgCheck.path {
		return nil
	}
	u.cfgCheck = cfgCheck{path: path, name: name}
	if path == "" {
		return nil
	}
	u.cfgCheck.pending = true
	return func() tea.Msg { return upgradeCfgMsg{path: path, name: name, problems: checkConfigFile(path, name)} }
}

func (msg upgradeCfgMsg) applyTo(m *Model) tea.Cmd {
	if u := m.day2.up; u != nil && u.cfgCheck.path == msg.path && u.cfgCheck.name == msg.name {
		u.cfgCheck.problems, u.cfgCheck.pending = msg.problems, false
	}
	return nil
}

func (m *Model) upgradeFormKey(k tea.KeyPressMsg) tea.Cmd {
	u := m.day2.up
	u.formErr = ""
	switch {
	case key.Matches(k, upgradeFormKeys.Back):
		u.configIn.Blur()
		return m.leaveDayTwo(u.back)
	case key.Matches(k, upgradeFormKeys.Next):
		return m.focusUpgrade(u.focus + 1)
	case key.Matches(k, upgradeFormKeys.Prev):
		return m.focusUpgrade(u.focus - 1)
	case key.Matches(k, upgradeFormKeys.Enter):
		if u.focus == upFieldButton {
			return m.submitUpgrade()
		}
		return m.focusUpgrade(u.focus + 1)
	case key.Matches(k, upgradeFormKeys.Toggle) && u.focus == upFieldRestack:
		u.restack = !u.restack
		return nil
	case key.Matches(k, upgradeFormKeys.Toggle) && u.focus == upFieldDelete:
		u.deleteProjects = !u.deleteProjects
		return nil
	case k.String() == "pgup" || k.String() == "pgdown":
		m.scrollKey(k.String())
		return nil
	case u.focus == upFieldConfig:
		var cmd tea.Cmd
		u.configIn, cmd = u.configIn.Update(k)
		return tea.Batch(cmd, m.checkUpgradeConfig())
	case k.String() == "q":
		u.configIn.Blur()
		return m.leaveDayTwo(u.back)
	}
	return nil
}

// leaveDayTwo goes back to the screen the upgrade or rotate key screen
// was opened from; the inspect screens read the cluster again.
func (m *Model) leaveDayTwo(back screen) tea.Cmd {
	if (back == screenInspect || back == screenProject) && m.insp != nil {
		m.screen = back
		if m.insp.loading {
			return nil
		}
		return m.restartInspect()
	}
	m.screen = screenHome
	return nil
}

// submitUpgrade starts the upgrade: the engine plans and asks on the plan
// screen before it changes anything.
func (m *Model) submitUpgrade() tea.Cmd {
	u := m.day2.up
	if u.cfgCheck.pending || len(u.cfgCheck.problems) > 0 {
		u.formErr = "fix the Config file field first (marked ✗ above)"
		return m.focusUpgrade(upFieldConfig)
	}
	u.configIn.Blur()
	u.err = ""
	t := u.target
	req := UpgradeRequest{ConfigPath: strings.TrimSpace(u.configIn.Value()), Restack: u.restack, DeleteProjects: u.deleteProjects}
	return m.startOn(t.Provider, opUpgrade, t.Name, t.Location, func(ctx context.Context, b Backend, br *Bridge) error {
		return b.Upgrade(ctx, t, req, br, br)
	})
}

func (msg upgradeAsk) applyTo(m *Model) tea.Cmd {
	if m.refuseIfRunEnded(msg.reply) {
		return nil
	}
	u := m.day2.up
	if u == nil {
		// Not opened from the upgrade screen (cannot happen today): still
		// answerable, never left waiting.
		u = &upgradeState{target: Target{Provider: msg.q.Provider, Name: msg.q.Name, Location: msg.q.Location}, back: screenHome}
		m.day2.up = u
	}
	u.ask, u.planFocus = &msg, 1 // focus starts on Cancel
	u.plan = viewport.New()
	m.screen = screenUpgradePlan
	return nil
}

func (m *Model) upgradePlanKey(k tea.KeyPressMsg) tea.Cmd {
	u := m.day2.up
	vp := &u.plan
	switch s := k.String(); {
	case key.Matches(k, upgradePlanKeys.Scroll):
		if s == "up" || s == "k" {
			vp.ScrollUp(1)
		} else {
			vp.ScrollDown(1)
		}
	case key.Matches(k, upgradePlanKeys.Page):
		if s == "pgup" {
			vp.PageUp()
		} else {
			vp.PageDown()
		}
	case key.Matches(k, upgradePlanKeys.Ends):
		if s == "home" || s == "g" {
			vp.GotoTop()
		} else {
			vp.GotoBottom()
		}
	case key.Matches(k, upgradePlanKeys.Choose):
		u.planFocus = 1 - u.planFocus
	case key.Matches(k, upgradePlanKeys.Enter):
		m.answerDayTwo(u.planFocus == 0)
	case key.Matches(k, upgradePlanKeys.Cancel):
		m.answerDayTwo(false)
	}
	return nil
}

// label renders a label of the upgrade and rotate key screens (18
// columns), marked when focused.
func (m *Model) dayTwoLabel(s string, focused bool) string {
	mark := "  "
	if focused {
		mark = m.st.key.Render("> ")
	}
	return mark + fmt.Sprintf("%-16s", s)
}

// dayTwoNote adds a line under a field of the upgrade and rotate key
// screens, wrapped under the field's value.
func (m *Model) dayTwoNote(p *page, st lipgloss.Style, text string) {
	p.hang(strings.Repeat(" ", 18)+st.Render(text), 20)
}

// toggle renders an option: [x] on or [ ] off, in words too.
func (m *Model) toggle(on, focused bool) string {
	s := "[ ] off"
	if on {
		s = "[x] on"
	}
	if focused {
		return m.st.selected.Render(s)
	}
	return s
}

func (m *Model) viewUpgrade(p *page) {
	u := m.day2.up
	t := u.target
	p.line(m.st.header.Render("Upgrade kiln platform "+t.Name) + fmt.Sprintf(" · %s %s", t.Provider, t.Location))
	p.blank()
	p.line("kiln computes a plan first (every object to create, update or delete, per tenant and project) and shows it as a diff. Nothing changes until you apply it.")
	p.blank()
	p.input(m.dayTwoLabel("Config file", u.focus == upFieldConfig), u.configIn)
	m.viewCfgCheck(p, u.cfgCheck, "empty: the installed config, re-applied with this kiln's manifests (a new gateway image, say)", m.dayTwoNote)
	p.blank()
	p.row(m.dayTwoLabel("Restack", u.focus == upFieldRestack) + m.toggle(u.restack, u.focus == upFieldRestack))
	if u.focus == upFieldRestack {
		p.markFocus()
	}
	m.dayTwoNote(p, m.st.faint, "on: running projects whose stack changed are restacked (suspended, then started on the new stack); off: they keep running and are listed as needing a restack")
	p.row(m.dayTwoLabel("Delete projects", u.focus == upFieldDelete) + m.toggle(u.deleteProjects, u.focus == upFieldDelete))
	if u.focus == upFieldDelete {
		p.markFocus()
	}
	m.dayTwoNote(p, m.st.faint, "on: a tenant the config removes goes with the projects it still has; off: such a plan is refused and nothing changes")
	btn := m.button("[ Plan ]", u.focus == upFieldButton)
	p.pinButtons(strings.Repeat(" ", 18), btn)
	if u.err != "" {
		p.pin(m.st.errorText.Render("✗ the last plan was refused: " + u.err))
	}
	if u.formErr != "" {
		p.pin(m.st.errorText.Render("✗ " + u.formErr))
	}
}

// viewUpgradePlan is the engine's plan as a scrollable diff, and the
// question whether to apply it.
func (m *Model) viewUpgradePlan(p *page, rows int) {
	u := m.day2.up
	q := u.ask.q
	p.line(m.st.header.Render("Plan for kiln platform "+q.Name) + fmt.Sprintf(" · %s %s", q.Provider, q.Location))
	p.hang(planSummary(q.Changes)+" Nothing has changed yet.", 2)
	opts := []string{"restack " + onOff(u.restack), "delete projects " + onOff(u.deleteProjects)}
	cfg := "the installed config"
	if v := strings.TrimSpace(u.configIn.Value()); v != "" {
		cfg = v
	}
	p.hang(m.st.faint.Render("Config "+cfg+" · "+strings.Join(opts, " · ")), 2)
	n := len(q.Changes)
	b1, b2 := fmt.Sprintf("[ Apply %d change%s ]", n, human.Plural(n)), "[ Cancel ]"
	b1, b2 = m.button(b1, u.planFocus == 0), m.button(b2, u.planFocus != 0)
	p.pinButtons("  ", b1, b2)

	lines := m.planLines(q.Changes, m.planNotes(), p.width)
	// The diff takes the rows the header and the buttons leave, less one
	// for the position line.
	h := max(rows-len(p.lines)-len(p.pinned)-2, 3)
	vp := &u.plan
	vp.SetWidth(p.width)
	vp.SetHeight(min(h, len(lines)))
	vp.SetContentLines(lines)
	for _, l := range strings.Split(vp.View(), "\n") {
		p.row(strings.TrimRight(l, " "))
	}
	if len(lines) > vp.Height() {
		first := vp.YOffset() + 1
		last := min(vp.YOffset()+vp.Height(), len(lines))
		p.row(m.st.faint.Render(fmt.Sprintf("── lines %d–%d of %d · ↑/↓ pgup/pgdn scroll ──", first, last, len(lines))))
	}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// planSummary counts the plan's changes per action.
func planSummary(changes []engine.PlanChange) string {
	count := map[string]int{}
	for _, c := range changes {
		count[c.Action]++
	}
	var parts []string
	for _, a := range []string{"create", "update", "delete"} {
		if count[a] > 0 {
			parts = append(parts, fmt.Sprintf("%d to %s", count[a], a))
		}
	}
	return fmt.Sprintf("%d change%s: %s.", len(changes), human.Plural(len(changes)), strings.Join(parts, ", "))
}

// planNotes are the warnings the run logged so far (with the plan:
// projects left on a changed stack, say).
func (m *Model) planNotes() []string {
	if m.run == nil {
		return nil
	}
	var out []string
	for _, l := range m.run.logs {
		if strings.HasPrefix(l, engine.LevelWarn+": ") {
			out = append(out, strings.TrimPrefix(l, engine.LevelWarn+": "))
		}
	}
	return out
}

// planGroup is the changes of one part of the platform.
type planGroup struct {
	title   string
	changes []engine.PlanChange
}

// groupPlan groups the changes per part: the platform (kiln-system and
// anything cluster-wide), each tenant (token, namespace, its policies),
// each project (its route, an earlier kiln's Ingress, its restack); in that order, tenants and
// projects by name, changes in the engine's (dependency) order.
// systemNamespace is where the platform and the projects' routes live.
const systemNamespace = "kiln-system"

func groupPlan(changes []engine.PlanChange) []planGroup {
	var platform []engine.PlanChange
	tenants := map[string][]engine.PlanChange{}
	projects := map[string][]engine.PlanChange{}
	for _, c := range changes {
		tenant, inTenant := strings.CutPrefix(c.Namespace, config.TenantNamespacePrefix)
		switch {
		case c.Kind == engine.KindToken:
			tenants[c.Name] = append(tenants[c.Name], c)
		case c.Kind == "Namespace" && strings.HasPrefix(c.Name, config.TenantNamespacePrefix):
			t := strings.TrimPrefix(c.Name, config.TenantNamespacePrefix)
			tenants[t] = append(tenants[t], c)
		case inTenant && (c.Kind == engine.KindProject || c.Kind == "Ingress"):
			ref := tenant + "/" + c.Name
			projects[ref] = append(projects[ref], c)
		case c.Kind == "Ingress" && c.Namespace == systemNamespace && strings.Contains(c.Name, "."):
			// A project's route, Ingress kiln-system/T.P.
			ref := strings.Replace(c.Name, ".", "/", 1)
			projects[ref] = append(projects[ref], c)
		case inTenant:
			tenants[tenant] = append(tenants[tenant], c)
		default:
			platform = append(platform, c)
		}
	}
	var out []planGroup
	if len(platform) > 0 {
		out = append(out, planGroup{title: "Platform", changes: platform})
	}
	for _, t := range sortedKeys(tenants) {
		out = append(out, planGroup{title: "Tenant " + t, changes: tenants[t]})
	}
	for _, p := range sortedKeys(projects) {
		out = append(out, planGroup{title: "Project " + p, changes: projects[p]})
	}
	return out
}

func sortedKeys(m map[string][]engine.PlanChange) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// planMark is a change's symbol and style: + create, ~ update, - delete.
func (m *Model) planMark(action string) (string, lipgloss.Style) {
	switch action {
	case "create":
		return "+", m.st.ok
	case "delete":
		return "-", m.st.errorText
	}
	return "~", m.st.warn
}

// planLines renders the plan as a diff, wrapped to width: a heading per
// group, one line per change (symbol, action, kind, object), the fields an
// update changes, and the engine's words for it; then the notes.
func (m *Model) planLines(changes []engine.PlanChange, notes []string, width int) []string {
	var out []string
	for i, g := range groupPlan(changes) {
		if i > 0 {
			out = append(out, "")
		}
		out = append(out, m.st.header.Render(g.title))
		for _, c := range g.changes {
			mark, st := m.planMark(c.Action)
			ref := c.Name
			if c.Namespace != "" {
				ref = c.Namespace + "/" + c.Name
			}
			out = append(out, wrap(st.Render(fmt.Sprintf("  %s %-6s", mark, c.Action))+" "+c.Kind+" "+ref, width, 11)...)
			if len(c.Fields) > 0 {
				out = append(out, wrap("           fields: "+strings.Join(c.Fields, ", "), width, 19)...)
			}
			if c.Message != "" {
				out = append(out, wrap("           "+m.st.faint.Render(c.Message), width, 11)...)
			}
		}
	}
	if len(notes) > 0 {
		out = append(out, "", m.st.header.Render("Notes"))
		for _, n := range notes {
			out = append(out, wrap("  "+m.st.warn.Render("! "+n), width, 4)...)
		}
	}
	return out
}

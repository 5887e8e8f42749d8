package tui

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/internal/human"
)

// The upgrade screen's fields, in focus order. The EKS fields (version,
// nodes, node type) are shown, and focused, only for an aws cluster.
const (
	upFieldConfig = iota
	upFieldVersion
	upFieldNodes
	upFieldType
	upFieldRestack
	upFieldDelete
	upFieldButton
	upFields
)

// upgradeState is the upgrade screen (config file and options) and its
// plan screen (the engine's question).
type upgradeState struct {
	target engine.ClusterRef
	// back is the screen Esc returns to (home, inspect, project).
	back           screen
	focus          int
	configIn       textinput.Model
	cfgCheck       cfgCheck
	restack        bool
	deleteProjects bool
	// The EKS fields of an aws cluster (empty: keep what runs), and the
	// aws provider's verdict on them as typed: awsErr names the field,
	// awsErrIn is the input it is about.
	versionIn, nodesIn, typeIn textinput.Model
	awsErr                     string
	awsErrIn                   engine.Input
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
func (m *Model) openUpgrade(t engine.ClusterRef) tea.Cmd {
	u := &upgradeState{target: t, back: m.screen, planFocus: 1}
	u.configIn = m.newInput("(optional) path to a ClusterConfig file")
	if u.eks() {
		keep := "keep what runs"
		version := keep
		if v := m.runningVersion(t); v != "" {
			version = keep + " (" + v + ")"
		}
		u.versionIn = m.newInput(version)
		u.nodesIn = m.newInput(keep)
		u.typeIn = m.newInput(keep)
	}
	m.day2.up = u
	m.fitDayTwo()
	m.screen, m.help = screenUpgrade, false
	return m.focusUpgrade(upFieldConfig)
}

// eks reports whether the upgrade screen has the EKS fields (an aws
// cluster).
func (u *upgradeState) eks() bool { return u.target.Provider == "aws" }

// shown reports whether field f is on the upgrade screen.
func (u *upgradeState) shown(f int) bool {
	switch f {
	case upFieldVersion, upFieldNodes, upFieldType:
		return u.eks()
	}
	return true
}

// labelWidth is the upgrade screen's label column: wider for the EKS
// fields' "Kubernetes version".
func (u *upgradeState) labelWidth() int {
	if u.eks() {
		return 21
	}
	return 18
}

// runningVersion is the Kubernetes version (MAJOR.MINOR) cluster t runs,
// as the inspect screen last read it ("" when not read).
func (m *Model) runningVersion(t engine.ClusterRef) string {
	if m.insp == nil || m.insp.target != t || m.insp.data == nil {
		return ""
	}
	v := strings.TrimPrefix(m.insp.data.KubernetesVersion, "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return ""
	}
	minor := strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' })
	if minor == "" {
		return ""
	}
	return parts[0] + "." + minor
}

// input is the upgrade screen's text input of field f (nil: not a text
// field).
func (u *upgradeState) input(f int) *textinput.Model {
	switch f {
	case upFieldConfig:
		return &u.configIn
	case upFieldVersion:
		return &u.versionIn
	case upFieldNodes:
		return &u.nodesIn
	case upFieldType:
		return &u.typeIn
	}
	return nil
}

// request is what the upgrade screen asks.
func (u *upgradeState) request() engine.UpgradeRequest {
	return engine.UpgradeRequest{ConfigPath: strings.TrimSpace(u.configIn.Value()), Restack: u.restack, DeleteProjects: u.deleteProjects}
}

// infra is what the upgrade screen's EKS fields ask of the
// infrastructure (Nodes -1 when the field is not a number).
func (u *upgradeState) infra() engine.Infra {
	var in engine.Infra
	if !u.eks() {
		return in
	}
	in.KubernetesVersion = strings.TrimSpace(u.versionIn.Value())
	in.InstanceType = strings.TrimSpace(u.typeIn.Value())
	if v := strings.TrimSpace(u.nodesIn.Value()); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			n = -1
		}
		in.Nodes, in.NodesGiven = n, true
	}
	return in
}

// checkUpgradeAWS checks the EKS fields with the aws provider's rules
// (Ops.CheckUpgrade) as they are typed (no AWS call), worded with the
// upgrade screen's fields.
func (m *Model) checkUpgradeAWS() {
	u := m.day2.up
	u.awsErr, u.awsErrIn = "", ""
	if !u.eks() || m.opts.Ops == nil {
		return
	}
	if err := m.opts.Ops.CheckUpgrade(u.target, u.infra()); err != nil {
		u.awsErr = err.Error()
		var ie *engine.InputError
		if errors.As(err, &ie) {
			u.awsErr, u.awsErrIn = ie.Render(UpgradeInputName), ie.Input
		}
	}
}

// awsErrField is the field the aws provider's verdict is about.
func (u *upgradeState) awsErrField() int {
	switch u.awsErrIn {
	case engine.InputNodes:
		return upFieldNodes
	case engine.InputInstanceType:
		return upFieldType
	}
	return upFieldVersion
}

// dayTwoInputWidth is the width of the upgrade and rotate key screens'
// text inputs: the label column of 18, the rest for the value.
func (m *Model) dayTwoInputWidth() int { return clamp(m.width-19, 8, 60) }

// fitDayTwo sizes the text inputs to the terminal.
func (m *Model) fitDayTwo() {
	if u := m.day2.up; u != nil {
		w := clamp(m.width-u.labelWidth()-1, 8, 60)
		for _, in := range []*textinput.Model{&u.configIn, &u.versionIn, &u.nodesIn, &u.typeIn} {
			in.SetWidth(w)
		}
	}
	if r := m.day2.rot; r != nil {
		r.keepIn.SetWidth(m.dayTwoInputWidth())
		r.nameIn.SetWidth(clamp(m.width-5, 8, 60))
	}
}

// focusUpgrade moves the focus to field f (the next one shown when f is
// not).
func (m *Model) focusUpgrade(f int) tea.Cmd {
	u := m.day2.up
	u.focus = (f + upFields) % upFields
	for !u.shown(u.focus) {
		u.focus = (u.focus + 1) % upFields
	}
	m.blurUpgrade()
	if in := u.input(u.focus); in != nil {
		return in.Focus()
	}
	return nil
}

// stepUpgrade moves the focus d fields on, past the fields not shown.
func (m *Model) stepUpgrade(d int) tea.Cmd {
	u := m.day2.up
	f := u.focus
	for {
		f = (f + d + upFields) % upFields
		if u.shown(f) {
			return m.focusUpgrade(f)
		}
	}
}

func (m *Model) blurUpgrade() {
	u := m.day2.up
	for _, in := range []*textinput.Model{&u.configIn, &u.versionIn, &u.nodesIn, &u.typeIn} {
		in.Blur()
	}
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
		m.blurUpgrade()
		return m.leaveDayTwo(u.back)
	case key.Matches(k, upgradeFormKeys.Next):
		return m.stepUpgrade(1)
	case key.Matches(k, upgradeFormKeys.Prev):
		return m.stepUpgrade(-1)
	case key.Matches(k, upgradeFormKeys.Enter):
		if u.focus == upFieldButton {
			return m.submitUpgrade()
		}
		return m.stepUpgrade(1)
	case key.Matches(k, upgradeFormKeys.Toggle) && u.focus == upFieldRestack:
		u.restack = !u.restack
		return nil
	case key.Matches(k, upgradeFormKeys.Toggle) && u.focus == upFieldDelete:
		u.deleteProjects = !u.deleteProjects
		return nil
	case key.Matches(k, formKeys.Page):
		m.scrollKey(k.String())
		return nil
	case u.focus == upFieldConfig:
		var cmd tea.Cmd
		u.configIn, cmd = u.configIn.Update(k)
		return tea.Batch(cmd, m.checkUpgradeConfig())
	case u.input(u.focus) != nil:
		return m.updateUpgradeAWS(k)
	case key.Matches(k, formKeys.Leave):
		m.blurUpgrade()
		return m.leaveDayTwo(u.back)
	}
	return nil
}

// updateUpgradeAWS hands msg (a key, a paste) to the focused EKS field
// and checks the fields again.
func (m *Model) updateUpgradeAWS(msg tea.Msg) tea.Cmd {
	u := m.day2.up
	in := u.input(u.focus)
	var cmd tea.Cmd
	*in, cmd = in.Update(msg)
	m.checkUpgradeAWS()
	return cmd
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
	if m.checkUpgradeAWS(); u.awsErr != "" {
		f := u.awsErrField()
		u.formErr = "fix the " + upFieldName(f) + " field first (marked ✗ above)"
		return m.focusUpgrade(f)
	}
	m.blurUpgrade()
	u.err = ""
	t := u.target
	req, infra := u.request(), u.infra()
	return m.startOn(t.Provider, opUpgrade, t.Name, t.Location, func(o Ops) Op {
		return o.Upgrade(t, infra, req)
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
		u = &upgradeState{target: engine.ClusterRef{Provider: msg.q.Provider, Name: msg.q.Name, Location: msg.q.Location}, back: screenHome}
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

// upFieldName is the EKS field's label.
func upFieldName(f int) string {
	switch f {
	case upFieldNodes:
		return "Nodes"
	case upFieldType:
		return "Node type"
	}
	return "Kubernetes version"
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

// upLabel renders a label of the upgrade screen, in its label column.
func (m *Model) upLabel(s string, focused bool) string {
	mark := "  "
	if focused {
		mark = m.st.key.Render("> ")
	}
	return mark + fmt.Sprintf("%-*s", m.day2.up.labelWidth()-2, s)
}

// upNote adds a line under a field of the upgrade screen, wrapped under
// the field's value.
func (m *Model) upNote(p *page, st lipgloss.Style, text string) {
	w := m.day2.up.labelWidth()
	p.hang(strings.Repeat(" ", w)+st.Render(text), w+2)
}

func (m *Model) viewUpgrade(p *page) {
	u := m.day2.up
	t := u.target
	p.line(m.st.header.Render("Upgrade kiln platform "+t.Name) + fmt.Sprintf(" · %s %s", t.Provider, t.Location))
	p.blank()
	if u.eks() {
		p.line("kiln computes a plan first (the EKS changes, then the platform's objects) and shows it as a diff. Nothing changes until you apply it.")
	} else {
		p.line("kiln computes a plan first (every object to create, update or delete, per tenant and project) and shows it as a diff. Nothing changes until you apply it.")
	}
	p.blank()
	p.input(m.upLabel("Config file", u.focus == upFieldConfig), u.configIn)
	m.viewCfgCheck(p, u.cfgCheck, "empty: the installed config, re-applied with this kiln's manifests (a new gateway image, say)", m.upNote)
	if u.eks() {
		p.blank()
		notes := map[int]string{
			upFieldVersion: "MAJOR.MINOR, one minor above what runs; empty: keep it",
			upFieldNodes:   "the node group's size; empty: keep it",
			upFieldType:    "EC2 instance type, like m6i.large; empty: keep it",
		}
		for _, f := range []int{upFieldVersion, upFieldNodes, upFieldType} {
			p.input(m.upLabel(upFieldName(f), u.focus == f), *u.input(f))
			if u.awsErr != "" && u.awsErrField() == f {
				m.upNote(p, m.st.errorText, "✗ "+u.awsErr)
			} else {
				m.upNote(p, m.st.faint, notes[f])
			}
		}
	}
	p.blank()
	p.row(m.upLabel("Restack", u.focus == upFieldRestack) + m.toggle(u.restack, u.focus == upFieldRestack))
	if u.focus == upFieldRestack {
		p.markFocus()
	}
	m.upNote(p, m.st.faint, "on: running projects whose stack changed are restacked (suspended, then started on the new stack); off: they keep running and are listed as needing a restack")
	p.row(m.upLabel("Delete projects", u.focus == upFieldDelete) + m.toggle(u.deleteProjects, u.focus == upFieldDelete))
	if u.focus == upFieldDelete {
		p.markFocus()
	}
	m.upNote(p, m.st.faint, "on: a tenant the config removes goes with the projects it still has; off: such a plan is refused and nothing changes")
	btn := m.button("[ Plan ]", u.focus == upFieldButton)
	p.pinButtons(strings.Repeat(" ", u.labelWidth()), btn)
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
	if u.eks() {
		p.hang(m.st.faint.Render("EKS "+eksAsked(u.infra())), 2)
	}
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

// eksAsked words the EKS fields of an upgrade request.
func eksAsked(req engine.Infra) string {
	var parts []string
	if req.KubernetesVersion != "" {
		parts = append(parts, "Kubernetes version "+req.KubernetesVersion)
	}
	if req.NodesGiven {
		parts = append(parts, fmt.Sprintf("Nodes %d", req.Nodes))
	}
	if req.InstanceType != "" {
		parts = append(parts, "Node type "+req.InstanceType)
	}
	if len(parts) == 0 {
		return "kept as it runs"
	}
	return strings.Join(parts, " · ")
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
		if warn := string(event.LevelWarn) + ": "; strings.HasPrefix(l, warn) {
			out = append(out, strings.TrimPrefix(l, warn))
		}
	}
	return out
}

// planGroup is the changes of one part of the platform.
type planGroup struct {
	title   string
	changes []engine.PlanChange
}

// groupPlan groups the changes per part: the infrastructure (an aws
// cluster's EKS objects), the platform (kiln-system and
// anything cluster-wide), each tenant (token, namespace, its policies),
// each project (its route, an earlier kiln's Ingress, its restack); in that order, tenants and
// projects by name, changes in the engine's (dependency) order.
// infraKinds are the kinds of the cloud's objects an upgrade plans (the
// aws provider's: the EKS control plane, node groups, add-ons, access
// entries), grouped as Infrastructure, first, as the engine changes them.
var infraKinds = map[string]bool{"EKSCluster": true, "Nodegroup": true, "Addon": true, "AccessEntry": true, "LaunchTemplate": true}

// systemNamespace is where the platform and the projects' routes live.
const systemNamespace = "kiln-system"

func groupPlan(changes []engine.PlanChange) []planGroup {
	var infra, platform []engine.PlanChange
	tenants := map[string][]engine.PlanChange{}
	projects := map[string][]engine.PlanChange{}
	for _, c := range changes {
		tenant, inTenant := strings.CutPrefix(c.Namespace, config.TenantNamespacePrefix)
		switch {
		case c.Namespace == "" && infraKinds[c.Kind]:
			infra = append(infra, c)
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
	if len(infra) > 0 {
		out = append(out, planGroup{title: "Infrastructure", changes: infra})
	}
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

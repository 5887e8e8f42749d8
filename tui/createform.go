package tui

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/config"
)

// Create form fields, in focus order. The aws fields are shown (and
// focused) only with provider aws, the context only with kube.
const (
	fieldProvider = iota
	fieldName
	fieldContext
	fieldRegion
	fieldNodes
	fieldInstance
	fieldProfile
	fieldConfig
	fieldTokenDir
	fieldButton
	formFields
)

func (m *Model) validateName() {
	m.nameErr = ""
	if v := m.nameIn.Value(); v != "" {
		if err := config.ValidateName(v); err != nil {
			m.nameErr = err.Error()
		}
	}
}

// checkConfig starts a check of the config file field when it or the name
// changed: the file is read and decoded in a command with the engine's
// decoder (config.Parse), and its problems come back one per field.
func (m *Model) checkConfig() tea.Cmd {
	path, name := strings.TrimSpace(m.configIn.Value()), m.nameIn.Value()
	if path == m.cfgCheck.path && name == m.cfgCheck.name {
		return nil
	}
	m.cfgCheck = cfgCheck{path: path, name: name}
	if path == "" {
		return nil
	}
	m.cfgCheck.pending = true
	return func() tea.Msg { return cfgCheckMsg{path: path, name: name, problems: checkConfigFile(path, name)} }
}

// checkConfigFile reads and decodes path for cluster name; nil when valid.
// A name that is not valid yet is checked as "x" so the file's own
// problems still show.
func checkConfigFile(path, name string) []string {
	data, err := readConfigFile(path)
	if err != nil {
		return []string{err.Error()}
	}
	if config.ValidateName(name) != nil {
		name = "x"
	}
	_, err = config.Parse(path, data, name)
	if err == nil {
		return nil
	}
	var ps config.Problems
	if errors.As(err, &ps) {
		out := make([]string, 0, len(ps))
		for _, p := range ps {
			p.File = "" // the field already names the file
			if p.Line > 0 {
				out = append(out, fmt.Sprintf("line %d: %s", p.Line, p.String()))
			} else {
				out = append(out, p.String())
			}
		}
		return out
	}
	return []string{err.Error()}
}

// readConfigFile reads a config file, wording its failure for the form.
func readConfigFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("no such file")
	case err != nil:
		return nil, fmt.Errorf("cannot read: %v", errors.Unwrap(err))
	case st.IsDir():
		return nil, fmt.Errorf("is a directory, not a file")
	case st.Size() > config.MaxFileSize:
		return nil, fmt.Errorf("larger than %d bytes; not a cluster config", config.MaxFileSize)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read: %v", errors.Unwrap(err))
	}
	return data, nil
}

// locationNoun is what a provider's location is called.
func locationNoun(provider string) string {
	if provider == "aws" {
		return "region"
	}
	return "context"
}

// openCreate opens the create form, empty when fresh, else as it was left
// (after a failed create).
func (m *Model) openCreate(fresh bool) tea.Cmd {
	m.screen, m.formErr = screenCreate, ""
	if fresh {
		m.nameErr = ""
		m.nameIn.Reset()
		m.configIn.Reset()
		m.tokenIn.Reset()
		m.cfgCheck = cfgCheck{}
		m.formAWS, m.awsErr, m.awsErrIn = false, "", ""
		for _, in := range []*textinput.Model{&m.regionIn, &m.nodesIn, &m.instanceIn, &m.profileIn} {
			in.Reset()
		}
		return m.focusForm(fieldName)
	}
	return m.focusForm(m.formFocus)
}

// createKeys are the create form's keys: they dispatch (createKey) and
// the footer and ? help list them. Prev/Next of a choice (provider,
// context) act only on those fields; q leaves only off a text field.
var createKeys = struct {
	Back, Next, Prev, Page, Enter, Choose, ChoosePrev, ChooseNext, Toggle, Quit key.Binding
}{
	Back:       key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back")),
	Next:       key.NewBinding(key.WithKeys("tab", "down"), key.WithHelp("tab/↓", "next")),
	Prev:       key.NewBinding(key.WithKeys("shift+tab", "up"), key.WithHelp("↑", "previous")),
	Page:       key.NewBinding(key.WithKeys("pgup", "pgdown")),
	Enter:      key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "next/create")),
	Choose:     key.NewBinding(key.WithKeys("left", "right"), key.WithHelp("←/→", "context")),
	ChoosePrev: key.NewBinding(key.WithKeys("left", "h")),
	ChooseNext: key.NewBinding(key.WithKeys("right", "l", "space")),
	Toggle:     key.NewBinding(key.WithKeys("left", "right", "h", "l", "space")),
	Quit:       key.NewBinding(key.WithKeys("q")),
}

// createBindings are the create form's keys as the footer shows them.
func createBindings() []key.Binding {
	k := createKeys
	return []key.Binding{k.Next, k.Prev, k.Choose, k.Enter, k.Back}
}

func (m *Model) createKey(msg tea.KeyPressMsg) tea.Cmd {
	k := createKeys
	m.formErr = "" // said for the last Create; the fields say the rest
	switch {
	case key.Matches(msg, k.Back):
		m.screen = screenHome
		m.blurForm()
		return nil
	case key.Matches(msg, k.Next):
		return m.focusForm(m.nextField(1))
	case key.Matches(msg, k.Prev):
		return m.focusForm(m.nextField(-1))
	case key.Matches(msg, k.Page):
		m.scrollKey(msg.String())
		return nil
	case key.Matches(msg, k.Enter):
		if m.formFocus < fieldButton {
			return m.focusForm(m.nextField(1))
		}
		return m.submitCreate()
	}
	switch m.formFocus {
	case fieldProvider:
		switch {
		case key.Matches(msg, k.Toggle):
			m.formAWS = !m.formAWS
			if m.formAWS && m.regionIn.Value() == "" {
				if r := m.awsRegions(); len(r) > 0 {
					m.regionIn.SetValue(r[0])
				}
			}
			m.checkAWS()
		case key.Matches(msg, k.Quit):
			m.screen = screenHome
		}
		return nil
	case fieldContext:
		switch {
		case key.Matches(msg, k.ChoosePrev):
			m.ctxSel = clamp(m.ctxSel-1, 0, len(m.contexts)-1)
		case key.Matches(msg, k.ChooseNext):
			m.ctxSel = clamp(m.ctxSel+1, 0, len(m.contexts)-1)
		case key.Matches(msg, k.Quit):
			m.screen = screenHome
		}
		return nil
	case fieldButton:
		if key.Matches(msg, k.Quit) {
			m.screen = screenHome
		}
		return nil
	}
	return m.updateFocusedInput(msg)
}

func (m *Model) blurForm() {
	m.nameIn.Blur()
	m.configIn.Blur()
	m.tokenIn.Blur()
	m.regionIn.Blur()
	m.nodesIn.Blur()
	m.instanceIn.Blur()
	m.profileIn.Blur()
}

// shown says whether field f is on the form for the chosen provider.
func (m *Model) shown(f int) bool {
	switch f {
	case fieldContext:
		return !m.formAWS
	case fieldRegion, fieldNodes, fieldInstance, fieldProfile:
		return m.formAWS
	}
	return true
}

// nextField is the next shown field in direction d (wrapping).
func (m *Model) nextField(d int) int {
	f := m.formFocus
	for range formFields {
		f = (f + d + formFields) % formFields
		if m.shown(f) {
			return f
		}
	}
	return m.formFocus
}

// awsRegions are the regions the home screen's discovery found kiln
// clusters or searched in, in the order found, without repeats.
func (m *Model) awsRegions() []string {
	var out []string
	for _, c := range m.clusters {
		if c.Provider == "aws" && c.Location != "" && !slices.Contains(out, c.Location) {
			out = append(out, c.Location)
		}
	}
	return out
}

// awsRequest is the aws part of the form: the cluster in its region and
// what the form asks of its infrastructure (Nodes -1 when the field is
// not a number).
func (m *Model) awsRequest() (engine.ClusterRef, engine.Infra) {
	c := engine.ClusterRef{Provider: "aws", Name: m.nameIn.Value(), Location: strings.TrimSpace(m.regionIn.Value())}
	req := engine.Infra{InstanceType: strings.TrimSpace(m.instanceIn.Value()), Profile: strings.TrimSpace(m.profileIn.Value())}
	if v := strings.TrimSpace(m.nodesIn.Value()); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			n = -1
		}
		req.Nodes, req.NodesGiven = n, true
	}
	return c, req
}

// checkAWS checks the aws fields with the backend's aws rules as they are
// typed (no AWS call): the node count too, by the provider's rule, so the
// form and the flags cannot disagree on its range.
func (m *Model) checkAWS() {
	m.awsErr, m.awsErrIn = "", ""
	if !m.formAWS {
		return
	}
	c, req := m.awsRequest()
	if m.opts.Ops == nil {
		return
	}
	if err := m.opts.Ops.CheckCreate(c, req); err != nil {
		m.awsErr = err.Error()
		var ie *engine.InputError
		if errors.As(err, &ie) {
			m.awsErr, m.awsErrIn = ie.Render(InputName), ie.Input
		}
	}
}

func (m *Model) focusForm(i int) tea.Cmd {
	m.formFocus = (i + formFields) % formFields
	if !m.shown(m.formFocus) {
		m.formFocus = m.nextField(1)
	}
	m.blurForm()
	switch m.formFocus {
	case fieldRegion:
		return m.regionIn.Focus()
	case fieldNodes:
		return m.nodesIn.Focus()
	case fieldInstance:
		return m.instanceIn.Focus()
	case fieldProfile:
		return m.profileIn.Focus()
	case fieldName:
		return m.nameIn.Focus()
	case fieldConfig:
		return m.configIn.Focus()
	case fieldTokenDir:
		return m.tokenIn.Focus()
	}
	return nil
}

// contextProblem is what the home screen's discovery already knows against
// creating cluster name in the chosen context: it is unreachable, or the
// engine's placement rule (engine.Place, which create's decision asks too)
// refuses it: the context hosts another kiln cluster, or name lives in
// another context. note is what the form says otherwise (name is
// installed there: create continues it).
func (m *Model) contextProblem(name string) (problem, note string) {
	if len(m.contexts) == 0 {
		return "", ""
	}
	ctx := m.contexts[m.ctxSel]
	var hosted string
	var elsewhere []string
	for _, c := range m.clusters {
		if c.Provider != "kube" {
			continue // the form creates in kubeconfig contexts
		}
		switch {
		case c.Location == ctx && c.Err != "":
			return fmt.Sprintf("context %s is unreachable: %s", ctx, c.Err), ""
		case c.Location == ctx && c.Name != "":
			hosted = c.Name
		case c.Name != "" && c.Name == name:
			elsewhere = append(elsewhere, c.Location)
		}
	}
	if name == "" {
		return "", "" // nothing to place yet
	}
	switch engine.Place(name, hosted, elsewhere) {
	case engine.PlaceElsewhere:
		return fmt.Sprintf("cluster %s already exists in context %s (a NAME is unique across contexts): choose that context, or another name", name, elsewhere[0]), ""
	case engine.PlaceTaken:
		return fmt.Sprintf("context %s already hosts kiln cluster %s; a context hosts one kiln platform: choose another context (←/→)", ctx, hosted), ""
	case engine.PlaceHere:
		return "", fmt.Sprintf("cluster %s is installed here: Create asks before continuing it", name)
	}
	return "", ""
}

func (m *Model) submitCreate() tea.Cmd {
	name := m.nameIn.Value()
	if err := config.ValidateName(name); err != nil {
		m.nameErr = err.Error()
		return m.focusForm(fieldName)
	}
	if m.formAWS {
		return m.submitAWS(name)
	}
	if len(m.contexts) == 0 {
		m.formErr = "no kubeconfig context to create in: set KUBECONFIG to a kubeconfig with a context and start kiln again"
		return nil
	}
	if p, _ := m.contextProblem(name); p != "" {
		m.formErr = "fix the Context field first (marked ✗ above)"
		return m.focusForm(fieldContext)
	}
	if m.cfgCheck.pending || len(m.cfgCheck.problems) > 0 {
		m.formErr = "fix the Config file field first (marked ✗ above)"
		return m.focusForm(fieldConfig)
	}
	m.formErr = ""
	c := engine.ClusterRef{Provider: "kube", Name: name, Location: m.contexts[m.ctxSel]}
	req := engine.CreateRequest{ConfigPath: strings.TrimSpace(m.configIn.Value())}
	req.TokenDir = strings.TrimSpace(m.tokenIn.Value())
	m.blurForm()
	cmd := m.start(opCreate, c.Name, c.Location, func(o Ops) Op {
		return o.Create(c, engine.Infra{}, req)
	})
	m.run.fromForm = true
	return cmd
}

// submitAWS creates an EKS cluster with the form's aws fields.
func (m *Model) submitAWS(name string) tea.Cmd {
	m.checkAWS()
	c, infra := m.awsRequest()
	switch {
	case c.Location == "":
		m.formErr = "type a region (like eu-west-1) in the Region field"
		return m.focusForm(fieldRegion)
	case m.awsErr != "":
		m.formErr = "fix the aws fields first (marked ✗ above)"
		return m.focusForm(map[engine.Input]int{engine.InputRegion: fieldRegion, engine.InputNodes: fieldNodes, engine.InputInstanceType: fieldInstance}[m.awsErrIn])
	case m.cfgCheck.pending || len(m.cfgCheck.problems) > 0:
		m.formErr = "fix the Config file field first (marked ✗ above)"
		return m.focusForm(fieldConfig)
	}
	req := engine.CreateRequest{ConfigPath: strings.TrimSpace(m.configIn.Value())}
	req.TokenDir = strings.TrimSpace(m.tokenIn.Value())
	m.blurForm()
	cmd := m.start(opCreate, c.Name, c.Location, func(o Ops) Op {
		return o.Create(c, infra, req)
	})
	m.run.fromForm, m.run.provider = true, "aws"
	return cmd
}

// formNote adds a line under a form field: a problem (✗), a fact (✓) or a
// hint, wrapped under the field's value.
func (m *Model) formNote(p *page, st lipgloss.Style, text string) {
	p.hang(strings.Repeat(" ", 15)+st.Render(text), 17)
}

func (m *Model) viewCreate(p *page) {
	p.line(m.st.header.Render("New kiln cluster"))
	p.blank()
	prov := "kube (an existing cluster through kubeconfig)"
	if m.formAWS {
		prov = "aws (a new EKS cluster)"
	}
	if m.formFocus == fieldProvider {
		name, desc := "kube", "existing cluster (kubeconfig)"
		if m.formAWS {
			name, desc = "aws", "a new EKS cluster"
		}
		prov = m.st.selected.Render("‹ "+name+" ›") + " " + desc + m.st.faint.Render("  ←/→ kube|aws")
	}
	p.row(m.label("Provider", fieldProvider) + prov)
	if m.formFocus == fieldProvider {
		p.markFocus()
	}
	p.input(m.label("Name", fieldName), m.nameIn)
	switch {
	case m.nameErr != "":
		m.formNote(p, m.st.errorText, "✗ "+m.nameErr)
	case m.nameIn.Value() != "":
		m.formNote(p, m.st.ok, "✓ valid name")
	default:
		m.formNote(p, m.st.faint, "lowercase letters, digits and -, at most 40")
	}
	if m.formAWS {
		m.viewAWSFields(p)
	} else {
		m.viewContextField(p)
	}
	p.blank()
	p.input(m.label("Config file", fieldConfig), m.configIn)
	m.viewCfgCheck(p, m.cfgCheck, "empty: tenant default, domain NAME.kiln.test, stack default", m.formNote)
	p.input(m.label("Token dir", fieldTokenDir), m.tokenIn)
	m.formNote(p, m.st.faint, "empty: the keyring's entry, else kiln's state dir")
	btn := m.button("[ Create ]", m.formFocus == fieldButton)
	p.pinButtons(strings.Repeat(" ", 15), btn)
	if m.formErr != "" {
		p.pin(m.st.errorText.Render("✗ " + m.formErr))
	}
}

// viewContextField is the kube form's Context choice and what discovery
// knows against it.
func (m *Model) viewContextField(p *page) {
	ctx := m.st.faint.Render("(no contexts found)")
	if len(m.contexts) > 0 {
		ctx = fmt.Sprintf("‹ %s ›", m.contexts[m.ctxSel])
		if m.formFocus == fieldContext {
			ctx = m.st.selected.Render(ctx)
		}
		ctx += m.st.faint.Render(fmt.Sprintf("  %d of %d, ←/→ to choose", m.ctxSel+1, len(m.contexts)))
	}
	p.hang(m.label("Context", fieldContext)+ctx, 15)
	if m.formFocus == fieldContext {
		p.markFocus()
	}
	if problem, note := m.contextProblem(m.nameIn.Value()); problem != "" {
		m.formNote(p, m.st.errorText, "✗ "+problem)
	} else if note != "" {
		m.formNote(p, m.st.warn, "! "+note)
	}
}

// viewAWSFields are the aws form's Region, Nodes, Instance type and AWS
// profile, checked as typed with the aws provider's rules.
func (m *Model) viewAWSFields(p *page) {
	p.input(m.label("Region", fieldRegion), m.regionIn)
	if rs := m.awsRegions(); len(rs) > 0 {
		m.formNote(p, m.st.faint, "kiln clusters found in: "+strings.Join(rs, ", "))
	}
	p.input(m.label("Nodes", fieldNodes), m.nodesIn)
	p.input(m.label("Node type", fieldInstance), m.instanceIn)
	p.input(m.label("AWS profile", fieldProfile), m.profileIn)
	switch {
	case m.awsErr != "":
		m.formNote(p, m.st.errorText, "✗ "+m.awsErr)
	case strings.TrimSpace(m.regionIn.Value()) != "":
		m.formNote(p, m.st.ok, "✓ region, nodes and instance type are valid")
	}
}

// label renders a form label, marked when its field has focus.
func (m *Model) label(s string, field int) string {
	mark := "  "
	if field == m.formFocus {
		mark = m.st.key.Render("> ")
	}
	return mark + fmt.Sprintf("%-13s", s)
}

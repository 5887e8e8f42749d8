package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/config"
)

// The project lifecycle in the wizard, beside start, suspend and restack:
// n opens the new project form (tenant and stack chosen from the
// platform's config, the name checked as it is typed), x deletes the
// selected project after its name is typed, t rotates its token after a
// y/n question. Each runs in the run view, with live per-resource
// readiness, like the cluster operations.

// projectKeys are the inspect screens' lifecycle keys.
var projectKeys = struct{ New, Delete, Rotate key.Binding }{
	New:    key.NewBinding(key.WithKeys("n"), key.WithHelp("n", "new project")),
	Delete: key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "delete")),
	Rotate: key.NewBinding(key.WithKeys("t"), key.WithHelp("t", "rotate token")),
}

// The new project form's fields, in focus order.
const (
	npTenant = iota
	npName
	npStack
	npButton
	npFields
)

// newProjectState is the new project form.
type newProjectState struct {
	target  engine.ClusterRef
	tenants []string
	stacks  []string
	// existing are the refs (TENANT/PROJECT) of the projects the last
	// read found: a name taken is said as it is typed.
	existing map[string]bool
	tenant   int
	stack    int
	focus    int
	nameIn   textinput.Model
	nameErr  string
}

// deleteProjectState is the typed confirmation of a project's deletion.
type deleteProjectState struct {
	target  engine.ClusterRef
	project engine.ProjectStatus
	back    screen
	in      textinput.Model
	err     string
}

// Left is the half of Choose that steps back (not shown on its own).
type newProjectKeyMap struct{ Next, Prev, Choose, Left, Enter, Back key.Binding }

func (k newProjectKeyMap) bindings() []key.Binding {
	return []key.Binding{k.Next, k.Prev, k.Choose, k.Enter, k.Back}
}

var newProjectKeys = newProjectKeyMap{
	Next:   key.NewBinding(key.WithKeys("tab", "down"), key.WithHelp("tab/↓", "next field")),
	Prev:   key.NewBinding(key.WithKeys("shift+tab", "up"), key.WithHelp("↑", "previous field")),
	Choose: key.NewBinding(key.WithKeys("left", "right"), key.WithHelp("←/→", "tenant/stack")),
	Left:   key.NewBinding(key.WithKeys("left")),
	Enter:  key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "next/create")),
	Back:   key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back (nothing changes)")),
}

type deleteProjectKeyMap struct{ Enter, Cancel key.Binding }

func (k deleteProjectKeyMap) bindings() []key.Binding { return []key.Binding{k.Enter, k.Cancel} }

var deleteProjectKeys = deleteProjectKeyMap{
	Enter:  key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "confirm typed name")),
	Cancel: key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel (nothing changes)")),
}

// projectLifecycleKey handles n, x and t on the inspect screens; it
// reports whether the key was one of them. p is the selected project (nil
// when none is).
func (m *Model) projectLifecycleKey(k tea.KeyPressMsg, p *engine.ProjectStatus) (tea.Cmd, bool) {
	st := m.insp
	switch {
	case key.Matches(k, projectKeys.New):
		if m.screen != screenInspect {
			return nil, false
		}
		if m.opts.ReadOnly {
			st.note = readOnlyNote
			return nil, true
		}
		return m.openNewProject(), true
	case key.Matches(k, projectKeys.Delete):
		if m.opts.ReadOnly {
			st.note = readOnlyNote
			return nil, true
		}
		if p == nil {
			st.note = "delete: no project selected"
			return nil, true
		}
		return m.openDeleteProject(*p), true
	case key.Matches(k, projectKeys.Rotate):
		if m.opts.ReadOnly {
			st.note = readOnlyNote
			return nil, true
		}
		m.askProject(engine.ProjectRotateToken, p)
		return nil, true
	}
	return nil, false
}

// openNewProject opens the new project form of the inspected cluster.
func (m *Model) openNewProject() tea.Cmd {
	st := m.insp
	if st.data == nil {
		st.note = "new project: the cluster has not been read yet"
		return nil
	}
	cs := st.data
	if len(cs.Tenants) == 0 || len(st.data.Stacks) == 0 {
		st.note = "new project: the platform's config lists no tenant or no stack (add them with u upgrade)"
		return nil
	}
	f := &newProjectState{
		target: st.target, tenants: append([]string(nil), cs.Tenants...), stacks: append([]string(nil), st.data.Stacks...),
		existing: map[string]bool{},
	}
	for _, p := range cs.Projects {
		f.existing[ref(p)] = true
	}
	// The tenant of the selected project first: a new project is most
	// often a sibling of the one looked at.
	if p := st.selected(); p != nil {
		for i, t := range f.tenants {
			if t == p.Tenant {
				f.tenant = i
			}
		}
	}
	f.nameIn = m.newInput("e.g. blog")
	f.nameIn.CharLimit = config.MaxNameLength + 8
	st.create = f
	m.screen, m.help = screenProjectNew, false
	return m.focusNewProject(npName)
}

func (m *Model) focusNewProject(i int) tea.Cmd {
	f := m.insp.create
	f.focus = (i + npFields) % npFields
	if f.focus == npName {
		return f.nameIn.Focus()
	}
	f.nameIn.Blur()
	return nil
}

// newRef is the TENANT/PROJECT the form names.
func (f *newProjectState) newRef() string {
	return f.tenants[f.tenant] + "/" + strings.TrimSpace(f.nameIn.Value())
}

// checkNewName checks the typed name with the engine's rules for a
// project name, and against the projects the cluster has.
func (f *newProjectState) checkNewName() {
	f.nameErr = ""
	v := strings.TrimSpace(f.nameIn.Value())
	if v == "" {
		return
	}
	if r := config.ProjectProblem(v); r != "" {
		f.nameErr = fmt.Sprintf("name %q: %s", v, r)
		return
	}
	if f.existing[f.newRef()] {
		f.nameErr = fmt.Sprintf("%s exists already: go back (esc), select it and press s to start it", f.newRef())
	}
}

func (m *Model) newProjectKey(k tea.KeyPressMsg) tea.Cmd {
	f := m.insp.create
	switch {
	case key.Matches(k, newProjectKeys.Back):
		m.insp.create = nil
		m.screen = screenInspect
		return nil
	case key.Matches(k, newProjectKeys.Next):
		return m.focusNewProject(f.focus + 1)
	case key.Matches(k, newProjectKeys.Prev):
		return m.focusNewProject(f.focus - 1)
	case key.Matches(k, newProjectKeys.Enter):
		if f.focus == npButton {
			return m.submitNewProject()
		}
		return m.focusNewProject(f.focus + 1)
	case f.focus == npTenant && key.Matches(k, newProjectKeys.Choose):
		f.tenant = (f.tenant + step(k) + len(f.tenants)) % len(f.tenants)
		f.checkNewName()
		return nil
	case f.focus == npStack && key.Matches(k, newProjectKeys.Choose):
		f.stack = (f.stack + step(k) + len(f.stacks)) % len(f.stacks)
		return nil
	case f.focus == npName:
		var cmd tea.Cmd
		f.nameIn, cmd = f.nameIn.Update(k)
		f.checkNewName()
		return cmd
	case key.Matches(k, formKeys.Leave):
		m.insp.create = nil
		m.screen = screenInspect
	}
	return nil
}

// step is -1 for ←, +1 for → (the new project form's Choose keys).
func step(k tea.KeyPressMsg) int {
	if key.Matches(k, newProjectKeys.Left) {
		return -1
	}
	return 1
}

// newProjectInput hands a paste to the name field.
func (m *Model) newProjectInput(msg tea.Msg) tea.Cmd {
	f := m.insp.create
	if f == nil || f.focus != npName {
		return nil
	}
	var cmd tea.Cmd
	f.nameIn, cmd = f.nameIn.Update(msg)
	f.checkNewName()
	return cmd
}

// submitNewProject runs the create in the run view; the new project is
// selected when the inspect screen comes back.
func (m *Model) submitNewProject() tea.Cmd {
	f := m.insp.create
	f.checkNewName()
	if strings.TrimSpace(f.nameIn.Value()) == "" {
		f.nameErr = "type a name for the project"
	}
	if f.nameErr != "" {
		return m.focusNewProject(npName)
	}
	t, r := f.target, f.newRef()
	op := engine.ProjectRequest{Op: engine.ProjectCreate, Ref: r, Stack: f.stacks[f.stack]}
	m.insp.create = nil
	m.insp.selRef, m.insp.ref = r, ""
	return m.startOn(t.Provider, opProject, "create "+r, t.Location, func(o Ops) Op {
		return o.Project(t, op)
	})
}

func (m *Model) viewNewProject(p *page) {
	f := m.insp.create
	t := f.target
	p.line(m.st.header.Render("New project on kiln cluster "+t.Name) + fmt.Sprintf(" · %s %s", t.Provider, t.Location))
	p.blank()
	choice := func(vals []string, i int, focused bool) string {
		v := "‹ " + vals[i] + " ›"
		if focused {
			v = m.st.key.Render(v)
		}
		return v + m.st.faint.Render(fmt.Sprintf("  (%d of %d)", i+1, len(vals)))
	}
	p.line(m.dayTwoLabel("Tenant", f.focus == npTenant) + choice(f.tenants, f.tenant, f.focus == npTenant))
	if f.focus == npTenant {
		p.markFocus()
	}
	p.input(m.dayTwoLabel("Name", f.focus == npName), f.nameIn)
	switch {
	case f.nameErr != "":
		m.dayTwoNote(p, m.st.errorText, "✗ "+f.nameErr)
	case strings.TrimSpace(f.nameIn.Value()) != "":
		m.dayTwoNote(p, m.st.ok, "✓ "+f.newRef()+" is free")
	default:
		m.dayTwoNote(p, m.st.faint, "lowercase letters, digits and '-', starting with a letter")
	}
	p.line(m.dayTwoLabel("Stack", f.focus == npStack) + choice(f.stacks, f.stack, f.focus == npStack))
	if f.focus == npStack {
		p.markFocus()
	}
	p.blank()
	p.line(m.st.header.Render("What happens"))
	p.hang("  The project's Secret (its token), Deployment, Service and route are made in that order, each verified ready before the next; then kiln asks the front door whether the project answers.", 4)
	btn := m.button("[ Create ]", f.focus == npButton)
	p.pinButtons(strings.Repeat(" ", 18), btn)
}

// openDeleteProject asks for the project's name before deleting it.
func (m *Model) openDeleteProject(p engine.ProjectStatus) tea.Cmd {
	d := &deleteProjectState{target: m.insp.target, project: p, back: m.screen}
	d.in = m.newInput("")
	m.insp.del = d
	m.screen, m.help = screenProjectDelete, false
	return d.in.Focus()
}

func (m *Model) deleteProjectKey(k tea.KeyPressMsg) tea.Cmd {
	d := m.insp.del
	switch {
	case key.Matches(k, deleteProjectKeys.Cancel):
		m.insp.del = nil
		m.screen = d.back
		return nil
	case key.Matches(k, deleteProjectKeys.Enter):
		if strings.TrimSpace(d.in.Value()) != d.project.Project {
			d.err = fmt.Sprintf("type the project name (%s) exactly to confirm, or esc to cancel", d.project.Project)
			return nil
		}
		t, r := d.target, ref(d.project)
		m.insp.del = nil
		// The project will be gone: back on the table, not its screen.
		m.insp.ref = ""
		return m.startOn(t.Provider, opProject, "delete "+r, t.Location, func(o Ops) Op {
			return o.Project(t, engine.ProjectRequest{Op: engine.ProjectDelete, Ref: r})
		})
	}
	var cmd tea.Cmd
	d.in, cmd = d.in.Update(k)
	d.err = ""
	return cmd
}

// deleteProjectInput hands a paste to the typed name.
func (m *Model) deleteProjectInput(msg tea.Msg) tea.Cmd {
	d := m.insp.del
	if d == nil {
		return nil
	}
	var cmd tea.Cmd
	d.in, cmd = d.in.Update(msg)
	return cmd
}

func (m *Model) viewDeleteProject(p *page) {
	d := m.insp.del
	pr := d.project
	p.line(m.st.fail.Render("Delete project " + ref(pr)))
	p.blank()
	p.add("This deletes project %s of kiln cluster %s (%s %s) and everything it owns, each verified gone; its token stops working.",
		ref(pr), d.target.Name, d.target.Provider, d.target.Location)
	var objs []string
	for _, o := range pr.Objects {
		if o.Status != engine.StatusNotFound {
			objs = append(objs, o.Kind+" "+o.Name)
		}
	}
	if len(objs) > 0 {
		p.hang("  Objects: "+strings.Join(objs, ", "), 11)
	}
	p.blank()
	p.add("Type the project name (%s) to confirm:", pr.Project)
	p.input("  > ", d.in)
	if d.err != "" {
		p.hang(m.st.errorText.Render("✗ "+d.err), 2)
	}
	p.blank()
	p.line(m.st.faint.Render("Esc cancels; nothing is changed."))
}

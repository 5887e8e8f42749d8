package tui

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/table"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/internal/human"
)

// DefaultInspectEvery is how often the inspect screens re-read the cluster.
const DefaultInspectEvery = 3 * time.Second

// Watcher is Ops that keeps the inspect screens live from watches
// (engine.Watch): fn gets a fresh read after every change, until ctx ends.
// Ops without it is re-read every Options.InspectEvery.
type Watcher interface {
	Watch(ctx context.Context, c engine.ClusterRef, fn engine.WatchFunc) error
}

// inspectState is the inspect screens' state. It survives a project
// operation's run view, so going back lands on the same project.
type inspectState struct {
	target  engine.ClusterRef
	data    *engine.ClusterStatus
	err     string
	loading bool
	// gen numbers reads: a result or tick of an older generation is
	// dropped, so at most one refresh cycle is ever alive.
	gen     int
	updated time.Time
	// sel is the selected row of the project table. Once the user
	// selects a project (↑/↓, the wheel), selRef (TENANT/PROJECT) is what
	// is selected and sel is derived from it: filtering, a re-read or a
	// sort keep that project selected wherever its row moves; while it is
	// not in the table sel is -1 (no row selected, said under the table)
	// and s/p/r act on nothing.
	sel    int
	selRef string
	// ref is the project the detail screen shows.
	ref string
	ask *projectAsk
	// create is the new project form (n), del a project's delete
	// confirmation (x); nil when not shown.
	create *newProjectState
	del    *deleteProjectState
	// note says why the last action key did nothing (a no-op action).
	note string
	// since is when the current read started (the progress line).
	since time.Time
	// stop ends the watch of Ops that are a Watcher (nil when polling).
	stop context.CancelFunc
	// filter narrows the project table to refs containing it; filtering
	// is set while / is typing it.
	filter    string
	filtering bool
	// feed is the project screen's events and followed log (nil when the
	// project screen is not shown); feedGen numbers feeds.
	feed    *feedState
	feedGen int
	// table is the project table (bubbles' table: it scrolls to keep
	// the selection in view).
	table table.Model
}

// projectAsk is a project operation waiting for the user's confirmation.
type projectAsk struct {
	op, ref, from string
	stacks        []string
	stackSel      int
}

type (
	inspectMsg struct {
		gen  int
		data *engine.ClusterStatus
		err  error
		// watch is the channel of a watch's reads (nil for a polled
		// read); ended says the watch stopped with err.
		watch chan inspectMsg
		ctx   context.Context
		ended bool
	}
	inspectTickMsg struct{ gen int }
)

func ref(p engine.ProjectStatus) string { return p.Tenant + "/" + p.Project }

// projects are the project table's rows: every project, or those whose
// TENANT/PROJECT, state or stack contains the filter.
func (s *inspectState) projects() []engine.ProjectStatus {
	if s.data == nil {
		return nil
	}
	all := s.data.Projects
	if s.filter == "" {
		return all
	}
	f := strings.ToLower(s.filter)
	var out []engine.ProjectStatus
	for _, p := range all {
		if strings.Contains(strings.ToLower(ref(p)), f) || strings.Contains(p.State, f) || strings.Contains(strings.ToLower(p.Stack), f) {
			out = append(out, p)
		}
	}
	return out
}

// project returns the project the detail screen shows.
func (s *inspectState) allProjects() []engine.ProjectStatus {
	if s.data == nil {
		return nil
	}
	return s.data.Projects
}

// project returns the project the detail screen shows.
func (s *inspectState) project() *engine.ProjectStatus {
	ps := s.allProjects()
	for i := range ps {
		if ref(ps[i]) == s.ref {
			return &ps[i]
		}
	}
	return nil
}

// moveSel moves the selection d rows (from no selection: to the first
// row) and makes that row's project the selected one.
func (s *inspectState) moveSel(d int) {
	ps := s.projects()
	if s.sel < 0 {
		s.sel = 0
	} else {
		s.sel = clamp(s.sel+d, 0, len(ps)-1)
	}
	if s.sel >= 0 && s.sel < len(ps) {
		s.selRef = ref(ps[s.sel])
	}
}

// follow finds the selected project's row after the rows changed (the
// filter, a re-read): a project the user selected (↑/↓, the wheel) stays
// selected wherever its row moves, or nothing is while it is not shown.
// Until the user selects one, the first shown row is (filter-then-enter).
func (s *inspectState) follow() {
	ps := s.projects()
	if s.selRef == "" {
		s.sel = clamp(s.sel, 0, len(ps)-1)
		return
	}
	s.sel = -1
	for i := range ps {
		if ref(ps[i]) == s.selRef {
			s.sel = i
			return
		}
	}
}

// hiddenSel says why the selected project has no row ("" when it has
// one, or nothing was selected).
func (s *inspectState) hiddenSel() string {
	if s.sel >= 0 || s.selRef == "" || len(s.projects()) == 0 {
		return ""
	}
	for _, p := range s.allProjects() {
		if ref(p) == s.selRef {
			return s.selRef + " is selected but hidden by the filter /" + s.filter + ": ↑/↓ selects a shown project"
		}
	}
	return s.selRef + " is gone from the cluster: ↑/↓ selects another project"
}

func (s *inspectState) selected() *engine.ProjectStatus {
	ps := s.projects()
	if s.sel < 0 || s.sel >= len(ps) {
		return nil
	}
	return &ps[s.sel]
}

func (m *Model) openInspect(t engine.ClusterRef) tea.Cmd {
	m.closeInspect()
	m.insp = &inspectState{target: t, table: m.newTable()}
	m.screen, m.help = screenInspect, false
	if w, ok := m.opts.Ops.(Watcher); ok {
		return m.watchInspect(w)
	}
	return m.restartInspect()
}

// closeInspect ends the inspect screens' watch, if any.
func (m *Model) closeInspect() {
	m.stopFeed()
	if m.insp != nil && m.insp.stop != nil {
		m.insp.stop()
		m.insp.stop = nil
	}
}

// watchInspect starts the Watcher's watch once for the inspect screens:
// every read it delivers replaces the one waiting (only the newest
// matters), and a command waits for the next one.
func (m *Model) watchInspect(w Watcher) tea.Cmd {
	s := m.insp
	ctx, cancel := context.WithCancel(context.Background())
	s.stop, s.loading, s.since = cancel, true, m.opts.Now()
	s.gen++
	gen, t := s.gen, s.target
	ch := make(chan inspectMsg, 1)
	// The watch runs as a command of its own (Bubble Tea runs it off the
	// render loop, as it runs every operation's): Update starts no
	// goroutine. It ends with its context (closeInspect).
	m.ops.Add(1)
	watch := func() tea.Msg {
		defer m.ops.Done()
		err := w.Watch(ctx, t, func(d *engine.ClusterStatus, err error) {
			msg := inspectMsg{gen: gen, data: d, err: err, watch: ch}
			for {
				select {
				case ch <- msg:
					return
				case <-ctx.Done():
					return
				default:
				}
				select { // drop the older read still waiting
				case <-ch:
				default:
				}
			}
		})
		if err != nil && ctx.Err() == nil {
			select {
			case <-ch:
			default:
			}
			ch <- inspectMsg{gen: gen, err: err, watch: ch, ended: true}
		}
		return nil
	}
	return tea.Batch(watch, waitInspect(ctx, ch))
}

// waitInspect waits for the watch's next read.
func waitInspect(ctx context.Context, ch chan inspectMsg) tea.Cmd {
	return func() tea.Msg {
		select {
		case msg := <-ch:
			msg.ctx = ctx
			return msg
		case <-ctx.Done():
			return nil
		}
	}
}

// returnToInspect leaves the run view for the inspect screen the run was
// started from (the project screen when a project was inspected) and reads
// it again, unless a read is already under way.
func (m *Model) returnToInspect() tea.Cmd {
	m.run, m.screen = nil, screenInspect
	if m.insp.ref != "" {
		m.screen = screenProject
	}
	if m.insp.loading {
		return nil
	}
	return m.restartInspect()
}

// restartInspect starts a new refresh cycle, ending any older one. A
// watch needs none: it delivers every change by itself.
func (m *Model) restartInspect() tea.Cmd {
	if m.insp.stop != nil {
		return nil
	}
	m.insp.gen++
	m.insp.loading = false
	return m.loadInspect()
}

// loadInspect reads the cluster in a command.
func (m *Model) loadInspect() tea.Cmd {
	s, b := m.insp, m.opts.Ops
	if s == nil || b == nil || s.loading {
		return nil
	}
	s.loading, s.since = true, m.opts.Now()
	gen, t := s.gen, s.target
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		d, err := b.Status(ctx, t)
		return inspectMsg{gen: gen, data: d, err: err}
	}
}

// projectChanged reports whether a project's status differs between two
// reads (nil: not in that read).
func projectChanged(before, after *engine.ProjectStatus) bool {
	if before == nil || after == nil {
		return before != after
	}
	return !reflect.DeepEqual(*before, *after)
}

func (m *Model) inspectResult(msg inspectMsg) tea.Cmd {
	s := m.insp
	if s == nil || msg.gen != s.gen {
		return nil
	}
	s.loading = false
	var before *engine.ProjectStatus // the project screen's project as shown
	if s.feed != nil {
		if p := s.project(); p != nil {
			c := *p
			before = &c
		}
	}
	if msg.err != nil {
		s.err = msg.err.Error() // keep the last good read on screen
	} else {
		s.data, s.err, s.updated = msg.data, "", m.opts.Now()
	}
	s.follow()
	if msg.watch != nil {
		// The project screen's project changed: its Events may have too
		// (Events are not watched; they are read again on a change of
		// that project, not of another one).
		var events tea.Cmd
		if after := s.project(); s.feed != nil && projectChanged(before, after) {
			events = m.readEvents()
		}
		if msg.ended {
			s.stop = nil
			return events
		}
		s.loading = false
		return tea.Batch(events, waitInspect(msg.ctx, msg.watch))
	}
	every := m.opts.InspectEvery
	if every <= 0 {
		every = DefaultInspectEvery
	}
	gen := s.gen
	return tea.Tick(every, func(time.Time) tea.Msg { return inspectTickMsg{gen: gen} })
}

func (m *Model) inspectTick(msg inspectTickMsg) tea.Cmd {
	s := m.insp
	if s == nil || msg.gen != s.gen {
		return nil
	}
	if m.screen != screenInspect && m.screen != screenProject {
		// The cycle pauses during a project operation's run view and
		// restarts on the way back.
		return nil
	}
	return m.loadInspect()
}

// askProject asks before running op on the project ref; an action that
// would change nothing is refused with the reason instead.
func (m *Model) askProject(op string, p *engine.ProjectStatus) {
	if p == nil {
		m.insp.note = "no project selected"
		if m.insp.data == nil {
			m.insp.note = "still reading the cluster: the projects appear when the read lands"
		}
		return
	}
	if why := m.disabled(op, p); why != "" {
		m.insp.note = why
		return
	}
	a := &projectAsk{op: op, ref: ref(*p), from: p.Stack}
	if op == engine.ProjectRestack {
		// Offer only the other stacks: restacking onto the current one
		// changes nothing.
		for _, st := range m.insp.data.Stacks {
			if st != p.Stack {
				a.stacks = append(a.stacks, st)
			}
		}
	}
	m.insp.ask = a
}

// disabled says why op on p would change nothing ("" when it would do
// something): start on a project that runs, suspend on a suspended one,
// restack when kiln-config lists no other stack.
func (m *Model) disabled(op string, p *engine.ProjectStatus) string {
	if p == nil {
		return "no project selected"
	}
	switch op {
	case engine.ProjectStart:
		if p.Desired == "running" && p.State == "running" {
			return fmt.Sprintf("start: %s is already running", ref(*p))
		}
	case engine.ProjectSuspend:
		if p.Desired == "suspended" && p.State == "suspended" {
			return fmt.Sprintf("suspend: %s is already suspended", ref(*p))
		}
	case engine.ProjectRestack:
		var stacks []string
		if m.insp.data != nil {
			stacks = m.insp.data.Stacks
		}
		other := false
		for _, st := range stacks {
			other = other || st != p.Stack
		}
		if !other {
			return fmt.Sprintf("restack: kiln-config lists no stack other than %s", p.Stack)
		}
	}
	return ""
}

// runProject runs the confirmed operation through the run view.
func (m *Model) runProject() tea.Cmd {
	a, t := m.insp.ask, m.insp.target
	m.insp.ask = nil
	op := engine.ProjectRequest{Op: a.op, Ref: a.ref}
	if a.op == engine.ProjectRestack {
		if len(a.stacks) == 0 {
			return nil
		}
		op.Stack = a.stacks[a.stackSel]
	}
	return m.startOn(t.Provider, opProject, a.op+" "+a.ref, t.Location, func(o Ops) Op {
		return o.Project(t, op)
	})
}

// tokenSync renders the engine's token sync of the project: in sync only
// when the engine saw the Deployment run the token in force, and the read
// has that Deployment (derived state is never claimed without the objects
// it is derived from).
func tokenSync(p *engine.ProjectStatus) (ok bool, text string) {
	hasDeployment := false
	for _, o := range p.Objects {
		if o.Kind == "Deployment" && o.Status != engine.StatusNotFound {
			hasDeployment = true
		}
	}
	if !hasDeployment {
		if p.Desired == "suspended" {
			return false, "unknown: no deployment runs a token (suspended)"
		}
		return false, "unknown: no deployment runs a token"
	}
	switch p.TokenSync {
	case engine.TokenInSync:
		for _, o := range p.Objects {
			if o.Kind == "Secret" && o.Message != "" {
				return true, "deployment runs the token in force (" + o.Message + ")"
			}
		}
		return true, "deployment runs the token in force"
	case engine.TokenOutOfSync:
		return false, "token out of sync"
	}
	if p.Desired == "suspended" {
		return false, "unknown: no deployment runs a token (suspended)"
	}
	return false, "unknown: no deployment runs a token"
}

// readOnlyNote is what an action key says on a read-only inspector.
const readOnlyNote = "read-only: this inspector changes nothing (kiln inspect --read-only)"

// inspectKeys are the inspect and project screens' keys: they dispatch
// (inspectKey, filterKey) and the footer and ? help list them
// (inspectBindings). The lifecycle keys are projectKeys, the day-2 keys
// clusterKeys.
var inspectKeys = struct {
	Back, Up, Down, Select, Scroll, Page, Filter, Open, Start, Suspend, Restack, Objects key.Binding
	// A question (s, p, r, t): the stack to restack onto, yes, no.
	AskPrev, AskNext, AskChoose, AskYes, AskNo key.Binding
	// Typing the filter (/).
	FilterType, FilterKeep, FilterClear, FilterDelete, FilterSpace key.Binding
	ReadOnly                                                       key.Binding
}{
	Back:    key.NewBinding(key.WithKeys("esc", "q"), key.WithHelp("esc", "back")),
	Up:      key.NewBinding(key.WithKeys("up", "k")),
	Down:    key.NewBinding(key.WithKeys("down", "j")),
	Select:  key.NewBinding(key.WithKeys("up", "k", "down", "j"), key.WithHelp("↑/↓", "select")),
	Scroll:  key.NewBinding(key.WithKeys("up", "k", "down", "j"), key.WithHelp("↑/↓", "scroll")),
	Page:    key.NewBinding(key.WithKeys("pgup", "pgdown")),
	Filter:  key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
	Open:    key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "project")),
	Start:   key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "start")),
	Suspend: key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "suspend")),
	Restack: key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "restack")),
	Objects: key.NewBinding(key.WithKeys("o"), key.WithHelp("o", "objects in full")),

	AskPrev:   key.NewBinding(key.WithKeys("left", "h")),
	AskNext:   key.NewBinding(key.WithKeys("right", "l", "tab")),
	AskChoose: key.NewBinding(key.WithKeys("left", "right"), key.WithHelp("←/→", "stack")),
	AskYes:    key.NewBinding(key.WithKeys("y", "Y", "enter"), key.WithHelp("enter/y", "confirm")),
	AskNo:     key.NewBinding(key.WithKeys("n", "N", "esc", "q"), key.WithHelp("esc/n", "cancel")),

	FilterType:   key.NewBinding(key.WithKeys("type"), key.WithHelp("type", "filter projects")),
	FilterKeep:   key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "keep filter")),
	FilterClear:  key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "clear filter")),
	FilterDelete: key.NewBinding(key.WithKeys("backspace")),
	FilterSpace:  key.NewBinding(key.WithKeys("space")),
	ReadOnly:     key.NewBinding(key.WithKeys("read-only"), key.WithHelp("read-only", "no actions")),
}

// inspectBindings are the inspect screens' keys as the footer shows them.
func (m *Model) inspectBindings() []key.Binding {
	k, st := inspectKeys, m.insp
	var bs []key.Binding
	switch {
	case st != nil && st.ask != nil && st.ask.op == engine.ProjectRestack:
		yes := key.NewBinding(key.WithKeys(k.AskYes.Keys()...), key.WithHelp("enter/y", "restack"))
		bs = []key.Binding{k.AskChoose, yes, k.AskNo}
	case st != nil && st.ask != nil:
		bs = []key.Binding{k.AskYes, k.AskNo}
	case st != nil && st.filtering:
		bs = []key.Binding{k.FilterType, k.FilterKeep, k.FilterClear}
	case m.screen == screenInspect && m.opts.ReadOnly:
		bs = []key.Binding{k.Back, k.Select, k.Filter, k.Open, k.Objects, k.ReadOnly}
	case m.screen == screenInspect:
		bs = []key.Binding{k.Back, k.Select, k.Filter, k.Open, k.Objects, k.Start, k.Suspend, k.Restack,
			projectKeys.New, projectKeys.Rotate, projectKeys.Delete, clusterKeys.Upgrade, clusterKeys.Rotate}
	case m.opts.ReadOnly:
		bs = []key.Binding{k.Back, k.Scroll, k.ReadOnly}
	default:
		bs = []key.Binding{k.Back, k.Start, k.Suspend, k.Restack, projectKeys.Rotate, projectKeys.Delete,
			clusterKeys.Upgrade, clusterKeys.Rotate, k.Scroll}
	}
	return bs
}

// inspectKey handles the inspect table and the project detail screen,
// and the confirmation of a project operation on either.
func (m *Model) inspectKey(msg tea.KeyPressMsg) tea.Cmd {
	k, st, s := inspectKeys, m.insp, msg.String()
	if a := st.ask; a != nil {
		switch {
		case key.Matches(msg, k.AskPrev):
			a.stackSel = clamp(a.stackSel-1, 0, len(a.stacks)-1)
		case key.Matches(msg, k.AskNext):
			a.stackSel = clamp(a.stackSel+1, 0, len(a.stacks)-1)
		case key.Matches(msg, k.AskYes):
			return m.runProject()
		case key.Matches(msg, k.AskNo):
			st.ask = nil
		}
		return nil
	}
	st.note = ""
	if st.filtering {
		return m.filterKey(msg)
	}
	p := st.selected()
	if m.screen == screenProject {
		p = st.project()
		if m.paneKey(s) {
			return nil
		}
	}
	if cmd, ok := m.projectLifecycleKey(msg, p); ok {
		return cmd
	}
	if m.opts.ReadOnly && key.Matches(msg, k.Start, k.Suspend, k.Restack, clusterKeys.Upgrade, clusterKeys.Rotate) {
		st.note = readOnlyNote
		return nil
	}
	if key.Matches(msg, clusterKeys.Upgrade, clusterKeys.Rotate) {
		var keyIDs []string
		if st.data != nil {
			keyIDs = st.data.KeyIDs
		}
		return m.dayTwoKeyPress(s, st.target, keyIDs)
	}
	switch {
	case key.Matches(msg, k.Filter):
		if m.screen == screenInspect {
			st.filtering = true
		}
		return nil
	case key.Matches(msg, k.Back):
		if m.screen == screenProject {
			m.screen, st.ref = screenInspect, ""
			return nil
		}
		if s == "esc" && st.filter != "" {
			st.filter = "" // esc clears the filter first
			st.follow()
			return nil
		}
		return m.goHome()
	case key.Matches(msg, k.Up):
		if m.screen == screenProject {
			m.scrollKey(s)
			return nil
		}
		st.moveSel(-1)
	case key.Matches(msg, k.Down):
		if m.screen == screenProject {
			m.scrollKey(s)
			return nil
		}
		st.moveSel(1)
	case key.Matches(msg, k.Page):
		m.scrollKey(s)
	case key.Matches(msg, k.Open):
		if m.screen == screenInspect && p != nil {
			m.screen, st.ref = screenProject, ref(*p)
		}
	case key.Matches(msg, k.Objects):
		if m.screen == screenInspect {
			m.openObjects()
		}
	case key.Matches(msg, k.Start):
		m.askProject(engine.ProjectStart, p)
	case key.Matches(msg, k.Suspend):
		m.askProject(engine.ProjectSuspend, p)
	case key.Matches(msg, k.Restack):
		m.askProject(engine.ProjectRestack, p)
	}
	return nil
}

// filterKey types the project table's filter (/): enter keeps it, esc
// clears it, backspace deletes.
func (m *Model) filterKey(msg tea.KeyPressMsg) tea.Cmd {
	k, st, s := inspectKeys, m.insp, msg.String()
	switch {
	case key.Matches(msg, k.FilterKeep):
		st.filtering = false
	case key.Matches(msg, k.FilterClear):
		st.filtering, st.filter = false, ""
	case key.Matches(msg, k.FilterDelete):
		if r := []rune(st.filter); len(r) > 0 {
			st.filter = string(r[:len(r)-1])
		}
	case key.Matches(msg, k.FilterSpace):
		st.filter += " "
	default:
		if r := []rune(s); len(r) == 1 {
			st.filter += s
		}
	}
	st.follow()
	return nil
}

// inspectHeader is the first lines of both inspect screens: the cluster,
// its readiness and when it was last read, or that a read is under way.
func (m *Model) inspectHeader(p *page) *engine.ClusterStatus {
	s := m.insp
	t := s.target
	var st *engine.ClusterStatus
	if s.data != nil {
		st = s.data
	}
	state := ""
	switch {
	case st == nil:
	case st.PartlyRemoved != "":
		state = " · " + m.st.warn.Render("! partly removed")
	case st.Ready:
		state = " · " + m.st.ok.Render("✓ platform ready")
	case !st.Installed:
		state = " · " + m.st.fail.Render("✗ platform not installed")
	default:
		state = " · " + m.st.warn.Render("… platform not ready")
	}
	line := m.st.header.Render("Cluster "+t.Name) + " · " + t.Provider + " " + t.Location + state
	switch {
	case s.loading && st != nil:
		line += "  " + m.spinner() + m.st.faint.Render(" refreshing…")
	case !s.updated.IsZero():
		line += m.st.faint.Render("  updated " + s.updated.Format("15:04:05"))
	}
	p.line(line)
	if s.err != "" {
		p.hang(m.st.errorText.Render("✗ "+s.err), 2)
	}
	return st
}

// viewLoading is the inspect screens before the first read lands: what is
// read, and for how long so far.
func (m *Model) viewLoading(p *page) {
	s := m.insp
	p.blank()
	p.hang(fmt.Sprintf("%s reading the live objects of cluster %s in context %s (platform objects, projects, token dir)… %s",
		m.spinner(), s.target.Name, s.target.Location, m.st.faint.Render(human.Elapsed(m.opts.Now().Sub(s.since)))), 2)
	p.line(m.st.faint.Render("  esc goes back at any time; the screen fills in when the read lands."))
}

func (m *Model) viewInspect(p *page, rows int) {
	s := m.insp
	st := m.inspectHeader(p)
	if st == nil {
		if s.err == "" {
			m.viewLoading(p)
		}
		m.inspectActions(p, nil)
		return
	}
	// Rows left for the platform objects once everything else is placed.
	projects := max(len(st.Projects), 1)
	// The lines under the objects (tenants, tokens, entry, isolation,
	// access) and the pinned actions are rendered first, so that their
	// wrapped height counts.
	details := newPage(p.width)
	m.inspectDetails(details, st)
	shownProjects := s.projects()
	acts := newPage(p.width)
	m.inspectActions(acts, shownProjects)
	filter := 0
	if s.filtering || s.filter != "" {
		filter = 1
	}
	// Headers, the objects' title, details, blank, the projects' title,
	// the filter, the table's head; the blank before the pinned actions.
	fixed := len(p.lines) + 1 + len(details.lines) + 1 + 1 + filter + 1 + 1 + len(acts.pinned)
	platRows := clamp(rows-fixed-min(projects, 6), 2, len(st.Objects))
	ready := 0
	for _, o := range st.Objects {
		if o.Status == engine.StatusCurrent {
			ready++
		}
	}
	p.line(m.st.header.Render(fmt.Sprintf("Platform objects (%d of %d current)", ready, len(st.Objects))))
	shown := st.Objects
	if len(shown) > platRows {
		// Show what is not ready first; the current rest is summed up.
		var bad, good []engine.ObjectStatus
		for _, o := range st.Objects {
			if o.Status == engine.StatusCurrent {
				good = append(good, o)
			} else {
				bad = append(bad, o)
			}
		}
		shown = append(bad, good...)[:platRows-1]
	}
	plat := make([]objectLine, 0, len(shown))
	for _, o := range shown {
		r := o.Name
		if o.Namespace != "" {
			r = o.Namespace + "/" + o.Name
		}
		plat = append(plat, objectLine{o.Kind, r, o.Status, o.Message})
	}
	m.objectRows(p, plat)
	if n := len(st.Objects) - len(shown); n > 0 {
		p.line(m.st.faint.Render(fmt.Sprintf("   … %d more, current", n)))
	}
	p.lines = append(p.lines, details.lines...)
	p.blank()
	title := fmt.Sprintf("Projects (%d)", len(st.Projects))
	if s.filter != "" || s.filtering {
		title = fmt.Sprintf("Projects (%d of %d match)", len(shownProjects), len(st.Projects))
	}
	p.line(m.st.header.Render(title))
	if s.filtering || s.filter != "" {
		cur := ""
		if s.filtering {
			cur = "▏"
		}
		p.line("  /" + s.filter + cur + m.st.faint.Render("  (enter keeps the filter, esc clears it)"))
	}
	switch {
	case len(st.Projects) == 0:
		if m.opts.ReadOnly {
			p.line(m.st.faint.Render("  none yet"))
		} else {
			p.line(m.st.faint.Render("  none yet; n makes one"))
		}
	case len(shownProjects) == 0:
		p.line(m.st.faint.Render("  no project matches /" + s.filter))
	default:
		cols := m.projectColumns(shownProjects, p.width)
		trows := make([]table.Row, len(shownProjects))
		for i, pr := range shownProjects {
			a := "-"
			if c := pr.Created; !c.IsZero() {
				a = human.Age(m.opts.Now().Sub(c))
			}
			reasons := projectReasons(pr)
			state := pr.State
			if i-s.sel < 2*rows && s.sel-i < 2*rows {
				state = m.projectState(pr.State).Render(state) // styled only where the table can show it
			}
			trows[i] = table.Row{ref(pr), state, pr.Stack, fmt.Sprintf("%4s", a), reasons}
		}
		p.addTable(m.renderTable(&s.table, cols, trows, s.sel, p.width, max(rows-len(p.lines)-4, 4)))
		if why := s.hiddenSel(); why != "" {
			// No row is selected: the note saying why is what the page
			// keeps in view (with the rows above it), as it would the
			// selected row, so a project gone or filtered away never
			// leaves the table scrolled out of sight.
			p.hang(m.st.faint.Render("  "+why), 4)
			p.markFocus()
		}
	}
	p.pinned = append(p.pinned, acts.pinned...)
}

// inspectDetails is the inspect screen's lines under the platform objects:
// a partial removal, tenants, tokens, the entry, isolation and access.
func (m *Model) inspectDetails(p *page, st *engine.ClusterStatus) {
	if st.PartlyRemoved != "" {
		p.hang(m.st.warn.Render("! Partly removed: "+st.PartlyRemoved), 2)
	}
	p.hang(fmt.Sprintf("Tenants  %s", strings.Join(st.Tenants, ", ")), 9)
	switch {
	case st.TokenProblem != "":
		p.hang("Tokens   "+m.st.warn.Render("! "+st.TokenProblem), 11)
	case st.TokenDir != "":
		p.hang("Tokens   "+m.st.ok.Render("✓")+" "+st.TokenDir, 11)
	}
	if fd := st.FrontDoor; fd != nil {
		mode := fd.Mode
		if mode == "" {
			mode = "unset"
		}
		switch {
		case fd.Ready && fd.DNS != "":
			p.hang(fmt.Sprintf("Entry    %s %s %s; DNS: %s", m.st.ok.Render("✓"), mode, fd.Address, fd.DNS), 9)
		case fd.Ready:
			p.hang(fmt.Sprintf("Entry    %s %s %s", m.st.ok.Render("✓"), mode, fd.Address), 9)
		default:
			p.hang("Entry    "+mode+": "+m.st.warn.Render(fd.Message), 9)
		}
	}
	if iso := st.Isolation; iso != nil {
		text := "network isolation " + iso.String()
		if iso.State == engine.IsolationEnforced {
			p.hang("Isolation "+m.st.ok.Render("✓")+" "+text, 10)
		} else {
			p.hang("Isolation "+m.st.warn.Render("! "+text), 10)
		}
	}
	if a := st.Access; a != nil {
		if a.Problem != "" {
			p.hang("Access   "+m.st.warn.Render("! "+a.Mode+": "+a.Problem), 9)
		} else {
			counts := map[string]int{}
			kiln := 0
			for _, en := range a.Entries {
				counts[en.Kind]++
				if en.Kiln {
					kiln++
				}
			}
			p.hang(fmt.Sprintf("Access   %s: %d admin, %d viewer, %d node, %d other (%d made by kiln)", a.Mode,
				counts[engine.AccessAdmin], counts[engine.AccessViewer], counts[engine.AccessNode], counts[engine.AccessOther], kiln), 9)
		}
	}
}

// inspectActions ends both inspect screens (pinned): the actions, each
// that would change nothing on the project marked with why; the reason
// the last key did nothing; or the question a pending action asks.
func (m *Model) inspectActions(p *page, projects []engine.ProjectStatus) {
	s := m.insp
	a := s.ask
	if a == nil {
		pr := s.selected()
		if m.screen == screenProject {
			pr = s.project()
		}
		var parts []string
		acts := []keyHelp{{"s", "start"}, {"p", "suspend"}, {"r", "restack"}, {"t", "rotate token"}, {"x", "delete"}}
		if m.opts.ReadOnly {
			acts = nil
			parts = append(parts, m.st.faint.Render("read-only: no start, suspend, restack, rotate token or delete"))
		} else if m.screen == screenInspect {
			parts = append(parts, m.actions([]keyHelp{{"n", "new project"}}))
		}
		for _, k := range acts {
			op := map[string]string{"s": engine.ProjectStart, "p": engine.ProjectSuspend, "r": engine.ProjectRestack, "t": engine.ProjectRotateToken, "x": engine.ProjectDelete}[k.key]
			if pr == nil || m.disabled(op, pr) != "" {
				// Disabled: no key brackets, and said in words, so it
				// reads as unavailable without colour too.
				parts = append(parts, m.st.faint.Render("("+k.desc+": n/a)"))
				continue
			}
			parts = append(parts, m.actions([]keyHelp{k}))
		}
		if m.screen == screenInspect && len(projects) > 0 {
			parts = append(parts, m.actions([]keyHelp{{"enter", "details"}}))
		}
		parts = append(parts, m.actions([]keyHelp{{"esc", "back"}}))
		if s.note != "" {
			p.pin(m.st.warn.Render("! " + s.note))
		} else if pr != nil && !m.opts.ReadOnly {
			var why []string
			for _, op := range []string{engine.ProjectStart, engine.ProjectSuspend, engine.ProjectRestack} {
				if w := m.disabled(op, pr); w != "" {
					why = append(why, w)
				}
			}
			if len(why) > 0 {
				p.pin(m.st.faint.Render(strings.Join(why, " · ")))
			}
		}
		p.pinParts(parts)
		return
	}
	switch {
	case a.op == engine.ProjectRestack:
		p.pin(m.st.warn.Render(fmt.Sprintf("Restack %s from %s onto ‹ %s ›?", a.ref, a.from, a.stacks[a.stackSel])) +
			m.st.faint.Render(fmt.Sprintf("  ←/→ stack (%d of %d) · enter/y: restack · esc/n: cancel", a.stackSel+1, len(a.stacks))))
	case a.op == engine.ProjectRotateToken:
		p.pin(m.st.warn.Render(fmt.Sprintf("Rotate the token of project %s?", a.ref)) +
			m.st.faint.Render("  a new token is made and the Deployment rolls to it; the old one stops working once it runs (a failed roll keeps it) · enter/y: rotate · esc/n: cancel"))
	default:
		verb := map[string]string{engine.ProjectStart: "Start", engine.ProjectSuspend: "Suspend"}[a.op]
		p.pin(m.st.warn.Render(fmt.Sprintf("%s project %s?", verb, a.ref)) + m.st.faint.Render("  enter/y: "+a.op+" · esc/n: cancel"))
	}
}

func (m *Model) projectState(state string) lipgloss.Style {
	switch state {
	case "running":
		return m.st.ok
	case "failed", "degraded":
		return m.st.fail
	case "suspended":
		return m.st.faint
	}
	return m.st.progress
}

// openObjects opens the platform objects in full: every one (the screen
// shows the first few), each with its whole reference and message.
func (m *Model) openObjects() {
	st := m.insp
	if st.data == nil {
		st.note = "objects: the cluster has not been read yet"
		return
	}
	var lines []string
	for _, o := range st.data.Objects {
		r := o.Name
		if o.Namespace != "" {
			r = o.Namespace + "/" + o.Name
		}
		line := fmt.Sprintf("%s %s: %s", o.Kind, r, o.Status)
		if o.Message != "" {
			line += " — " + o.Message
		}
		lines = append(lines, line)
	}
	m.detail = &detailView{title: "platform objects of " + st.target.Name, lines: lines}
}

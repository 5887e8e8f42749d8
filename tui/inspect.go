package tui

import (
	"context"
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/table"
	tea "charm.land/bubbletea/v2"

	"github.com/kilnctl/kiln/engine"
)

// DefaultInspectEvery is how often the inspect screens re-read the cluster.
const DefaultInspectEvery = 3 * time.Second

// Watcher is a Backend that keeps the inspect screens live from watches
// (engine.Watch): fn gets a fresh read after every change, until ctx ends.
// A backend without it is re-read every Options.InspectEvery.
type Watcher interface {
	Watch(ctx context.Context, t Target, fn func(*Inspection, error)) error
}

// Inspection is one read of a cluster for the inspect screens.
type Inspection struct {
	Status *engine.ClusterStatus
	// Stacks are the stack names kiln-config lists, in order (restack).
	Stacks []string
}

// ProjectOp is one project operation the inspect screens run.
type ProjectOp struct {
	// Op is engine.ProjectStart, engine.ProjectSuspend or
	// engine.ProjectRestack.
	Op string
	// Ref is TENANT/PROJECT.
	Ref   string
	Stack string
}

// inspectState is the inspect screens' state. It survives a project
// operation's run view, so going back lands on the same project.
type inspectState struct {
	target  Target
	data    *Inspection
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
	// stop ends the watch of a Watcher backend (nil when polling).
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
		data *Inspection
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
	if s.data == nil || s.data.Status == nil {
		return nil
	}
	all := s.data.Status.Projects
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
	if s.data == nil || s.data.Status == nil {
		return nil
	}
	return s.data.Status.Projects
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

func (m *Model) openInspect(t Target) tea.Cmd {
	m.closeInspect()
	m.insp = &inspectState{target: t, table: m.newTable()}
	m.screen, m.help = screenInspect, false
	if w, ok := m.opts.Backend.(Watcher); ok {
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

// watchInspect starts the backend's watch once for the inspect screens:
// every read it delivers replaces the one waiting (only the newest
// matters), and a command waits for the next one.
func (m *Model) watchInspect(w Watcher) tea.Cmd {
	s := m.insp
	ctx, cancel := context.WithCancel(context.Background())
	s.stop, s.loading, s.since = cancel, true, m.opts.Now()
	s.gen++
	gen, t := s.gen, s.target
	ch := make(chan inspectMsg, 1)
	m.ops.Add(1)
	go func() {
		defer m.ops.Done()
		err := w.Watch(ctx, t, func(d *Inspection, err error) {
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
	}()
	return waitInspect(ctx, ch)
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
	s, b := m.insp, m.opts.Backend
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

func (m *Model) inspectResult(msg inspectMsg) tea.Cmd {
	s := m.insp
	if s == nil || msg.gen != s.gen {
		return nil
	}
	s.loading = false
	if msg.err != nil {
		s.err = msg.err.Error() // keep the last good read on screen
	} else {
		s.data, s.err, s.updated = msg.data, "", m.opts.Now()
	}
	s.follow()
	if msg.watch != nil {
		// The cluster changed: the project screen's Events may have too
		// (Events are not watched; they are read again on a change).
		events := m.readEvents()
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
	op := ProjectOp{Op: a.op, Ref: a.ref}
	if a.op == engine.ProjectRestack {
		if len(a.stacks) == 0 {
			return nil
		}
		op.Stack = a.stacks[a.stackSel]
	}
	return m.startOn(t.Provider, opProject, a.op+" "+a.ref, t.Location, func(ctx context.Context, b Backend, br *Bridge) error {
		return b.Project(ctx, t, op, br, br)
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

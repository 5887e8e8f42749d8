// Package tui is kiln's Bubble Tea wizard. One top-level Model owns all
// state: a small enum of screens, the focus within each, and the state of
// the running operation. Work happens in commands and in the engine's
// goroutine; engine events and questions arrive as messages through the
// Bridge. Every screen is rendered in view.go, every key handled here.
package tui

import (
	"context"
	"sync"
	"time"

	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/config"
)

// Cluster is one row of the home screen.
type Cluster = engine.ClusterSummary

// CreateRequest is what the create form collects.
type CreateRequest struct {
	Provider, Name, Location, ConfigPath string
}

// Target names one existing cluster.
type Target struct {
	Provider, Name, Location string
}

// Backend runs the engine for the wizard. Calls that take a Sink and a
// Confirmer run the engine with them; all are called from commands, never
// from Update.
type Backend interface {
	// Locations lists the kubeconfig contexts and the current one.
	Locations() (names []string, current string, err error)
	// Clusters discovers the kiln clusters across every location.
	Clusters(ctx context.Context) ([]Cluster, error)
	Create(ctx context.Context, req CreateRequest, sink engine.Sink, confirm engine.Confirmer) error
	// Status reads a cluster's live state for the inspect screens, quietly
	// (no events): it is called every few seconds.
	Status(ctx context.Context, t Target) (*Inspection, error)
	// Project runs one project operation (start, suspend, restack).
	Project(ctx context.Context, t Target, op ProjectOp, sink engine.Sink, confirm engine.Confirmer) error
	Destroy(ctx context.Context, t Target, sink engine.Sink, confirm engine.Confirmer) error
}

type screen int

const (
	screenHome screen = iota
	screenCreate
	screenDiscover
	screenContinue
	screenRun
	screenFinal
	screenDestroy
	screenInspect
	screenProject
)

type opKind int

const (
	opCreate opKind = iota
	opDestroy
	opProject
)

// mutating reports whether cancelling the operation needs a confirmation.
// Every operation the wizard runs changes the cluster.
func (k opKind) mutating() bool { return true }

func (k opKind) String() string {
	switch k {
	case opCreate:
		return "create"
	case opProject:
		return "project"
	}
	return "destroy"
}

// Options configure a Model.
type Options struct {
	Backend Backend
	// Bridge is the engine's sink and confirmer for this program.
	Bridge *Bridge
	// Now is the clock (default time.Now); tests fix it.
	Now func() time.Time
	// Static disables the spinner's animation (golden tests).
	Static bool
	// Record keeps every event received, for the parity test.
	Record bool
	// InspectEvery is how often the inspect screens re-read the cluster
	// (default DefaultInspectEvery).
	InspectEvery time.Duration
}

// Model is the wizard's single top-level model.
type Model struct {
	opts   Options
	st     styles
	width  int
	height int
	screen screen
	help   bool
	frame  int

	// home
	clusters    []Cluster
	homeErr     string
	homeLoading bool
	homeSel     int

	// create form
	contexts  []string
	ctxSel    int
	nameIn    textinput.Model
	configIn  textinput.Model
	formFocus int // 0 name, 1 context, 2 config file, 3 create button
	nameErr   string
	formErr   string

	// confirmations the engine is waiting for
	contAsk    *continueAsk
	contFocus  int // 0 continue, 1 cancel
	destAsk    *destroyAsk
	destIn     textinput.Model
	destErr    string
	askCancel  bool
	cancelling bool

	run  *runState
	insp *inspectState

	recorded []engine.Event
	// ops counts operations whose engine call has not returned.
	ops sync.WaitGroup
}

type (
	tickMsg     struct{}
	clustersMsg struct {
		clusters []Cluster
		err      error
	}
	locationsMsg struct {
		names   []string
		current string
		err     error
	}
)

// New returns the wizard's model.
func New(opts Options) *Model {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	m := &Model{opts: opts, st: newStyles(), width: 80, height: 24}
	m.nameIn = newInput("dev1")
	m.configIn = newInput("(optional) path to a ClusterConfig file")
	m.destIn = newInput("")
	return m
}

func newInput(placeholder string) textinput.Model {
	in := textinput.New()
	in.Prompt = ""
	in.Placeholder = placeholder
	in.SetVirtualCursor(false)
	in.SetWidth(44)
	return in
}

// Init starts discovery for the home screen.
func (m *Model) Init() tea.Cmd {
	return tea.Batch(m.refresh(), m.loadLocations(), m.tick())
}

func (m *Model) tick() tea.Cmd {
	if m.opts.Static {
		return nil
	}
	return tea.Tick(120*time.Millisecond, func(time.Time) tea.Msg { return tickMsg{} })
}

func (m *Model) refresh() tea.Cmd {
	b := m.opts.Backend
	if b == nil {
		return nil
	}
	m.homeLoading = true
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cs, err := b.Clusters(ctx)
		return clustersMsg{clusters: cs, err: err}
	}
}

func (m *Model) loadLocations() tea.Cmd {
	b := m.opts.Backend
	if b == nil {
		return nil
	}
	return func() tea.Msg {
		names, cur, err := b.Locations()
		return locationsMsg{names: names, current: cur, err: err}
	}
}

// Update handles every message; it never does I/O.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		return m, nil
	case tickMsg:
		m.frame++
		return m, m.tick()
	case clustersMsg:
		m.homeLoading = false
		m.clusters, m.homeErr = msg.clusters, ""
		if msg.err != nil {
			m.homeErr = msg.err.Error()
		}
		m.homeSel = clamp(m.homeSel, 0, len(m.clusters)-1)
		return m, nil
	case locationsMsg:
		m.setLocations(msg)
		return m, nil
	case eventsMsg:
		m.ingest(msg)
		return m, nil
	case continueAsk:
		m.contAsk, m.contFocus = &msg, 1 // focus starts on Cancel
		m.screen = screenContinue
		return m, nil
	case destroyAsk:
		m.destAsk, m.destErr = &msg, ""
		m.destIn.Reset()
		m.screen = screenDestroy
		return m, m.destIn.Focus()
	case opDoneMsg:
		return m, m.finishRun(msg.err)
	case inspectMsg:
		return m, m.inspectResult(msg)
	case inspectTickMsg:
		return m, m.inspectTick(msg)
	case tea.KeyPressMsg:
		return m, m.key(msg)
	}
	// Anything else (paste, blink) goes to the focused input.
	return m, m.updateFocusedInput(msg)
}

func (m *Model) setLocations(msg locationsMsg) {
	m.contexts = msg.names
	m.ctxSel = 0
	for i, n := range msg.names {
		if n == msg.current {
			m.ctxSel = i
		}
	}
	if msg.err != nil {
		m.formErr = msg.err.Error()
	}
}

func (m *Model) updateFocusedInput(msg tea.Msg) tea.Cmd {
	var cmd tea.Cmd
	switch {
	case m.screen == screenCreate && m.formFocus == 0:
		m.nameIn, cmd = m.nameIn.Update(msg)
		m.validateName()
	case m.screen == screenCreate && m.formFocus == 2:
		m.configIn, cmd = m.configIn.Update(msg)
	case m.screen == screenDestroy:
		m.destIn, cmd = m.destIn.Update(msg)
	}
	return cmd
}

func (m *Model) validateName() {
	m.nameErr = ""
	if v := m.nameIn.Value(); v != "" {
		if err := config.ValidateName(v); err != nil {
			m.nameErr = err.Error()
		}
	}
}

// key dispatches a key press: global keys first, then the screen's.
func (m *Model) key(k tea.KeyPressMsg) tea.Cmd {
	s := k.String()
	if s == "ctrl+c" {
		return m.interrupt()
	}
	if m.askCancel {
		switch s {
		case "y", "Y":
			m.askCancel, m.cancelling = false, true
			m.run.cancel()
		case "n", "N", "esc", "q":
			m.askCancel = false
		}
		return nil
	}
	typing := m.typing()
	if s == "?" && !typing {
		m.help = !m.help
		return nil
	}
	if m.help && (s == "esc" || s == "q") {
		m.help = false
		return nil
	}
	switch m.screen {
	case screenHome:
		return m.homeKey(s)
	case screenCreate:
		return m.createKey(k, s)
	case screenContinue:
		return m.continueKey(s)
	case screenDestroy:
		return m.destroyKey(k, s)
	case screenDiscover, screenRun:
		return m.runKey(s)
	case screenInspect, screenProject:
		return m.inspectKey(s)
	case screenFinal:
		if s == "esc" || s == "q" || s == "enter" {
			return m.goHome()
		}
	}
	return nil
}

// typing reports whether keys go to a text input (so q and ? are text).
func (m *Model) typing() bool {
	return m.screen == screenCreate && (m.formFocus == 0 || m.formFocus == 2) || m.screen == screenDestroy
}

// interrupt handles Ctrl-C: a mutating run asks first, a read-only one is
// cancelled at once, and outside a run the wizard quits.
func (m *Model) interrupt() tea.Cmd {
	r := m.run
	if r != nil && r.running {
		if r.kind.mutating() && !m.askCancel {
			m.askCancel = true
			return nil
		}
		m.askCancel, m.cancelling = false, true
		r.cancel()
		return nil
	}
	return tea.Quit
}

func (m *Model) goHome() tea.Cmd {
	m.screen, m.help, m.run, m.insp = screenHome, false, nil, nil
	return m.refresh()
}

func (m *Model) homeKey(s string) tea.Cmd {
	switch s {
	case "q", "esc":
		return tea.Quit
	case "up", "k":
		m.homeSel = clamp(m.homeSel-1, 0, len(m.clusters)-1)
	case "down", "j":
		m.homeSel = clamp(m.homeSel+1, 0, len(m.clusters)-1)
	case "n":
		return m.openCreate()
	case "r":
		return m.refresh()
	case "c", "enter", "i", "d":
		if len(m.clusters) == 0 {
			if s == "enter" {
				return m.openCreate()
			}
			return nil
		}
		c := m.clusters[m.homeSel]
		if c.Name == "" {
			return nil // an unreachable context: nothing to act on
		}
		t := Target{Provider: c.Provider, Name: c.Name, Location: c.Location}
		switch s {
		case "c":
			// Continue goes through create: the engine finds the platform
			// installed and asks, so the user sees what continuing means.
			return m.start(opCreate, c.Name, c.Location, func(ctx context.Context, b Backend, br *Bridge) error {
				return b.Create(ctx, CreateRequest{Provider: c.Provider, Name: c.Name, Location: c.Location}, br, br)
			})
		case "d":
			return m.start(opDestroy, c.Name, c.Location, func(ctx context.Context, b Backend, br *Bridge) error {
				return b.Destroy(ctx, t, br, br)
			})
		default:
			return m.openInspect(t)
		}
	}
	return nil
}

func (m *Model) openCreate() tea.Cmd {
	m.screen, m.formFocus, m.formErr, m.nameErr = screenCreate, 0, "", ""
	m.nameIn.Reset()
	m.configIn.Reset()
	m.configIn.Blur()
	return m.nameIn.Focus()
}

func (m *Model) createKey(k tea.KeyPressMsg, s string) tea.Cmd {
	switch s {
	case "esc":
		m.screen = screenHome
		m.nameIn.Blur()
		m.configIn.Blur()
		return nil
	case "tab", "down":
		return m.focusForm(m.formFocus + 1)
	case "shift+tab", "up":
		return m.focusForm(m.formFocus - 1)
	case "enter":
		if m.formFocus < 3 {
			return m.focusForm(m.formFocus + 1)
		}
		return m.submitCreate()
	}
	if m.formFocus == 1 {
		switch s {
		case "left", "h":
			m.ctxSel = clamp(m.ctxSel-1, 0, len(m.contexts)-1)
		case "right", "l", "space":
			m.ctxSel = clamp(m.ctxSel+1, 0, len(m.contexts)-1)
		case "q":
			m.screen = screenHome
		}
		return nil
	}
	if m.formFocus == 3 {
		if s == "q" {
			m.screen = screenHome
		}
		return nil
	}
	return m.updateFocusedInput(k)
}

func (m *Model) focusForm(i int) tea.Cmd {
	m.formFocus = (i + 4) % 4
	m.nameIn.Blur()
	m.configIn.Blur()
	switch m.formFocus {
	case 0:
		return m.nameIn.Focus()
	case 2:
		return m.configIn.Focus()
	}
	return nil
}

func (m *Model) submitCreate() tea.Cmd {
	name := m.nameIn.Value()
	if err := config.ValidateName(name); err != nil {
		m.nameErr = err.Error()
		return m.focusForm(0)
	}
	if len(m.contexts) == 0 {
		m.formErr = "no kubeconfig context to create in; set KUBECONFIG or pass --kubeconfig"
		return nil
	}
	req := CreateRequest{Provider: "kube", Name: name, Location: m.contexts[m.ctxSel], ConfigPath: m.configIn.Value()}
	m.nameIn.Blur()
	m.configIn.Blur()
	return m.start(opCreate, req.Name, req.Location, func(ctx context.Context, b Backend, br *Bridge) error {
		return b.Create(ctx, req, br, br)
	})
}

// start begins an operation: the engine runs in a command, reporting
// through the bridge, which queues the operation's end behind its events.
func (m *Model) start(kind opKind, name, location string, op func(context.Context, Backend, *Bridge) error) tea.Cmd {
	ctx, cancel := context.WithCancel(context.Background())
	m.run = newRunState(kind, name, location, cancel, m.opts.Now())
	m.askCancel, m.cancelling, m.help = false, false, false
	m.screen = screenRun
	if kind == opCreate {
		m.screen = screenDiscover
	}
	b, br := m.opts.Backend, m.opts.Bridge
	if b == nil || br == nil {
		return nil
	}
	m.ops.Add(1)
	return func() tea.Msg {
		defer m.ops.Done()
		err := op(ctx, b, br)
		br.Done(err)
		return nil
	}
}

func (m *Model) finishRun(err error) tea.Cmd {
	r := m.run
	if r == nil {
		return nil
	}
	r.running = false
	r.cancel()
	m.askCancel = false
	if r.result == nil && err != nil {
		r.result = &engine.Event{Type: engine.TypeResult, Message: err.Error(), ExitCode: 1}
	}
	if m.screen == screenContinue || m.screen == screenDestroy || m.screen == screenDiscover {
		m.screen = screenRun
	}
	if r.kind == opCreate && r.result != nil && r.result.OK {
		m.screen = screenFinal
	}
	return nil
}

func (m *Model) continueKey(s string) tea.Cmd {
	switch s {
	case "left", "right", "tab", "shift+tab", "h", "l":
		m.contFocus = 1 - m.contFocus
	case "enter", "space":
		m.answerContinue(m.contFocus == 0)
	case "esc", "q":
		m.answerContinue(false)
	}
	return nil
}

func (m *Model) answerContinue(ok bool) {
	if m.contAsk != nil {
		m.contAsk.reply <- ok
		m.contAsk = nil
	}
	m.screen = screenRun
}

func (m *Model) destroyKey(k tea.KeyPressMsg, s string) tea.Cmd {
	switch s {
	case "esc":
		m.answerDestroy(false)
		return nil
	case "enter":
		if m.destAsk != nil && m.destIn.Value() != m.destAsk.q.Name {
			m.destErr = "type the cluster name exactly to confirm, or Esc to cancel"
			return nil
		}
		m.answerDestroy(true)
		return nil
	}
	return m.updateFocusedInput(k)
}

func (m *Model) answerDestroy(ok bool) {
	if m.destAsk != nil {
		m.destAsk.reply <- ok
		m.destAsk = nil
	}
	m.destIn.Blur()
	m.screen = screenRun
}

func (m *Model) runKey(s string) tea.Cmd {
	r := m.run
	if r == nil {
		return nil
	}
	switch s {
	case "esc", "q":
		if !r.running {
			if r.kind == opProject && m.insp != nil {
				// Back to the project the operation ran on, re-read.
				m.run, m.screen = nil, screenInspect
				if m.insp.ref != "" {
					m.screen = screenProject
				}
				return m.restartInspect()
			}
			return m.goHome()
		}
	case "tab":
		r.focusLog = !r.focusLog
	case "up", "k":
		r.scroll(-1)
	case "down", "j":
		r.scroll(1)
	case "pgup":
		r.scroll(-10)
	case "pgdown":
		r.scroll(10)
	case "end", "G":
		r.logOffset, r.resOffset = 0, 0
	}
	return nil
}

// inspectKey handles the inspect table and the project detail screen,
// and the confirmation of a project operation on either.
func (m *Model) inspectKey(s string) tea.Cmd {
	st := m.insp
	if a := st.ask; a != nil {
		switch s {
		case "left", "h":
			a.stackSel = clamp(a.stackSel-1, 0, len(a.stacks)-1)
		case "right", "l", "tab":
			a.stackSel = clamp(a.stackSel+1, 0, len(a.stacks)-1)
		case "y", "Y", "enter":
			return m.runProject()
		case "n", "N", "esc", "q":
			st.ask = nil
		}
		return nil
	}
	p := st.selected()
	if m.screen == screenProject {
		p = st.project()
	}
	switch s {
	case "esc", "q":
		if m.screen == screenProject {
			m.screen, st.ref = screenInspect, ""
			return nil
		}
		return m.goHome()
	case "up", "k":
		st.sel = clamp(st.sel-1, 0, len(st.projects())-1)
	case "down", "j":
		st.sel = clamp(st.sel+1, 0, len(st.projects())-1)
	case "enter":
		if m.screen == screenInspect && p != nil {
			m.screen, st.ref = screenProject, ref(*p)
		}
	case "s":
		m.askProject(engine.ProjectStart, p)
	case "p":
		m.askProject(engine.ProjectSuspend, p)
	case "r":
		m.askProject(engine.ProjectRestack, p)
	}
	return nil
}

// Recorded returns the events received so far (Options.Record).
func (m *Model) Recorded() []engine.Event { return m.recorded }

func clamp(v, lo, hi int) int {
	if hi < lo {
		return lo
	}
	return max(lo, min(v, hi))
}

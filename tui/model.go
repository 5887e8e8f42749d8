// Package tui is kiln's Bubble Tea wizard. One top-level Model owns all
// state: a small enum of screens, the focus within each, and the state of
// the running operation. Work happens in commands and in the engine's
// goroutine; engine events and questions arrive as messages through the
// Bridge. Every screen is rendered in view.go, every key handled here.
package tui

import (
	"sync"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/spinner"
	"charm.land/bubbles/v2/table"
	"charm.land/bubbles/v2/textinput"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/kilnctl/kiln/engine"
)

// Cluster is one row of the home screen.
type Cluster = engine.ClusterSummary

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
	// The upgrade and rotate key screens (upgrade.go, rotate.go).
	screenUpgrade
	screenUpgradePlan
	screenRotate
	screenRotateConfirm
	// The new project form and a project's delete confirmation
	// (projectops.go).
	screenProjectNew
	screenProjectDelete
)

type opKind int

const (
	opCreate opKind = iota
	opDestroy
	opProject
	opUpgrade
	opRotate
)

func (k opKind) String() string {
	switch k {
	case opCreate:
		return "create"
	case opProject:
		return "project"
	case opUpgrade:
		return "upgrade"
	case opRotate:
		return "rotate-key"
	}
	return "destroy"
}

// Options configure a Model.
type Options struct {
	// Ops runs the engine for the wizard (the CLI's).
	Ops Ops
	// Bridge is the engine's sink and confirmer for this program.
	Bridge *Bridge
	// Now is the clock (default time.Now); tests fix it.
	Now func() time.Time
	// Static disables the spinner's animation (golden tests).
	Static bool
	// Record keeps every event received, for the parity test.
	Record bool
	// InspectEvery is how often the inspect screens re-read the cluster
	// (default DefaultInspectEvery) when Ops is no Watcher.
	InspectEvery time.Duration
	// ReadOnly offers no action that changes a cluster on the inspect
	// screens (kiln inspect --read-only).
	ReadOnly bool
	// Inspect, when set, opens the inspect screen of this cluster at
	// start (kiln inspect PROVIDER NAME); with InspectOnly, leaving it
	// quits instead of going to the home screen.
	Inspect     *engine.ClusterRef
	InspectOnly bool
}

// Model is the wizard's single top-level model.
type Model struct {
	opts   Options
	st     styles
	width  int
	height int
	// sized says the terminal's size is known (the first WindowSizeMsg
	// arrived): a later one is a resize.
	sized  bool
	screen screen
	help   bool
	// spin is the one spinner every in-progress line shows (bubbles'
	// spinner; still under Options.Static).
	spin spinner.Model

	// scroll is how far the current screen's body is scrolled when it does
	// not fit; it resets when the screen changes. maxScroll is the last
	// render's bound (a render cache, written by View).
	scroll     int
	maxScroll  int
	prevScreen screen
	// detail, when set, is a full-text view over the current screen (a
	// resource row or the whole log, wrapped); Esc closes it.
	detail *detailView
	// askQuit is Ctrl-C outside a run asking before the wizard quits.
	askQuit bool

	// home
	clusters    []Cluster
	homeErr     string
	homeLoading bool
	homeSel     int
	homeTable   table.Model
	homeLoaded  bool   // the first discovery arrived (initial selection made)
	homeNote    string // why the last key did nothing
	// regions are the locations the discovery searches
	// (aws regions), as they go; homeGen numbers discoveries.
	regions []regionState
	homeGen int

	// create form
	contexts []string
	ctxSel   int
	nameIn   textinput.Model
	configIn textinput.Model
	tokenIn  textinput.Model
	// The aws fields of the create form (provider aws): formAWS selects
	// them, awsErr is the aws provider's check of what is typed.
	formAWS    bool
	regionIn   textinput.Model
	nodesIn    textinput.Model
	instanceIn textinput.Model
	profileIn  textinput.Model
	awsErr     string
	awsErrIn   engine.Input
	// formFocus is the focused field: fieldName … fieldButton.
	formFocus int
	nameErr   string
	formErr   string
	// cfgCheck is the config file field's check (decoded off the render
	// loop, in a command, with the engine's decoder).
	cfgCheck cfgCheck

	// confirmations the engine is waiting for
	contAsk    *continueAsk
	contFocus  int // 0 continue, 1 cancel
	destAsk    *destroyAsk
	destIn     textinput.Model
	destErr    string
	askCancel  bool
	cancelling bool

	run *runState
	// lastRun is the last finished run, which home's l opens again;
	// runReopened says the run view shows it again, opened from runBack.
	lastRun     *runState
	runReopened bool
	runBack     screen
	insp        *inspectState
	day2        dayTwo

	recorded []engine.Event
	// ops counts operations whose engine call has not returned.
	ops sync.WaitGroup
}

// detailView is a full-text view of something the current screen shows
// cut short.
type detailView struct {
	title string
	lines []string
	// vp shows the lines, wrapped to the terminal, scrolled with ↑/↓,
	// pgup/pgdn, home/end.
	vp viewport.Model
}

// cfgCheck is the result of checking the config file field.
type cfgCheck struct {
	path, name string
	// problems are the decoder's errors, one per field ("" path for the
	// file itself); empty when the file is valid.
	problems []string
	pending  bool
}

type (
	clustersMsg struct {
		clusters []Cluster
		err      error
	}
	locationsMsg struct {
		names   []string
		current string
		err     error
	}
	cfgCheckMsg struct {
		path, name string
		problems   []string
	}
)

// New returns the wizard's model.
func New(opts Options) *Model {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	m := &Model{opts: opts, st: newStyles(), width: 80, height: 24}
	m.spin = spinner.New(spinner.WithSpinner(spinner.Spinner{Frames: spinner.MiniDot.Frames, FPS: 120 * time.Millisecond}), spinner.WithStyle(m.st.progress))
	m.nameIn = m.newInput("e.g. dev1")
	m.configIn = m.newInput("(optional) path to a ClusterConfig file")
	m.tokenIn = m.newInput("(optional) default: kiln's state dir")
	m.regionIn = m.newInput("e.g. eu-west-1")
	m.nodesIn = m.newInput("(optional) default: 2")
	m.instanceIn = m.newInput("(optional) default: t3.medium")
	m.profileIn = m.newInput("(optional) default credential chain")
	m.destIn = m.newInput("")
	m.homeTable = m.newTable()
	m.fitInputs()
	return m
}

func (m *Model) newInput(placeholder string) textinput.Model {
	in := textinput.New()
	in.Prompt = ""
	in.Placeholder = placeholder
	in.SetVirtualCursor(false)
	// Placeholders are faint and italic, and worded ("e.g.", "(optional)"),
	// so they read as hints without colour too (NO_COLOR).
	st := in.Styles()
	st.Focused.Placeholder = m.st.placeholder
	st.Blurred.Placeholder = m.st.placeholder
	st.Blurred.Text = lipgloss.NewStyle()
	in.SetStyles(st)
	return in
}

// fitInputs sizes the text inputs to the terminal: a label column of 15,
// the rest for the value.
func (m *Model) fitInputs() {
	w := clamp(m.width-16, 8, 60)
	m.nameIn.SetWidth(w)
	m.configIn.SetWidth(w)
	m.tokenIn.SetWidth(w)
	m.regionIn.SetWidth(w)
	m.nodesIn.SetWidth(w)
	m.instanceIn.SetWidth(w)
	m.profileIn.SetWidth(w)
	m.destIn.SetWidth(clamp(m.width-5, 8, 60))
	m.fitDayTwo()
}

// Init starts discovery for the home screen.
func (m *Model) Init() tea.Cmd {
	if t := m.opts.Inspect; t != nil {
		cmd := m.openInspect(*t)
		if m.opts.InspectOnly {
			return tea.Batch(cmd, m.tick())
		}
		return tea.Batch(cmd, m.refresh(), m.loadLocations(), m.tick())
	}
	return tea.Batch(m.refresh(), m.loadLocations(), m.tick())
}

// tick starts the spinner (it then ticks itself); Static keeps it still.
func (m *Model) tick() tea.Cmd {
	if m.opts.Static {
		return nil
	}
	return m.spin.Tick
}

func (m *Model) refresh() tea.Cmd {
	b := m.opts.Ops
	if b == nil {
		return nil
	}
	m.homeLoading = true
	return m.refreshWithProgress(b)
}

func (m *Model) loadLocations() tea.Cmd {
	b := m.opts.Ops
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
	cmd := m.update(msg)
	if c := m.syncFeed(); c != nil {
		cmd = tea.Batch(cmd, c)
	}
	if m.screen != m.prevScreen {
		m.prevScreen, m.scroll, m.detail = m.screen, 0, nil
	}
	return m, cmd
}

func (m *Model) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		resized := m.sized && (msg.Width != m.width || msg.Height != m.height)
		m.width, m.height, m.sized = msg.Width, msg.Height, true
		m.fitInputs()
		if resized {
			return repaintAfterResize()
		}
		return nil
	case spinner.TickMsg:
		var cmd tea.Cmd
		m.spin, cmd = m.spin.Update(msg)
		return cmd
	case clustersMsg:
		m.homeLoading = false
		m.clusters, m.homeErr = msg.clusters, ""
		if msg.err != nil {
			m.homeErr = msg.err.Error()
		}
		if !m.homeLoaded {
			// Start on a cluster that can be acted on, not on an
			// unreachable context.
			m.homeLoaded, m.homeSel = true, 0
			for i, c := range m.clusters {
				if c.Err == "" && c.Name != "" {
					m.homeSel = i
					break
				}
			}
		}
		m.homeSel = clamp(m.homeSel, 0, len(m.clusters)-1)
		return nil
	case locationsMsg:
		m.setLocations(msg)
		return nil
	case cfgCheckMsg:
		if msg.path == m.cfgCheck.path && msg.name == m.cfgCheck.name {
			m.cfgCheck.problems, m.cfgCheck.pending = msg.problems, false
		}
		return nil
	case eventsMsg:
		m.ingest(msg)
		return nil
	case continueAsk:
		m.contAsk, m.contFocus = &msg, 1 // focus starts on Cancel
		m.screen = screenContinue
		return nil
	case destroyAsk:
		m.destAsk, m.destErr = &msg, ""
		m.destIn.Reset()
		m.screen = screenDestroy
		return m.destIn.Focus()
	case opDoneMsg:
		return m.finishRun(msg.err)
	case inspectMsg:
		return m.inspectResult(msg)
	case tea.MouseWheelMsg:
		return m.wheel(msg)
	case inspectTickMsg:
		return m.inspectTick(msg)
	case searchMsg:
		return m.searchProgress(msg)
	case feedEventsMsg:
		return m.feedEvents(msg)
	case feedLogMsg:
		return m.feedLog(msg)
	case tea.KeyPressMsg:
		return m.key(msg)
	case dayTwoMsg:
		return msg.applyTo(m)
	}
	// Anything else (paste, blink) goes to the focused input.
	return m.updateFocusedInput(msg)
}

// resetScrollRegion is DECSTBM with no margins: the scroll region becomes
// the whole screen, whatever its size.
var resetScrollRegion = ansi.SetTopBottomMargins(0, 0)

// repaintAfterResize resets the terminal's scroll region, then repaints
// the whole screen. Bubble Tea's renderer scrolls parts of the screen
// with DECSTBM and afterwards sets the region back to rows 1 to the
// height it believes the terminal has. A terminal resizes its screen
// before the program hears of it (tmux holds a pane's resize back for up
// to 250ms), so a frame drawn in between leaves a region shorter than the
// grown screen; the renderer's repaint after the resize does not reset
// it, and its later scrolls then move only part of the screen (a
// question's buttons vanished, another screen's key help stayed at the
// bottom). DECSTBM also homes the cursor, which the renderer does not
// know, so the full repaint comes after it.
func repaintAfterResize() tea.Cmd {
	return tea.Sequence(tea.Raw(resetScrollRegion), tea.ClearScreen)
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
	case m.screen == screenCreate && m.formFocus == fieldName:
		m.nameIn, cmd = m.nameIn.Update(msg)
		m.validateName()
		return tea.Batch(cmd, m.checkConfig())
	case m.screen == screenCreate && m.formFocus == fieldConfig:
		m.configIn, cmd = m.configIn.Update(msg)
		return tea.Batch(cmd, m.checkConfig())
	case m.screen == screenCreate && m.formFocus == fieldTokenDir:
		m.tokenIn, cmd = m.tokenIn.Update(msg)
	case m.screen == screenCreate && m.formFocus == fieldRegion:
		m.regionIn, cmd = m.regionIn.Update(msg)
		m.checkAWS()
	case m.screen == screenCreate && m.formFocus == fieldNodes:
		m.nodesIn, cmd = m.nodesIn.Update(msg)
		m.checkAWS()
	case m.screen == screenCreate && m.formFocus == fieldInstance:
		m.instanceIn, cmd = m.instanceIn.Update(msg)
		m.checkAWS()
	case m.screen == screenCreate && m.formFocus == fieldProfile:
		m.profileIn, cmd = m.profileIn.Update(msg)
	case m.screen == screenDestroy:
		m.destIn, cmd = m.destIn.Update(msg)
	case dayTwoScreen(m.screen):
		cmd = m.dayTwoInput(msg)
	case m.screen == screenProjectNew:
		cmd = m.newProjectInput(msg)
	case m.screen == screenProjectDelete:
		cmd = m.deleteProjectInput(msg)
	}
	return cmd
}

// key dispatches a key press: global keys first, then the screen's.
// globalKeys work on every screen: ? help, ctrl+c, the answers to the
// quit and cancel questions, and the keys of the help and in-full views.
var globalKeys = struct {
	Help, Interrupt, Yes, No, Close, CloseDetail, PageDown key.Binding
}{
	Help:        key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
	Interrupt:   key.NewBinding(key.WithKeys("ctrl+c")),
	Yes:         key.NewBinding(key.WithKeys("y", "Y")),
	No:          key.NewBinding(key.WithKeys("n", "N", "esc", "q")),
	Close:       key.NewBinding(key.WithKeys("esc", "q")),
	CloseDetail: key.NewBinding(key.WithKeys("esc", "q", "enter")),
	PageDown:    key.NewBinding(key.WithKeys("space")),
}

func (m *Model) key(k tea.KeyPressMsg) tea.Cmd {
	g, s := globalKeys, k.String()
	m.homeNote = ""
	if m.askQuit {
		m.askQuit = false
		if key.Matches(k, g.Yes, g.Interrupt) {
			return tea.Quit
		}
		return nil
	}
	if key.Matches(k, g.Interrupt) {
		return m.interrupt()
	}
	if m.askCancel {
		switch {
		case key.Matches(k, g.Yes):
			m.askCancel, m.cancelling = false, true
			m.run.userCancel = true
			m.run.cancel()
		case key.Matches(k, g.No):
			m.askCancel = false
		}
		return nil
	}
	// ? is help on every screen, also in a text field: it never types
	// (paste puts a ? into a field).
	if key.Matches(k, g.Help) {
		m.help, m.scroll = !m.help, 0
		return nil
	}
	if m.help {
		if key.Matches(k, g.Close) {
			m.help = false
		} else {
			m.scrollKey(s)
		}
		return nil
	}
	if m.detail != nil {
		v := &m.detail.vp
		switch {
		case key.Matches(k, g.CloseDetail):
			m.detail = nil
		case key.Matches(k, g.PageDown):
			v.PageDown()
		default:
			scrollViewport(v, s)
		}
		return nil
	}
	switch m.screen {
	case screenHome:
		return m.homeKey(k)
	case screenCreate:
		return m.createKey(k)
	case screenContinue:
		return m.continueKey(k)
	case screenDestroy:
		return m.destroyKey(k)
	case screenDiscover, screenRun:
		return m.runKey(k)
	case screenInspect, screenProject:
		return m.inspectKey(k)
	case screenProjectNew:
		return m.newProjectKey(k)
	case screenProjectDelete:
		return m.deleteProjectKey(k)
	case screenUpgrade, screenUpgradePlan, screenRotate, screenRotateConfirm:
		return m.dayTwoKey(k)
	case screenFinal:
		return m.finalKey(k)
	}
	return nil
}

// scrollKey scrolls the body of a screen that does not fit.
func (m *Model) scrollKey(s string) {
	k, sk := keyName(s), scrollKeys
	switch {
	case key.Matches(k, sk.Up):
		m.scroll--
	case key.Matches(k, sk.Down):
		m.scroll++
	case key.Matches(k, sk.PageUp):
		m.scroll -= max(m.height-4, 1)
	case key.Matches(k, sk.PageDown, sk.Space):
		m.scroll += max(m.height-4, 1)
	case key.Matches(k, sk.Top):
		m.scroll = 0
	case key.Matches(k, sk.Bottom):
		m.scroll = m.maxScroll
	}
	m.scroll = clamp(m.scroll, 0, m.maxScroll)
}

// scrollViewport moves v for a scroll key (arrows or j/k, page up/down,
// home/g, end/G) and reports whether s was one.
func scrollViewport(v *viewport.Model, s string) bool {
	k, sk := keyName(s), scrollKeys
	switch {
	case key.Matches(k, sk.Up):
		v.ScrollUp(1)
	case key.Matches(k, sk.Down):
		v.ScrollDown(1)
	case key.Matches(k, sk.PageUp):
		v.PageUp()
	case key.Matches(k, sk.PageDown):
		v.PageDown()
	case key.Matches(k, sk.Top):
		v.GotoTop()
	case key.Matches(k, sk.Bottom):
		v.GotoBottom()
	default:
		return false
	}
	return true
}

// typing reports whether keys go to a text input (so q is text).
func (m *Model) typing() bool {
	return m.screen == screenCreate && m.formFocus != fieldProvider && m.formFocus != fieldContext && m.formFocus != fieldButton || m.screen == screenDestroy
}

// interrupt handles Ctrl-C: at a question it answers no (nothing changes);
// a mutating run asks first, then cancels; outside a run the wizard asks
// before quitting.
func (m *Model) interrupt() tea.Cmd {
	r := m.run
	switch {
	case m.screen == screenContinue && m.contAsk != nil:
		m.answerContinue(false)
		return nil
	case m.screen == screenDestroy && m.destAsk != nil:
		m.answerDestroy(false)
		return nil
	case m.dayTwoAsking():
		m.answerDayTwo(false)
		return nil
	case r != nil && r.running:
		// Every operation the wizard runs changes the cluster: a cancel
		// asks first.
		if !m.askCancel {
			m.askCancel = true
			return nil
		}
		m.askCancel, m.cancelling = false, true
		r.userCancel = true
		r.cancel()
		return nil
	}
	m.askQuit = true
	return nil
}

// wheel scrolls with the mouse wheel: the project table's selection on the
// inspect screen, otherwise the screen's text.
func (m *Model) wheel(msg tea.MouseWheelMsg) tea.Cmd {
	key := ""
	switch msg.Button {
	case tea.MouseWheelUp:
		key = "up"
	case tea.MouseWheelDown:
		key = "down"
	default:
		return nil
	}
	switch {
	case m.screen == screenInspect && m.insp != nil && m.insp.ask == nil:
		d := map[string]int{"up": -1, "down": 1}[key]
		m.insp.moveSel(d)
	case m.screen == screenRun && m.run != nil:
		return m.runKey(tea.KeyPressMsg{Code: map[string]rune{"up": tea.KeyUp, "down": tea.KeyDown}[key]})
	default:
		m.scrollKey(map[string]string{"up": "pgup", "down": "pgdown"}[key])
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

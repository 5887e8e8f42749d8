// Package tui is kiln's Bubble Tea wizard. One top-level Model owns all
// state: a small enum of screens, the focus within each, and the state of
// the running operation. Work happens in commands and in the engine's
// goroutine; engine events and questions arrive as messages through the
// Bridge. Every screen is rendered in view.go, every key handled here.
package tui

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/spinner"
	"charm.land/bubbles/v2/table"
	"charm.land/bubbles/v2/textinput"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/internal/exit"
)

// Cluster is one row of the home screen.
type Cluster = engine.ClusterSummary

// CreateRequest is what the create form collects.
type CreateRequest struct {
	// Location is the kube context, or the AWS region.
	Provider, Name, Location, ConfigPath string
	// The aws provider's node group and credentials (provider aws): 0
	// nodes and "" instance type are the provider's defaults; "" profile
	// is the default credential chain.
	Nodes        int
	InstanceType string
	Profile      string
	// TokenDir is the form's Token dir field ("" for the default and the
	// keyring's entry).
	TokenDir string
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
	// DayTwo upgrades a platform and rotates its key.
	DayTwo
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
	// (default DefaultInspectEvery) when the backend is no Watcher.
	InspectEvery time.Duration
	// ReadOnly offers no action that changes a cluster on the inspect
	// screens (kiln inspect --read-only).
	ReadOnly bool
	// Inspect, when set, opens the inspect screen of this cluster at
	// start (kiln inspect PROVIDER NAME); with InspectOnly, leaving it
	// quits instead of going to the home screen.
	Inspect     *Target
	InspectOnly bool
}

// Model is the wizard's single top-level model.
type Model struct {
	opts   Options
	st     styles
	width  int
	height int
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
	// regions are the locations a SearchReporter's discovery searches
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

// AWSChecker is a Backend that checks the create form's aws fields as
// they are typed, with the aws provider's own rules (no AWS call): nil, or
// an engine.InputError naming the field.
type AWSChecker interface {
	CheckAWS(req CreateRequest) error
}

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
	b := m.opts.Backend
	if b == nil {
		return nil
	}
	m.homeLoading = true
	if r, ok := b.(SearchReporter); ok {
		return m.refreshWithProgress(r)
	}
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
		m.width, m.height = msg.Width, msg.Height
		m.fitInputs()
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

// key dispatches a key press: global keys first, then the screen's.
func (m *Model) key(k tea.KeyPressMsg) tea.Cmd {
	s := k.String()
	m.homeNote = ""
	if m.askQuit {
		m.askQuit = false
		if s == "y" || s == "Y" || s == "ctrl+c" {
			return tea.Quit
		}
		return nil
	}
	if s == "ctrl+c" {
		return m.interrupt()
	}
	if m.askCancel {
		switch s {
		case "y", "Y":
			m.askCancel, m.cancelling = false, true
			m.run.userCancel = true
			m.run.cancel()
		case "n", "N", "esc", "q":
			m.askCancel = false
		}
		return nil
	}
	// ? is help on every screen, also in a text field: it never types
	// (paste puts a ? into a field).
	if s == "?" {
		m.help, m.scroll = !m.help, 0
		return nil
	}
	if m.help {
		if s == "esc" || s == "q" {
			m.help = false
		} else {
			m.scrollKey(s)
		}
		return nil
	}
	if m.detail != nil {
		v := &m.detail.vp
		switch s {
		case "esc", "q", "enter":
			m.detail = nil
		case "space":
			v.PageDown()
		default:
			scrollViewport(v, s)
		}
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
		if st := m.insp; st.ask == nil && !st.filtering {
			p := st.selected()
			if m.screen == screenProject {
				p = st.project()
			}
			st.note = ""
			if cmd, ok := m.projectLifecycleKey(k, p); ok {
				return cmd
			}
		}
		return m.inspectKey(s)
	case screenProjectNew:
		return m.newProjectKey(k)
	case screenProjectDelete:
		return m.deleteProjectKey(k)
	case screenUpgrade, screenUpgradePlan, screenRotate, screenRotateConfirm:
		return m.dayTwoKey(k)
	case screenFinal:
		if t, ok := m.finalTarget(); ok {
			switch {
			case key.Matches(k, finalKeys.Inspect):
				return m.openInspect(t)
			case key.Matches(k, clusterKeys.Upgrade), key.Matches(k, clusterKeys.Rotate):
				return m.dayTwoKeyPress(s, t, nil)
			}
		}
		switch s {
		case "esc", "q", "enter":
			return m.goHome()
		case "l":
			// The run's log and resources; Esc comes back here.
			m.screen, m.runBack, m.runReopened = screenRun, screenFinal, true
		default:
			m.scrollKey(s)
		}
	}
	return nil
}

// scrollKey scrolls the body of a screen that does not fit.
func (m *Model) scrollKey(s string) {
	switch s {
	case "up", "k":
		m.scroll--
	case "down", "j":
		m.scroll++
	case "pgup":
		m.scroll -= max(m.height-4, 1)
	case "pgdown", "space":
		m.scroll += max(m.height-4, 1)
	case "home", "g":
		m.scroll = 0
	case "end", "G":
		m.scroll = m.maxScroll
	}
	m.scroll = clamp(m.scroll, 0, m.maxScroll)
}

// scrollViewport moves v for a scroll key (arrows or j/k, page up/down,
// home/g, end/G) and reports whether s was one.
func scrollViewport(v *viewport.Model, s string) bool {
	switch s {
	case "up", "k":
		v.ScrollUp(1)
	case "down", "j":
		v.ScrollDown(1)
	case "pgup":
		v.PageUp()
	case "pgdown":
		v.PageDown()
	case "home", "g":
		v.GotoTop()
	case "end", "G":
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

func (m *Model) goHome() tea.Cmd {
	if m.opts.InspectOnly {
		// kiln inspect: the inspector is the whole program.
		m.closeInspect()
		return tea.Quit
	}
	m.closeInspect()
	m.screen, m.help, m.run, m.insp = screenHome, false, nil, nil
	return m.refresh()
}

func (m *Model) homeKey(s string) tea.Cmd {
	switch s {
	case "q":
		return tea.Quit
	case "esc":
		return nil // Esc goes back; home is the first screen, so it stays
	case "up", "k":
		m.homeSel = clamp(m.homeSel-1, 0, len(m.clusters)-1)
	case "down", "j":
		m.homeSel = clamp(m.homeSel+1, 0, len(m.clusters)-1)
	case "n":
		return m.openCreate(true)
	case "r":
		return m.refresh()
	case "l":
		if m.lastRun == nil {
			m.homeNote = "no run yet in this session: the last run's log opens here after one"
			return nil
		}
		m.run, m.screen, m.runBack, m.runReopened = m.lastRun, screenRun, screenHome, true
		return nil
	case "pgup", "pgdown", "home", "end":
		m.scrollKey(s)
	case "c", "enter", "i", "d", "u", "K":
		if len(m.clusters) == 0 {
			if s == "enter" {
				return m.openCreate(true)
			}
			m.homeNote = "no kiln cluster to act on: press n to create one, or r to search again"
			return nil
		}
		c := m.clusters[m.homeSel]
		if c.Name == "" {
			verb := map[string]string{"c": "continue", "enter": "inspect", "i": "inspect", "d": "destroy", "u": "upgrade", "K": "rotate the key of"}[s]
			noun := locationNoun(c.Provider)
			if c.Err != "" {
				m.homeNote = fmt.Sprintf("%s %s is unreachable, so there is no cluster to %s there; fix the %s (the error is above) and press r to search again", noun, c.Location, verb, noun)
			} else {
				m.homeNote = fmt.Sprintf("%s %s has no kiln cluster to %s; press n to create one", noun, c.Location, verb)
			}
			return nil
		}
		t := Target{Provider: c.Provider, Name: c.Name, Location: c.Location}
		if isDayTwoKey(s) {
			return m.dayTwoKeyPress(s, t, c.KeyIDs)
		}
		switch s {
		case "c":
			// Continue goes through create: the engine finds the platform
			// installed and asks, so the user sees what continuing means.
			return m.startOn(c.Provider, opCreate, c.Name, c.Location, func(ctx context.Context, b Backend, br *Bridge) error {
				return b.Create(ctx, CreateRequest{Provider: c.Provider, Name: c.Name, Location: c.Location}, br, br)
			})
		case "d":
			return m.startDestroy(t)
		default:
			return m.openInspect(t)
		}
	}
	return nil
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

func (m *Model) createKey(k tea.KeyPressMsg, s string) tea.Cmd {
	m.formErr = "" // said for the last Create; the fields say the rest
	switch s {
	case "esc":
		m.screen = screenHome
		m.blurForm()
		return nil
	case "tab", "down":
		return m.focusForm(m.nextField(1))
	case "shift+tab", "up":
		return m.focusForm(m.nextField(-1))
	case "pgup", "pgdown":
		m.scrollKey(s)
		return nil
	case "enter":
		if m.formFocus < fieldButton {
			return m.focusForm(m.nextField(1))
		}
		return m.submitCreate()
	}
	switch m.formFocus {
	case fieldProvider:
		switch s {
		case "left", "right", "h", "l", "space":
			m.formAWS = !m.formAWS
			if m.formAWS && m.regionIn.Value() == "" {
				if r := m.awsRegions(); len(r) > 0 {
					m.regionIn.SetValue(r[0])
				}
			}
			m.checkAWS()
		case "q":
			m.screen = screenHome
		}
		return nil
	case fieldContext:
		switch s {
		case "left", "h":
			m.ctxSel = clamp(m.ctxSel-1, 0, len(m.contexts)-1)
		case "right", "l", "space":
			m.ctxSel = clamp(m.ctxSel+1, 0, len(m.contexts)-1)
		case "q":
			m.screen = screenHome
		}
		return nil
	case fieldButton:
		if s == "q" {
			m.screen = screenHome
		}
		return nil
	}
	return m.updateFocusedInput(k)
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

// awsRequest is the aws part of the form as a request (Nodes -1 when
// the field is not a number).
func (m *Model) awsRequest() CreateRequest {
	req := CreateRequest{Provider: "aws", Name: m.nameIn.Value(), Location: strings.TrimSpace(m.regionIn.Value()),
		InstanceType: strings.TrimSpace(m.instanceIn.Value()), Profile: strings.TrimSpace(m.profileIn.Value())}
	if v := strings.TrimSpace(m.nodesIn.Value()); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			n = -1
		}
		req.Nodes = n
	}
	return req
}

// checkAWS checks the aws fields with the backend's aws rules as they are
// typed (no AWS call).
func (m *Model) checkAWS() {
	m.awsErr, m.awsErrIn = "", ""
	if !m.formAWS {
		return
	}
	req := m.awsRequest()
	if strings.TrimSpace(m.nodesIn.Value()) != "" && (req.Nodes < 1) {
		m.awsErr, m.awsErrIn = fmt.Sprintf("Nodes: %q is not a node count; a node group has 1 to 100 nodes", m.nodesIn.Value()), engine.InputNodes
		return
	}
	c, ok := m.opts.Backend.(AWSChecker)
	if !ok {
		return
	}
	if err := c.CheckAWS(req); err != nil {
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
// creating cluster name in the chosen context: it is unreachable, it hosts
// another kiln cluster, or name lives in another context. note is what
// the form says otherwise (name is installed there: create continues it).
func (m *Model) contextProblem(name string) (problem, note string) {
	if len(m.contexts) == 0 {
		return "", ""
	}
	ctx := m.contexts[m.ctxSel]
	for _, c := range m.clusters {
		if c.Provider != "kube" {
			continue // the form creates in kubeconfig contexts
		}
		switch {
		case c.Location == ctx && c.Err != "":
			problem = fmt.Sprintf("context %s is unreachable: %s", ctx, c.Err)
		case c.Location == ctx && c.Name != "" && name != "" && c.Name != name:
			problem = fmt.Sprintf("context %s already hosts kiln cluster %s; a context hosts one kiln platform: choose another context (←/→)", ctx, c.Name)
		case c.Location != ctx && c.Name != "" && c.Name == name:
			problem = fmt.Sprintf("cluster %s already exists in context %s (a NAME is unique across contexts): choose that context, or another name", name, c.Location)
		case c.Location == ctx && c.Name != "" && c.Name == name:
			note = fmt.Sprintf("cluster %s is installed here: Create asks before continuing it", name)
		}
		if problem != "" {
			return problem, ""
		}
	}
	return "", note
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
	req := CreateRequest{Provider: "kube", Name: name, Location: m.contexts[m.ctxSel],
		ConfigPath: strings.TrimSpace(m.configIn.Value()), TokenDir: strings.TrimSpace(m.tokenIn.Value())}
	m.blurForm()
	cmd := m.start(opCreate, req.Name, req.Location, func(ctx context.Context, b Backend, br *Bridge) error {
		return b.Create(ctx, req, br, br)
	})
	m.run.fromForm = true
	return cmd
}

// submitAWS creates an EKS cluster with the form's aws fields.
func (m *Model) submitAWS(name string) tea.Cmd {
	m.checkAWS()
	req := m.awsRequest()
	switch {
	case req.Location == "":
		m.formErr = "type a region (like eu-west-1) in the Region field"
		return m.focusForm(fieldRegion)
	case m.awsErr != "":
		m.formErr = "fix the aws fields first (marked ✗ above)"
		return m.focusForm(map[engine.Input]int{engine.InputRegion: fieldRegion, engine.InputNodes: fieldNodes, engine.InputInstanceType: fieldInstance}[m.awsErrIn])
	case m.cfgCheck.pending || len(m.cfgCheck.problems) > 0:
		m.formErr = "fix the Config file field first (marked ✗ above)"
		return m.focusForm(fieldConfig)
	}
	req.ConfigPath, req.TokenDir = strings.TrimSpace(m.configIn.Value()), strings.TrimSpace(m.tokenIn.Value())
	m.blurForm()
	cmd := m.start(opCreate, req.Name, req.Location, func(ctx context.Context, b Backend, br *Bridge) error {
		return b.Create(ctx, req, br, br)
	})
	m.run.fromForm, m.run.provider = true, "aws"
	return cmd
}

// start begins an operation: the engine runs in a command, reporting
// through the bridge, which queues the operation's end behind its events.
func (m *Model) start(kind opKind, name, location string, op func(context.Context, Backend, *Bridge) error) tea.Cmd {
	ctx, cancel := context.WithCancel(context.Background())
	m.run = newRunState(kind, name, location, cancel, m.opts.Now())
	m.askCancel, m.cancelling, m.help, m.runReopened = false, false, false, false
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

// startDestroy destroys cluster t: the engine asks first (the typed
// name), so a rerun from the run view asks again too.
func (m *Model) startDestroy(t Target) tea.Cmd {
	cmd := m.startOn(t.Provider, opDestroy, t.Name, t.Location, func(ctx context.Context, b Backend, br *Bridge) error {
		return b.Destroy(ctx, t, br, br)
	})
	m.run.target = t
	return cmd
}

// startOn is start of an operation on a cluster of provider (the run
// view names it).
func (m *Model) startOn(provider string, kind opKind, name, location string, op func(context.Context, Backend, *Bridge) error) tea.Cmd {
	cmd := m.start(kind, name, location, op)
	m.run.provider = provider
	return cmd
}

func (m *Model) finishRun(err error) tea.Cmd {
	r := m.run
	if r == nil {
		return nil
	}
	r.running = false
	r.cancel()
	m.askCancel, m.cancelling = false, false
	m.lastRun = r
	if r.result == nil && err != nil {
		r.result = &engine.Event{Type: engine.TypeResult, Message: err.Error(), ExitCode: 1}
	}
	if m.screen == screenContinue || m.screen == screenDestroy || m.screen == screenDiscover || m.screen == screenUpgradePlan || m.screen == screenRotateConfirm {
		m.screen = screenRun
	}
	if r.kind == opCreate && r.result != nil && r.result.OK {
		m.screen = screenFinal
	}
	if r.kind == opProject && m.insp != nil {
		// Re-read now, so the project screen is fresh when the user goes
		// back (it shows "refreshing…" until the read lands).
		return m.restartInspect()
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
	default:
		m.scrollKey(s)
	}
	return nil
}

func (m *Model) answerContinue(ok bool) {
	if m.contAsk != nil {
		m.contAsk.reply <- ok
		m.contAsk = nil
	}
	if !ok && m.run != nil {
		m.run.userCancel = true
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
	case "pgup", "pgdown", "up", "down":
		m.scrollKey(s)
		return nil
	}
	return m.updateFocusedInput(k)
}

func (m *Model) answerDestroy(ok bool) {
	if m.destAsk != nil {
		m.destAsk.reply <- ok
		m.destAsk = nil
	}
	if !ok && m.run != nil {
		m.run.userCancel = true
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
		if r.running {
			return nil
		}
		if m.runReopened {
			// Opened again with l: back where it was opened.
			m.runReopened = false
			if m.runBack == screenFinal {
				m.screen = screenFinal
				return nil
			}
			return m.goHome()
		}
		switch {
		case r.kind == opProject && m.insp != nil:
			// Back to the project the operation ran on, re-read (the read
			// started when the run ended; it may still be under way).
			return m.returnToInspect()
		case r.kind == opCreate && r.fromForm && !r.userCancel:
			// A failed create keeps the form as it was typed; bad input
			// (exit 2) is said again where it is fixed.
			m.run = nil
			cmd := m.openCreate(false)
			if r.result != nil && r.result.ExitCode == exit.BadInput {
				m.formErr = "Create failed: " + r.result.Message
			}
			return cmd
		case r.kind == opUpgrade || r.kind == opRotate:
			return m.backFromDayTwo(r)
		}
		return m.goHome()
	case "d":
		if r.destroyAgain() {
			// Every step of destroy is idempotent: running it again
			// finishes what the ended run began.
			m.runReopened = false
			return m.startDestroy(r.target)
		}
	case "enter":
		m.openRunDetail()
	case "tab":
		r.focusLog = !r.focusLog
	case "up", "k":
		r.scroll(-1)
	case "down", "j":
		r.scroll(1)
	case "pgup", "pgdown":
		// The log pages; otherwise the view itself scrolls when it does
		// not fit, else the resources page.
		d := map[string]int{"pgup": -10, "pgdown": 10}[s]
		if !r.focusLog && m.maxScroll > 0 {
			m.scrollKey(s)
			return nil
		}
		r.scroll(d)
	case "end", "G":
		r.logOffset = 0
		r.resSel = max(len(r.resources)-1, 0)
	case "home", "g":
		r.logOffset, r.resSel = len(r.logs), 0
	}
	return nil
}

// openRunDetail opens the selected resource, or the whole log, in full.
func (m *Model) openRunDetail() {
	r := m.run
	if !r.focusLog && len(r.resources) > 0 {
		res := r.resources[clamp(r.resSel, 0, len(r.resources)-1)]
		ref := res.name
		if res.namespace != "" {
			ref = res.namespace + "/" + res.name
		}
		lines := []string{"Kind     " + res.kind, "Name     " + ref, "Status   " + res.status}
		if res.message != "" {
			lines = append(lines, "Message  "+res.message)
		}
		m.detail = &detailView{title: res.kind + " " + ref, lines: lines}
		return
	}
	lines := append([]string(nil), r.logs...)
	if r.result != nil {
		lines = append(lines, "", "Result (exit "+fmt.Sprint(r.result.ExitCode)+"): "+r.result.Message)
	}
	m.detail = &detailView{title: "log of " + r.kind.String() + " " + r.name, lines: lines}
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
	st.note = ""
	if st.filtering {
		return m.filterKey(s)
	}
	p := st.selected()
	if m.screen == screenProject {
		p = st.project()
		if m.paneKey(s) {
			return nil
		}
	}
	if m.opts.ReadOnly && (s == "s" || s == "p" || s == "r" || isDayTwoKey(s)) {
		st.note = "read-only: this inspector changes nothing (kiln inspect --read-only)"
		return nil
	}
	if isDayTwoKey(s) {
		var keyIDs []string
		if st.data != nil && st.data.Status != nil {
			keyIDs = st.data.Status.KeyIDs
		}
		return m.dayTwoKeyPress(s, st.target, keyIDs)
	}
	switch s {
	case "/":
		if m.screen == screenInspect {
			st.filtering = true
		}
		return nil
	case "esc", "q":
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
	case "up", "k":
		if m.screen == screenProject {
			m.scrollKey(s)
			return nil
		}
		st.moveSel(-1)
	case "down", "j":
		if m.screen == screenProject {
			m.scrollKey(s)
			return nil
		}
		st.moveSel(1)
	case "pgup", "pgdown":
		m.scrollKey(s)
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

// filterKey types the project table's filter (/): enter keeps it, esc
// clears it, backspace deletes.
func (m *Model) filterKey(s string) tea.Cmd {
	st := m.insp
	switch s {
	case "enter":
		st.filtering = false
	case "esc":
		st.filtering, st.filter = false, ""
	case "backspace":
		if r := []rune(st.filter); len(r) > 0 {
			st.filter = string(r[:len(r)-1])
		}
	case "space":
		st.filter += " "
	default:
		if r := []rune(s); len(r) == 1 {
			st.filter += s
		}
	}
	st.follow()
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
		return m.runKey(key)
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

package tui

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kilnctl/kiln/engine/event"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/internal/human"
)

// maxLogLines bounds the log the run view keeps; the oldest lines go first.
// Phases, resources and the result are never dropped.
const maxLogLines = 2000

type phaseRow struct {
	name      event.Phase
	state     event.State
	message   string
	started   time.Time
	elapsedMS int64
}

type resourceRow struct {
	kind, namespace, name string
	status                event.Status
	message               string
}

// runState is what the run view shows of one operation; it is built only
// from engine events.
type runState struct {
	kind     opKind
	name     string
	location string
	// provider is "aws" for a create of the form's aws provider ("" is
	// kube).
	provider  string
	started   time.Time
	running   bool
	cancel    context.CancelFunc
	phases    []phaseRow
	resources []resourceRow
	resIndex  map[string]int
	logs      []string
	found     []engine.ClusterInfo
	decision  string
	reason    string
	result    *event.ResultEvent
	// failures counts failed phases and resources seen (never dropped).
	failures int
	events   int

	// userCancel says the user chose to stop the operation (declined a
	// question, or confirmed Ctrl-C): its end is a cancel, not a failure.
	userCancel bool
	// fromForm says the create form started it: a failed create goes back
	// to the form as it was typed.
	fromForm bool
	// target is the cluster a destroy run is about (what d runs again).
	target engine.ClusterRef

	focusLog  bool
	logOffset int // lines scrolled up from the bottom
	resSel    int // the selected resource row
}

func newRunState(kind opKind, name, location string, cancel context.CancelFunc, now time.Time) *runState {
	return &runState{kind: kind, name: name, location: location, cancel: cancel, started: now, running: true, resIndex: map[string]int{}}
}

// destroyAgain reports whether the run view offers to run an ended
// destroy again: it was cancelled or failed after the user confirmed it
// (not declined, a Confirm failure, and not bad input, which a rerun meets
// again). The rerun asks again and finishes what this run began.
func (r *runState) destroyAgain() bool {
	if r.kind != opDestroy || r.running || r.result == nil || r.result.OK || r.target.Name == "" {
		return false
	}
	k := r.failed()
	return k != failure.Confirm && k != failure.Input
}

// failed is the kind of the run's failed result (failure.None while it
// runs or when it succeeded).
func (r *runState) failed() failure.Kind {
	if r.result == nil || r.result.OK {
		return failure.None
	}
	return failure.Of(r.result.Err)
}

// FailureWords names a failure's kind in the wizard's words, in parentheses
// after a failed result's message ("✗ MESSAGE (timed out)"). The wizard
// shows no exit number: those are the CLI's (internal/exit, DESIGN.md §4),
// and the wizard exits with none of them.
func FailureWords(k failure.Kind) string {
	switch k {
	case failure.Input:
		return "bad input"
	case failure.Confirm:
		return "not confirmed"
	case failure.Locked:
		return "locked"
	case failure.Timeout:
		return "timed out"
	case failure.Interrupted:
		return "interrupted"
	}
	return "failed"
}

// ingest applies a batch of events to the running operation.
func (m *Model) ingest(evs []engine.Event) {
	if m.opts.Record {
		m.recorded = append(m.recorded, evs...)
	}
	r := m.run
	if r == nil {
		return
	}
	for _, ev := range evs {
		r.apply(ev, m.opts.Now())
		if p, ok := ev.Payload.(event.PhaseEvent); ok && m.screen == screenDiscover && p.Phase != event.PhaseDiscover {
			m.screen = screenRun
		}
	}
}

func (r *runState) apply(ev engine.Event, now time.Time) {
	r.events++
	switch p := ev.Payload.(type) {
	case event.PhaseEvent:
		row := r.phase(p.Phase)
		if row == nil {
			r.phases = append(r.phases, phaseRow{name: p.Phase, started: now})
			row = &r.phases[len(r.phases)-1]
		}
		row.state, row.message = p.State, p.Message
		if p.State == event.Started {
			row.started, row.elapsedMS = now, 0
		} else {
			row.elapsedMS = p.ElapsedMS
		}
		if p.State == event.Failed {
			r.failures++
		}
	case event.DiscoveryEvent:
		r.found = p.Clusters
	case event.DecisionEvent:
		r.decision, r.reason = p.Decision, p.Reason
		r.addLog("→ " + p.Decision + ": " + p.Reason)
	case event.ResourceEvent:
		key := p.Kind + "/" + p.Namespace + "/" + p.Name
		row := resourceRow{kind: p.Kind, namespace: p.Namespace, name: p.Name, status: p.Status, message: p.Message}
		if i, ok := r.resIndex[key]; ok {
			r.resources[i] = row
		} else {
			r.resIndex[key] = len(r.resources)
			r.resources = append(r.resources, row)
		}
		if p.Status == event.StatusFailed {
			r.failures++
		}
	case event.LogEvent:
		msg := p.Message
		if p.Level != event.LevelInfo && p.Level != "" {
			msg = string(p.Level) + ": " + msg
		}
		r.addLog(msg)
	case event.PlanEvent:
		r.addLog(planLogLine(p))
	case event.ResultEvent:
		r.result = &p
	}
}

func (r *runState) addLog(s string) {
	for _, line := range strings.Split(s, "\n") {
		r.logs = append(r.logs, line)
	}
	// Trim in chunks so a flood of log lines costs amortised O(1) each.
	if len(r.logs) > maxLogLines+maxLogLines/2 {
		r.logs = append(r.logs[:0], r.logs[len(r.logs)-maxLogLines:]...)
	}
}

func (r *runState) scroll(d int) {
	if r.focusLog {
		// Up (negative d) scrolls back in the log.
		r.logOffset = clamp(r.logOffset-d, 0, len(r.logs)-1)
		return
	}
	r.resSel = clamp(r.resSel+d, 0, len(r.resources)-1)
}

// phase returns the named phase row, if seen.
func (r *runState) phase(name event.Phase) *phaseRow {
	for i := range r.phases {
		if r.phases[i].name == name {
			return &r.phases[i]
		}
	}
	return nil
}

// start begins an operation: op asks Ops for it, and the engine runs it
// in a command, reporting through the bridge, which queues the
// operation's end behind its events.
func (m *Model) start(kind opKind, name, location string, op func(Ops) Op) tea.Cmd {
	ctx, cancel := context.WithCancel(context.Background())
	m.run = newRunState(kind, name, location, cancel, m.opts.Now())
	m.askCancel, m.cancelling, m.help, m.runReopened = false, false, false, false
	m.screen = screenRun
	if kind == opCreate {
		m.screen = screenDiscover
	}
	ops, br := m.opts.Ops, m.opts.Bridge
	if ops == nil || br == nil {
		return nil
	}
	run := op(ops)
	m.ops.Add(1)
	return func() tea.Msg {
		defer m.ops.Done()
		err := run(ctx, br, br)
		br.Done(err)
		return nil
	}
}

// startOn is start of an operation on a cluster of provider (the run
// view names it).
func (m *Model) startOn(provider string, kind opKind, name, location string, op func(Ops) Op) tea.Cmd {
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
		// The operation ended before the engine gave a result: a failure,
		// whatever err's kind (the wizard never read it as more).
		r.result = &event.ResultEvent{Err: failure.Wrap(failure.Failed, err), Message: err.Error()}
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

// runKeys are the run view's keys: they dispatch (runKey) and the footer
// and ? help list them (runBindings). ctrl+c (Cancel) is the model's, for
// every screen.
var runKeys = struct {
	Back, Again, Open, Focus, Up, Down, Select, Page, End, Home, Cancel key.Binding
}{
	Back:   key.NewBinding(key.WithKeys("esc", "q"), key.WithHelp("esc", "back")),
	Again:  key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "destroy again")),
	Open:   key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "in full")),
	Focus:  key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "resources/log")),
	Up:     key.NewBinding(key.WithKeys("up", "k")),
	Down:   key.NewBinding(key.WithKeys("down", "j")),
	Select: key.NewBinding(key.WithKeys("up", "k", "down", "j"), key.WithHelp("↑/↓", "select/scroll")),
	Page:   key.NewBinding(key.WithKeys("pgup", "pgdown"), key.WithHelp("pgup/pgdn", "page")),
	End:    key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("end", "follow")),
	Home:   key.NewBinding(key.WithKeys("home", "g")),
	Cancel: key.NewBinding(key.WithKeys("ctrl+c"), key.WithHelp("ctrl+c", "cancel")),
}

// runBindings are the run view's keys as the footer shows them: while it
// runs, and once it has ended (d when destroy can run again).
func (m *Model) runBindings() []key.Binding {
	k := runKeys
	if m.run != nil && !m.run.running {
		bs := []key.Binding{k.Back, k.Select, k.Focus, k.Open, k.Page}
		if m.run.destroyAgain() {
			bs = append([]key.Binding{k.Again}, bs...)
		}
		return bs
	}
	return []key.Binding{k.Select, k.Focus, k.Open, k.End, k.Cancel}
}

// discoverBindings are the discovery screen's keys: it shows the
// locations searched, no resources or log to move between, so only
// cancel while it searches and back once the run has ended there (a
// failed discovery).
func (m *Model) discoverBindings() []key.Binding {
	if m.run != nil && !m.run.running {
		return []key.Binding{runKeys.Back}
	}
	return []key.Binding{runKeys.Cancel}
}

func (m *Model) runKey(msg tea.KeyPressMsg) tea.Cmd {
	r, k, s := m.run, runKeys, msg.String()
	if r == nil {
		return nil
	}
	switch {
	case key.Matches(msg, k.Back):
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
			// is said again where it is fixed.
			m.run = nil
			cmd := m.openCreate(false)
			if r.failed() == failure.Input {
				m.formErr = "Create failed: " + r.result.Message
			}
			return cmd
		case r.kind == opUpgrade || r.kind == opRotate:
			return m.backFromDayTwo(r)
		}
		return m.goHome()
	case key.Matches(msg, k.Again):
		if r.destroyAgain() {
			// Every step of destroy is idempotent: running it again
			// finishes what the ended run began.
			m.runReopened = false
			return m.startDestroy(r.target)
		}
	case key.Matches(msg, k.Open):
		m.openRunDetail()
	case key.Matches(msg, k.Focus):
		r.focusLog = !r.focusLog
	case key.Matches(msg, k.Up):
		r.scroll(-1)
	case key.Matches(msg, k.Down):
		r.scroll(1)
	case key.Matches(msg, k.Page):
		// The log pages; otherwise the view itself scrolls when it does
		// not fit, else the resources page.
		d := map[string]int{"pgup": -10, "pgdown": 10}[s]
		if !r.focusLog && m.maxScroll > 0 {
			m.scrollKey(s)
			return nil
		}
		r.scroll(d)
	case key.Matches(msg, k.End):
		r.logOffset = 0
		r.resSel = max(len(r.resources)-1, 0)
	case key.Matches(msg, k.Home):
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
		lines := []string{"Kind     " + res.kind, "Name     " + ref, "Status   " + string(res.status)}
		if res.message != "" {
			lines = append(lines, "Message  "+res.message)
		}
		m.detail = &detailView{title: res.kind + " " + ref, lines: lines}
		return
	}
	lines := append([]string(nil), r.logs...)
	if r.result != nil {
		head := "Result"
		if !r.result.OK {
			head += " (" + FailureWords(r.failed()) + ")"
		}
		lines = append(lines, "", head+": "+r.result.Message)
	}
	m.detail = &detailView{title: "log of " + r.kind.String() + " " + r.name, lines: lines}
}

// cancelled reports whether the run ended by the user's own choice.
func (r *runState) cancelled() bool {
	return r.userCancel && r.result != nil && !r.result.OK
}

func (m *Model) viewRun(p *page, rows int) {
	r := m.run
	prov := r.provider
	if prov == "" {
		prov = "kube"
	}
	p.add("%s %s · %s %s", m.st.header.Render(r.kind.String()), r.name, prov, r.location)
	m.viewPhases(p, false)
	m.viewResult(p)
	if len(p.lines) > rows-6 {
		// Too little room: succeeded phases go on one summary line, so the
		// result, resources and log keep rows.
		p.lines = p.lines[:1]
		m.viewPhases(p, true)
		m.viewResult(p)
	}
	left := rows - len(p.lines) - 2 // two section headers
	resWant := max(len(r.resources), 1)
	logWant := max(min(m.logRowsNeeded(p.width), 8), 1)
	var resRows, logRows int
	switch {
	case left < 2:
		resRows, logRows = 1, 1 // the view scrolls
	case resWant+logWant <= left:
		resRows, logRows = resWant, left-resWant
	default:
		logRows = clamp(logWant, 1, max(left/2, 1))
		resRows = left - logRows
	}
	m.viewResources(p, resRows)
	m.viewLog(p, max(logRows, 1))
}

// viewPhases renders the run's phases, one a line; compact sums up the
// succeeded and skipped ones on one line.
func (m *Model) viewPhases(p *page, compact bool) {
	r := m.run
	now := m.opts.Now()
	failedResult := r.result != nil && !r.result.OK
	indent := 27
	if p.width < 70 {
		indent = 4 // narrow: messages wrap under the phase, not in a column
	}
	var done []string
	for _, ph := range r.phases {
		var mark string
		el := time.Duration(ph.elapsedMS) * time.Millisecond
		msg := ph.message
		switch ph.state {
		case engine.PhaseStarted:
			mark, el = m.spinner(), now.Sub(ph.started)
			if !r.running {
				mark = m.st.faint.Render("-")
			}
		case engine.PhaseSucceeded:
			mark = m.st.ok.Render("✓")
		case engine.PhaseFailed:
			mark = m.st.fail.Render("✗")
			if r.cancelled() {
				mark, msg = m.st.faint.Render("○"), "cancelled"
			} else if failedResult {
				msg = "failed (below)" // the result says why, once
			}
		default:
			mark = m.st.faint.Render("-")
		}
		if compact && (ph.state == engine.PhaseSucceeded || ph.state == engine.PhaseSkipped) {
			done = append(done, string(ph.name))
			continue
		}
		if len(done) > 0 {
			p.hang(" "+m.st.ok.Render("✓")+" "+strings.Join(done, ", "), 3)
			done = nil
		}
		line := fmt.Sprintf(" %s %-15s %7s", mark, ph.name, human.Elapsed(el))
		switch {
		case ph.name == "plan" && r.decision != "":
			line += "  " + r.decision + ": " + r.reason
		case msg != "":
			line += "  " + msg
		}
		p.hang(line, indent)
	}
	if len(done) > 0 {
		p.hang(" "+m.st.ok.Render("✓")+" "+strings.Join(done, ", "), 3)
	}
}

// viewResult renders the run's result, whole and wrapped: ✓, ✗ with its
// failure's kind in words, or a neutral line for the user's own cancel
// (just "nothing was changed" when the failure says so: a declined
// question, or a cancel before anything was written).
func (m *Model) viewResult(p *page) {
	r := m.run
	switch {
	case r.result == nil:
	case r.result.OK:
		p.hang(m.st.ok.Render("✓ "+r.result.Message), 2)
	case r.cancelled():
		msg := r.result.Message
		if failure.NothingChanged(r.result.Err) {
			msg = "nothing was changed"
		}
		p.hang(m.st.header.Render("○ cancelled — "+msg), 2)
	default:
		p.hang(m.st.fail.Render(fmt.Sprintf("✗ %s (%s)", r.result.Message, FailureWords(r.failed()))), 2)
	}
	if r.destroyAgain() {
		p.hang(m.st.warn.Render("Press d to run destroy again: it asks once more, then finishes what this run began (nothing removed comes back)."), 2)
	}
}

// logRowsNeeded is how many rows the whole log takes, wrapped (up to 9).
func (m *Model) logRowsNeeded(width int) int {
	n := 0
	for i := len(m.run.logs) - 1; i >= 0 && n < 9; i-- {
		n += len(wrap("  "+m.run.logs[i], width, 4))
	}
	return n
}

func (m *Model) viewResources(p *page, rows int) {
	r := m.run
	head := fmt.Sprintf("Resources (%d)", len(r.resources))
	if !r.focusLog {
		head = m.st.header.Render(head) + m.st.faint.Render("  ↑/↓ select · enter: in full · tab: log")
	}
	p.row(head)
	if len(r.resources) == 0 {
		p.line(m.st.faint.Render("  none yet"))
		return
	}
	sel := clamp(r.resSel, 0, len(r.resources)-1)
	first := clamp(sel-rows+1, 0, max(len(r.resources)-rows, 0))
	for i := first; i < len(r.resources) && i < first+rows; i++ {
		res := r.resources[i]
		st, mark := m.st.status(res.status)
		ref := res.name
		if res.namespace != "" {
			ref = res.namespace + "/" + res.name
		}
		cur := " "
		if i == sel && !r.focusLog {
			cur = ">"
		}
		p.row(fmt.Sprintf("%s%s %-10s %-28s %s %s", cur, st.Render(mark), trunc(res.kind, 10), trunc(ref, 28), st.Render(fmt.Sprintf("%-11s", res.status)), res.message))
	}
}

// viewLog renders the end of the log (or where it is scrolled to), each
// line wrapped whole.
func (m *Model) viewLog(p *page, rows int) {
	r := m.run
	head := "Log"
	if r.focusLog {
		head = m.st.header.Render(head) + m.st.faint.Render("  ↑/↓ pgup/pgdn scroll · end: follow · enter: in full · tab: resources")
	}
	p.row(head)
	end := len(r.logs) - clamp(r.logOffset, 0, len(r.logs))
	var shown []string
	for i := end - 1; i >= 0 && len(shown) < rows; i-- {
		w := wrap("  "+r.logs[i], p.width, 4)
		shown = append(w, shown...)
	}
	if len(shown) > rows {
		shown = shown[len(shown)-rows:]
	}
	p.lines = append(p.lines, shown...)
}

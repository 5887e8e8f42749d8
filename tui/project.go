package tui

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/internal/human"
)

// ProjectFeed is Ops that shows the project screen why a project is
// in its state: the Kubernetes Events of its objects and pods, and its
// pods' log lines as they come. Ops without it show neither.
type ProjectFeed interface {
	// ProjectEvents reads the Events of project ref (TENANT/PROJECT),
	// newest first.
	ProjectEvents(ctx context.Context, t engine.ClusterRef, ref string) ([]engine.EventInfo, error)
	// FollowLogs calls fn with the last tail lines of each container of
	// each of the project's pods, then with every new line (and the lines
	// of pods that start later), from one goroutine at a time, until ctx
	// ends (which returns nil).
	FollowLogs(ctx context.Context, t engine.ClusterRef, ref string, tail int, fn func(engine.PodLogLine)) error
}

// logTail is how many lines of each container the project screen starts
// with; maxFeedLines bounds what it keeps (the oldest go first).
const (
	logTail      = 20
	maxFeedLines = 500
)

// feedState is the project screen's events and followed log. It lives
// while the project screen is shown: leaving the screen ends the log's
// follow and any events read (stop), so nothing outlives the screen.
type feedState struct {
	ref  string
	stop context.CancelFunc
	// gen tells this feed's messages from an older feed's.
	gen int

	events        []engine.EventInfo
	eventsErr     string
	eventsRead    bool // a read landed
	eventsLoading bool
	// eventsStale says the cluster changed during the events read: read
	// once more when it lands.
	eventsStale bool

	logs     []engine.PodLogLine
	logErr   string
	logEnded bool
	// ev and log are the Events and log panes; follow keeps the log at
	// its newest line; pane is the one tab gave ↑/↓ (paneNone: the page).
	ev     viewport.Model
	log    viewport.Model
	follow bool
	pane   int
}

// The project screen's panes, in tab order.
const (
	paneNone = iota
	paneEvents
	paneLog
	panes
)

// logBuf hands the follower's lines to the program: the follower appends
// (never blocks), a command waits for the kick and takes them all.
type logBuf struct {
	mu    sync.Mutex
	lines []engine.PodLogLine
	ended bool
	err   error
	kick  chan struct{}
}

func (b *logBuf) add(l engine.PodLogLine) {
	b.mu.Lock()
	b.lines = append(b.lines, l)
	if len(b.lines) > 2*maxFeedLines {
		b.lines = append(b.lines[:0], b.lines[len(b.lines)-maxFeedLines:]...)
	}
	b.mu.Unlock()
	b.signal()
}

func (b *logBuf) end(err error) {
	b.mu.Lock()
	b.ended, b.err = true, err
	b.mu.Unlock()
	b.signal()
}

func (b *logBuf) signal() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

func (b *logBuf) take() (lines []engine.PodLogLine, ended bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	lines, b.lines = b.lines, nil
	return lines, b.ended, b.err
}

type (
	feedEventsMsg struct {
		gen    int
		events []engine.EventInfo
		err    error
	}
	feedLogMsg struct {
		gen   int
		lines []engine.PodLogLine
		ended bool
		err   error
		buf   *logBuf
		ctx   context.Context
	}
)

// syncFeed starts the project screen's feed when it is shown and stops it
// when it is left (any way: esc, a project operation's run view, home,
// quitting). Called after every Update.
func (m *Model) syncFeed() tea.Cmd {
	s := m.insp
	want := ""
	if s != nil && m.screen == screenProject {
		want = s.ref
	}
	if s != nil && s.feed != nil && s.feed.ref != want {
		m.stopFeed()
	}
	if want == "" || s.feed != nil {
		return nil
	}
	f, ok := m.opts.Ops.(ProjectFeed)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.feedGen++
	s.feed = &feedState{ref: want, stop: cancel, gen: s.feedGen, follow: true, log: viewport.New(), ev: viewport.New()}
	s.feed.log.SoftWrap = true
	buf := &logBuf{kick: make(chan struct{}, 1)}
	t, gen := s.target, s.feedGen
	// The follower runs as a command of its own (Update starts no
	// goroutine); it ends with the feed's context (stopFeed).
	m.ops.Add(1)
	follow := func() tea.Msg {
		defer m.ops.Done()
		err := f.FollowLogs(ctx, t, want, logTail, buf.add)
		if ctx.Err() != nil {
			err = nil // the screen was left: not a failure
		}
		buf.end(err)
		return nil
	}
	return tea.Batch(follow, m.readEvents(), waitLog(ctx, gen, buf))
}

// stopFeed ends the project screen's feed: the log's follower returns
// when its context ends (the program waits for it on exit).
func (m *Model) stopFeed() {
	if m.insp == nil || m.insp.feed == nil {
		return
	}
	m.insp.feed.stop()
	m.insp.feed = nil
}

// readEvents reads the project's Events in a command; a read under way
// makes the next one wait for it (one more read when it lands).
func (m *Model) readEvents() tea.Cmd {
	s := m.insp
	f, ok := m.opts.Ops.(ProjectFeed)
	if s == nil || s.feed == nil || !ok {
		return nil
	}
	fd := s.feed
	if fd.eventsLoading {
		fd.eventsStale = true
		return nil
	}
	fd.eventsLoading, fd.eventsStale = true, false
	t, ref, gen := s.target, fd.ref, fd.gen
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		evs, err := f.ProjectEvents(ctx, t, ref)
		return feedEventsMsg{gen: gen, events: evs, err: err}
	}
}

func waitLog(ctx context.Context, gen int, buf *logBuf) tea.Cmd {
	return func() tea.Msg {
		select {
		case <-buf.kick:
		case <-ctx.Done():
			return nil
		}
		lines, ended, err := buf.take()
		return feedLogMsg{gen: gen, lines: lines, ended: ended, err: err, buf: buf, ctx: ctx}
	}
}

func (m *Model) feedEvents(msg feedEventsMsg) tea.Cmd {
	fd := m.feed()
	if fd == nil || fd.gen != msg.gen {
		return nil
	}
	fd.eventsLoading, fd.eventsRead = false, true
	if msg.err != nil {
		fd.eventsErr = msg.err.Error() // the last good read stays
	} else {
		fd.events, fd.eventsErr = msg.events, ""
	}
	if fd.eventsStale {
		return m.readEvents()
	}
	return nil
}

func (m *Model) feedLog(msg feedLogMsg) tea.Cmd {
	fd := m.feed()
	if fd == nil || fd.gen != msg.gen {
		return nil
	}
	fd.logs = append(fd.logs, msg.lines...)
	if len(fd.logs) > maxFeedLines {
		fd.logs = append(fd.logs[:0], fd.logs[len(fd.logs)-maxFeedLines:]...)
	}
	if msg.ended {
		fd.logEnded = true
		if msg.err != nil {
			fd.logErr = msg.err.Error()
		}
		return nil
	}
	return waitLog(msg.ctx, msg.gen, msg.buf)
}

// feed is the project screen's feed, if it runs.
func (m *Model) feed() *feedState {
	if m.insp == nil {
		return nil
	}
	return m.insp.feed
}

// logRows and eventRows are the heights of the project screen's log and
// Events panes.
const (
	logRows   = 8
	eventRows = 10
)

// viewFeed renders the project screen's pods (from the live read), the
// project's Events and its followed log.
func (m *Model) viewFeed(p *page, pr *engine.ProjectStatus) {
	p.blank()
	p.line(m.st.header.Render(fmt.Sprintf("Pods (%d)", len(pr.Pods))))
	if len(pr.Pods) == 0 {
		p.line(m.st.faint.Render("  none"))
	}
	for _, po := range pr.Pods {
		st, mark := m.st.ok, "✓"
		if !po.Ready {
			st, mark = m.st.progress, "…"
		}
		if po.Waiting != "" || po.Phase == "Failed" {
			st, mark = m.st.fail, "✗"
		}
		line := fmt.Sprintf(" %s %s %s restarts %d", st.Render(mark), cell(po.Name, 24), cell(po.Phase, 9), po.Restarts)
		if po.Waiting != "" {
			line += " · waiting " + po.Waiting
		}
		if po.LastTermination != "" {
			line += fmt.Sprintf(" · last %s (exit %d)", po.LastTermination, po.LastExitCode)
		}
		p.hang(line, 3)
	}
	fd := m.feed()
	if fd == nil {
		return
	}
	p.blank()
	head := "Events"
	if fd.eventsRead {
		head = fmt.Sprintf("Events (%d, newest first)", len(fd.events))
	}
	head = m.st.header.Render(head)
	if fd.pane == paneEvents {
		head += m.st.faint.Render("  ↑/↓ pgup/pgdn scroll · tab: log")
	} else if len(fd.events) > eventRows {
		head += m.st.faint.Render(fmt.Sprintf("  %d shown · tab: scroll the events", eventRows))
	}
	p.row(head)
	switch {
	case fd.eventsErr != "":
		p.hang(m.st.errorText.Render("  ✗ "+fd.eventsErr), 4)
	case !fd.eventsRead:
		p.line("  " + m.spinner() + m.st.faint.Render(" reading events…"))
	case len(fd.events) == 0:
		p.line(m.st.faint.Render("  none (Kubernetes keeps Events for about an hour)"))
	}
	// REASON and OBJECT as wide as their longest values, MESSAGE the rest
	// (the longest give up cells first on a narrow screen).
	var reasons, objects, msgs []string
	for _, ev := range fd.events {
		reasons, objects, msgs = append(reasons, ev.Reason), append(objects, ev.Object), append(msgs, ev.Message)
	}
	w := fitWidths([]int{widest(len("REASON"), reasons...), widest(len("OBJECT"), objects...), widest(len("MESSAGE"), msgs...)},
		[]int{10, 12, 12}, p.width-2-4-1-5-3)
	if len(fd.events) > 0 {
		p.row(m.st.faint.Render("  " + fmt.Sprintf("%4s", "AGE") + " " + cell("REASON", w[0]) + " " + cell("COUNT", 5) + " " + cell("OBJECT", w[1]) + " MESSAGE"))
	}
	now := m.opts.Now()
	var rows []string
	for _, ev := range fd.events {
		a := time.Duration(ev.AgeS) * time.Second
		if !ev.Last.IsZero() {
			a = now.Sub(ev.Last)
		}
		reason := cell(ev.Reason, w[0])
		if ev.Type == "Warning" {
			reason = m.st.warn.Render(reason)
		}
		rows = append(rows, fmt.Sprintf("  %4s %s %5d %s %s", human.Age(a), reason, ev.Count, cell(ev.Object, w[1]), ev.Message))
	}
	if len(rows) > 0 {
		m.viewPane(p, &fd.ev, rows, eventRows, false)
	}
	p.blank()
	m.viewLogPane(p, fd)
}

// viewLogPane renders the last lines of the project's pod logs in a
// viewport that follows the newest line unless scrolled back.
func (m *Model) viewLogPane(p *page, fd *feedState) {
	head := "Log"
	switch {
	case fd.logEnded && fd.logErr != "":
		head += m.st.faint.Render(" (stopped)")
	case fd.logEnded:
		head += m.st.faint.Render(" (ended)")
	case fd.follow:
		head += " " + m.spinner() + m.st.faint.Render(" following")
	default:
		head += m.st.faint.Render(" (scrolled back · end: follow)")
	}
	if fd.pane == paneLog {
		head = m.st.header.Render(head) + m.st.faint.Render("  ↑/↓ pgup/pgdn scroll · tab: page")
	} else if len(fd.events) <= eventRows {
		head += m.st.faint.Render("  tab: scroll the log")
	}
	p.row(head)
	if fd.logErr != "" {
		p.hang(m.st.errorText.Render("  ✗ "+fd.logErr), 4)
	}
	if len(fd.logs) == 0 {
		if fd.logErr == "" {
			p.line(m.st.faint.Render("  no log lines yet"))
		}
		return
	}
	lines := make([]string, len(fd.logs))
	for i, l := range fd.logs {
		lines[i] = "  " + m.st.faint.Render("["+l.Pod+"]") + " " + l.Line
	}
	m.viewPane(p, &fd.log, lines, logRows, fd.follow)
}

// viewPane renders lines in the viewport v, at most height rows (fewer
// when there are fewer lines), at its newest line when follow.
func (m *Model) viewPane(p *page, v *viewport.Model, lines []string, height int, follow bool) {
	v.SetWidth(p.width)
	v.SetContentLines(lines)
	v.SetHeight(min(v.TotalLineCount(), height))
	if follow {
		v.GotoBottom()
	}
	for _, l := range strings.Split(v.View(), "\n") {
		p.row(strings.TrimRight(l, " "))
	}
}

// paneKey handles the project screen's panes: tab moves ↑/↓ from the
// page to the Events, the log and back; the pane that has them scrolls.
// Reports whether it took the key.
func (m *Model) paneKey(s string) bool {
	fd := m.feed()
	if fd == nil {
		return false
	}
	if s == "tab" {
		fd.pane = (fd.pane + 1) % panes
		if fd.pane == paneEvents && len(fd.events) <= eventRows {
			fd.pane = paneLog // every event shows: nothing to scroll
		}
		return true
	}
	v := &fd.log
	switch fd.pane {
	case paneNone:
		return false
	case paneEvents:
		v = &fd.ev
	}
	if !scrollViewport(v, s) {
		return false
	}
	if fd.pane == paneLog {
		fd.follow = v.AtBottom()
	}
	return true
}

func (m *Model) viewProject(p *page) {
	s := m.insp
	m.inspectHeader(p)
	pr := s.project()
	if pr == nil {
		p.blank()
		if s.data == nil {
			m.viewLoading(p)
		} else {
			p.add("Project %s is not in the last read (deleted?).", s.ref)
		}
		p.pin(m.actions([]keyHelp{{"esc", "back"}}))
		return
	}
	p.blank()
	line := m.st.header.Render("Project "+ref(*pr)) + "  " + m.projectState(pr.State).Render(pr.State) +
		fmt.Sprintf(" (desired %s) · stack %s", pr.Desired, pr.Stack)
	if c := pr.Created; !c.IsZero() {
		line += " · age " + human.Age(m.opts.Now().Sub(c))
	}
	p.line(line)
	p.add("Host %s · namespace %s · revision %d", pr.Host, pr.Namespace, pr.Revision)
	if pr.Operation != "" {
		p.line(m.st.warn.Render("Operation under way: " + pr.Operation))
	}
	p.blank()
	p.line(m.st.header.Render("Objects"))
	objs := make([]objectLine, 0, len(pr.Objects))
	for _, o := range pr.Objects {
		objs = append(objs, objectLine{o.Kind, o.Name, o.Status, o.Message})
	}
	m.objectRows(p, objs)
	p.blank()
	if ok, text := tokenSync(pr); ok {
		p.hang("Token sync  "+m.st.ok.Render("✓")+" "+text, 14)
	} else if strings.HasPrefix(text, "unknown") {
		p.hang("Token sync  "+m.st.faint.Render("?")+" "+text, 14)
	} else {
		p.hang("Token sync  "+m.st.fail.Render("✗")+" "+text, 14)
	}
	p.blank()
	p.line(m.st.header.Render("Reasons"))
	if len(pr.Reasons) == 0 {
		p.line(m.st.faint.Render("  none: the live objects match the desired state"))
	}
	for _, r := range pr.Reasons {
		p.hang("  • "+r, 4)
	}
	m.viewFeed(p, pr)
	m.inspectActions(p, nil)
}

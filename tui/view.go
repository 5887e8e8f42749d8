package tui

import (
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/kilnctl/kiln/engine"
)

var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// page collects a screen's lines and where the terminal cursor goes.
type page struct {
	lines          []string
	cursorRow      int
	cursorCol      int
	cursor         bool
	cursorFromLine bool
}

func (p *page) add(format string, args ...any) {
	p.lines = append(p.lines, fmt.Sprintf(format, args...))
}
func (p *page) line(s string) { p.lines = append(p.lines, s) }
func (p *page) blank()        { p.lines = append(p.lines, "") }

// input adds a labelled text input and, if focused, puts the cursor in it.
func (p *page) input(label string, in interface {
	View() string
	Cursor() *tea.Cursor
}) {
	p.line(label + in.View())
	if c := in.Cursor(); c != nil {
		p.cursor, p.cursorRow, p.cursorCol = true, len(p.lines)-1, lipgloss.Width(label)+c.X
	}
}

// View renders the current screen, fitted to the terminal.
func (m *Model) View() tea.View {
	w, h := max(m.width, 20), max(m.height, 6)
	body := &page{}
	title := ""
	switch {
	case m.help:
		title = "keys"
		m.viewHelp(body)
	default:
		title = m.renderScreen(body, h-2)
	}
	lines := make([]string, 0, h)
	lines = append(lines, m.st.title.Render("kiln")+m.st.faint.Render(" · "+title))
	bodyRows := h - 2
	shown := body.lines
	if len(shown) > bodyRows {
		shown = shown[:bodyRows]
	}
	lines = append(lines, shown...)
	for len(lines) < h-1 {
		lines = append(lines, "")
	}
	lines = append(lines, m.footer())
	for i, l := range lines {
		if ansi.StringWidth(l) > w {
			lines[i] = ansi.Truncate(l, w, "…")
		}
	}
	v := tea.NewView(strings.Join(lines, "\n"))
	v.AltScreen = true
	if body.cursor && !m.help && body.cursorRow < bodyRows && body.cursorCol < w {
		v.Cursor = tea.NewCursor(body.cursorCol, body.cursorRow+1)
	}
	return v
}

// renderScreen fills body and returns the screen's title.
func (m *Model) renderScreen(body *page, rows int) string {
	switch m.screen {
	case screenCreate:
		m.viewCreate(body)
		return "new cluster"
	case screenDiscover:
		m.viewDiscover(body)
		return "discovery"
	case screenContinue:
		m.viewContinue(body)
		return "platform already installed"
	case screenRun:
		m.viewRun(body, rows)
		return m.run.kind.String() + " " + m.run.name
	case screenFinal:
		m.viewFinal(body)
		return "done"
	case screenDestroy:
		m.viewDestroy(body)
		return "destroy " + m.destName()
	case screenInspect:
		m.viewInspect(body, rows)
		return "inspect " + m.insp.target.Name
	case screenProject:
		m.viewProject(body)
		return "project " + m.insp.ref
	}
	m.viewHome(body, rows)
	return "clusters"
}

func (m *Model) footer() string {
	if m.askCancel {
		return m.st.fail.Render(fmt.Sprintf("Cancel the running %s? It stops at a safe point. y/N", m.run.kind))
	}
	if m.cancelling && m.run != nil && m.run.running {
		return m.st.warn.Render("cancelling… waiting for the engine to stop safely")
	}
	var keys []keyHelp
	if m.help {
		keys = []keyHelp{{"?/esc", "close help"}}
	} else {
		keys = m.keys(true)
	}
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, m.st.key.Render(k.key)+" "+m.st.faint.Render(k.desc))
	}
	return strings.Join(parts, "  ")
}

func (m *Model) spinner() string {
	return m.st.progress.Render(spinnerFrames[m.frame%len(spinnerFrames)])
}

func (m *Model) viewHelp(p *page) {
	p.line(m.st.header.Render("Keys on this screen"))
	p.blank()
	for _, k := range m.keys(false) {
		p.add("  %-12s %s", k.key, k.desc)
	}
	p.blank()
	p.line(m.st.faint.Render("Everywhere: ctrl+c quits; during a create or destroy it asks first, then cancels safely."))
}

func (m *Model) viewHome(p *page, rows int) {
	p.line(m.st.header.Render("Kiln clusters across kubeconfig contexts"))
	p.blank()
	switch {
	case m.homeLoading && len(m.clusters) == 0:
		p.line(m.spinner() + " discovering kiln clusters in every context…")
	case m.homeErr != "":
		p.line(m.st.errorText.Render("✗ " + m.homeErr))
	case len(m.clusters) == 0:
		p.line("No kiln cluster found. Press n to create one.")
	default:
		p.line(m.st.faint.Render(fmt.Sprintf("  %-6s %-16s %-18s %-10s %s", "PROV", "NAME", "CONTEXT", "PLATFORM", "TOKEN DIR")))
		visible := max(rows-8, 3)
		first := clamp(m.homeSel-visible+1, 0, len(m.clusters))
		for i := first; i < len(m.clusters) && i < first+visible; i++ {
			c := m.clusters[i]
			td := "not found"
			if c.TokenDir != "" {
				td = "trusted"
			}
			if c.Err != "" {
				td = "unreachable"
			}
			name := c.Name
			if name == "" {
				name = "-"
			}
			row := fmt.Sprintf("%-6s %-16s %-18s %-10s %s", c.Provider, name, c.Location, c.Platform, td)
			if i == m.homeSel {
				p.line("> " + m.st.selected.Render(row))
			} else {
				p.line("  " + row)
			}
		}
		if m.homeLoading {
			p.line(m.spinner() + m.st.faint.Render(" refreshing…"))
		}
		c := m.clusters[m.homeSel]
		p.blank()
		if len(c.KeyIDs) > 0 {
			p.add("Trusted keys: %s", strings.Join(shortKeys(c.KeyIDs), ", "))
		}
		if c.TokenDir != "" {
			p.add("Token dir:    %s", c.TokenDir)
		} else if c.Err == "" {
			p.line("Token dir:    none known with a key this cluster trusts")
		}
		if c.Err != "" {
			p.line(m.st.errorText.Render(c.Err))
		}
	}
	p.blank()
	p.line(m.actions([]keyHelp{{"n", "new cluster"}, {"c", "continue"}, {"i", "inspect"}, {"d", "destroy"}, {"q", "quit"}}))
}

func (m *Model) actions(ks []keyHelp) string {
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = "[" + m.st.key.Render(k.key) + "] " + k.desc
	}
	return strings.Join(parts, "  ")
}

// shortKeys abbreviates key ids for tables: sha256: and 12 hex digits.
func shortKeys(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		if len(id) > len("sha256:")+12 {
			id = id[:len("sha256:")+12] + "…"
		}
		out[i] = id
	}
	return out
}

func (m *Model) viewCreate(p *page) {
	p.line(m.st.header.Render("New kiln cluster"))
	p.blank()
	p.line(m.label("Provider", -1) + "kube (an existing cluster through kubeconfig)")
	p.input(m.label("Name", 0), m.nameIn)
	switch {
	case m.nameErr != "":
		p.line(strings.Repeat(" ", 15) + m.st.errorText.Render("✗ "+m.nameErr))
	case m.nameIn.Value() != "":
		p.line(strings.Repeat(" ", 15) + m.st.ok.Render("✓ valid name"))
	default:
		p.line(strings.Repeat(" ", 15) + m.st.faint.Render("lowercase letters, digits and -, at most 40"))
	}
	ctx := m.st.faint.Render("(no contexts found)")
	if len(m.contexts) > 0 {
		ctx = fmt.Sprintf("‹ %s ›", m.contexts[m.ctxSel])
		if m.formFocus == 1 {
			ctx = m.st.selected.Render(ctx)
		}
		ctx += m.st.faint.Render(fmt.Sprintf("  %d of %d, ←/→ to choose", m.ctxSel+1, len(m.contexts)))
	}
	p.line(m.label("Context", 1) + ctx)
	p.blank()
	p.input(m.label("Config file", 2), m.configIn)
	p.line(strings.Repeat(" ", 15) + m.st.faint.Render("empty: tenant default, domain NAME.kiln.test, stack default"))
	p.blank()
	btn := m.st.button.Render("[ Create ]")
	if m.formFocus == 3 {
		btn = m.st.buttonFocus.Render("[ Create ]")
	}
	p.line(strings.Repeat(" ", 15) + btn)
	if m.formErr != "" {
		p.blank()
		p.line(m.st.errorText.Render("✗ " + m.formErr))
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

func (m *Model) viewDiscover(p *page) {
	r := m.run
	el := m.opts.Now().Sub(r.started)
	if ph := r.phase("discover"); ph != nil && ph.state != engine.PhaseStarted {
		el = time.Duration(ph.elapsedMS) * time.Millisecond
	}
	p.line(m.spinner() + " Discovering kiln clusters in every kubeconfig context… " + m.st.faint.Render(elapsed(el)))
	p.blank()
	for _, c := range r.found {
		name := c.Name
		if name == "" {
			name = "no kiln cluster"
		}
		line := fmt.Sprintf("  found %s %s: %s, platform %s", c.Provider, c.Location, name, c.Platform)
		if c.Error != "" {
			line = m.st.warn.Render(fmt.Sprintf("  %s %s: unreachable (%s)", c.Provider, c.Location, c.Error))
		}
		p.line(line)
	}
	for _, l := range r.logs {
		p.line("  " + l)
	}
}

func (m *Model) viewContinue(p *page) {
	q := m.contAsk.q
	p.line(m.st.header.Render("The kiln platform is already installed"))
	p.blank()
	p.add("Cluster %s already has the kiln platform in %s context %s.", q.Name, q.Provider, q.Location)
	p.blank()
	p.line("  Trusted key ids")
	for _, id := range q.TrustedKeyIDs {
		p.line("    " + id)
	}
	if q.TokenDir != "" {
		p.add("  Token dir        %s", q.TokenDir)
		p.line("                   " + m.st.ok.Render("✓ holds a key the cluster trusts"))
	} else {
		p.line("  Token dir        " + m.st.warn.Render("none found with a trusted key"))
	}
	p.blank()
	p.line("Continuing reuses the key material the cluster already trusts: no key")
	p.line("is generated, the token dir is kept, and missing or drifted platform")
	p.line("objects are put back. Cancel changes nothing.")
	if q.TokenDir == "" {
		p.line(m.st.warn.Render("Without a trusted token dir, continuing stops and says where kiln looked."))
	}
	p.blank()
	b1, b2 := "[ Continue with existing credentials ]", "[ Cancel ]"
	if m.contFocus == 0 {
		b1, b2 = m.st.buttonFocus.Render(b1), m.st.button.Render(b2)
	} else {
		b1, b2 = m.st.button.Render(b1), m.st.buttonFocus.Render(b2)
	}
	p.line("  " + b1 + "   " + b2)
}

func (m *Model) viewDestroy(p *page) {
	q := m.destAsk.q
	p.line(m.st.fail.Render("Destroy cluster " + q.Name))
	p.blank()
	p.add("This removes kiln cluster %s from %s context %s:", q.Name, q.Provider, q.Location)
	p.add("its platform objects and tenant namespaces (%s),", strings.Join(q.Tenants, ", "))
	p.line("each verified gone. The keyring entry is removed.")
	if q.TokenDir != "" {
		p.add("The token dir %s is moved aside, never deleted.", q.TokenDir)
	}
	p.blank()
	p.line("Type the cluster name to confirm:")
	p.input("  > ", m.destIn)
	if m.destErr != "" {
		p.line(m.st.errorText.Render("✗ " + m.destErr))
	}
	p.blank()
	p.line(m.st.faint.Render("Esc cancels; nothing is changed."))
}

func (m *Model) destName() string {
	if m.destAsk != nil {
		return m.destAsk.q.Name
	}
	return ""
}

func (m *Model) viewRun(p *page, rows int) {
	r := m.run
	now := m.opts.Now()
	p.add("%s %s · %s %s", m.st.header.Render(r.kind.String()), r.name, "kube", r.location)
	for _, ph := range r.phases {
		var mark string
		el := time.Duration(ph.elapsedMS) * time.Millisecond
		switch ph.state {
		case engine.PhaseStarted:
			mark, el = m.spinner(), now.Sub(ph.started)
		case engine.PhaseSucceeded:
			mark = m.st.ok.Render("✓")
		case engine.PhaseFailed:
			mark = m.st.fail.Render("✗")
		default:
			mark = m.st.faint.Render("-")
		}
		line := fmt.Sprintf(" %s %-15s %7s", mark, ph.name, elapsed(el))
		switch {
		case ph.name == "plan" && r.decision != "":
			line += "  " + r.decision + ": " + r.reason
		case ph.message != "":
			line += "  " + ph.message
		}
		p.line(line)
	}
	if r.result != nil {
		if r.result.OK {
			p.line(m.st.ok.Render("✓ " + r.result.Message))
		} else {
			p.line(m.st.fail.Render(fmt.Sprintf("✗ %s (exit %d)", r.result.Message, r.result.ExitCode)))
		}
	}
	left := rows - len(p.lines) - 2 // two section headers
	logRows := max(3, left/2)
	if n := min(len(r.logs), 8); n < logRows {
		logRows = max(n, 1)
	}
	resRows := max(1, left-logRows)
	if len(r.resources) < resRows {
		logRows += resRows - max(len(r.resources), 1)
		resRows = max(len(r.resources), 1)
	}
	m.viewResources(p, resRows)
	m.viewLog(p, logRows)
}

func (m *Model) viewResources(p *page, rows int) {
	r := m.run
	head := fmt.Sprintf("Resources (%d)", len(r.resources))
	if !r.focusLog {
		head = m.st.header.Render(head) + m.st.faint.Render("  ↑/↓ scroll · tab: log")
	}
	p.line(head)
	if len(r.resources) == 0 {
		p.line(m.st.faint.Render("  none yet"))
		return
	}
	first := clamp(r.resOffset, 0, max(len(r.resources)-rows, 0))
	for i := first; i < len(r.resources) && i < first+rows; i++ {
		res := r.resources[i]
		st, mark := m.st.status(res.status)
		ref := res.name
		if res.namespace != "" {
			ref = res.namespace + "/" + res.name
		}
		p.line(fmt.Sprintf(" %s %-10s %-28s %s %s", st.Render(mark), trunc(res.kind, 10), trunc(ref, 28), st.Render(fmt.Sprintf("%-11s", res.status)), res.message))
	}
}

func (m *Model) viewLog(p *page, rows int) {
	r := m.run
	head := "Log"
	if r.focusLog {
		head = m.st.header.Render(head) + m.st.faint.Render("  ↑/↓ pgup/pgdn scroll · end: follow · tab: resources")
	}
	p.line(head)
	end := len(r.logs) - clamp(r.logOffset, 0, len(r.logs))
	start := max(end-rows, 0)
	for _, l := range r.logs[start:end] {
		p.line("  " + l)
	}
}

func (m *Model) viewFinal(p *page) {
	r := m.run
	p.line(m.st.ok.Render("✓ " + r.result.Message))
	p.blank()
	td := r.result.TokenDir
	if td == "" {
		td = "(none)"
	}
	p.add("  Token dir     %s", td)
	p.add("  Kube context  %s", r.location)
	p.blank()
	p.line(m.st.header.Render("Next"))
	for _, c := range [][2]string{
		{"kiln status kube " + r.name, "health from live objects"},
		{"kiln wait kube " + r.name + " --timeout 2m", "ready and tokens valid?"},
		{"kubectl --context " + r.location + " -n kiln-system get all", ""},
		{"kiln destroy kube " + r.name, "verified removal"},
	} {
		line := "  " + c[0]
		if c[1] != "" {
			line += m.st.faint.Render("   # " + c[1])
		}
		p.line(line)
	}
	p.blank()
	p.line(m.st.faint.Render("Enter or Esc: back to clusters"))
}

func trunc(s string, n int) string {
	if ansi.StringWidth(s) <= n {
		return s
	}
	return ansi.Truncate(s, n, "…")
}

func elapsed(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return d.Round(100 * time.Millisecond).String()
}

// inspectHeader is the first lines of both inspect screens: the cluster,
// its readiness and when it was last read.
func (m *Model) inspectHeader(p *page) *engine.ClusterStatus {
	s := m.insp
	t := s.target
	var st *engine.ClusterStatus
	if s.data != nil {
		st = s.data.Status
	}
	state := ""
	switch {
	case st == nil:
	case st.Ready:
		state = " · " + m.st.ok.Render("✓ platform ready")
	case !st.Installed:
		state = " · " + m.st.fail.Render("✗ platform not installed")
	default:
		state = " · " + m.st.warn.Render("… platform not ready")
	}
	line := m.st.header.Render("Cluster "+t.Name) + " · " + t.Provider + " " + t.Location + state
	switch {
	case s.loading && st == nil:
		line += "  " + m.spinner()
	case !s.updated.IsZero():
		line += m.st.faint.Render("  updated " + s.updated.Format("15:04:05"))
	}
	p.line(line)
	if s.err != "" {
		p.line(m.st.errorText.Render("✗ " + s.err))
	}
	return st
}

func (m *Model) viewInspect(p *page, rows int) {
	s := m.insp
	st := m.inspectHeader(p)
	if st == nil {
		if s.err == "" {
			p.line(m.spinner() + " reading live objects…")
		}
		return
	}
	// Rows left for the platform objects once everything else is placed.
	projects := max(len(st.Projects), 1)
	fixed := len(p.lines) + 1 + 1 + 1 + 3 + 2 // headers, tenants, tokens, projects head, actions
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
	for _, o := range shown {
		m.objectRow(p, o.Kind, o.Namespace, o.Name, o.Status, o.Message, 28)
	}
	if n := len(st.Objects) - len(shown); n > 0 {
		p.line(m.st.faint.Render(fmt.Sprintf("   … %d more, current", n)))
	}
	p.add("Tenants  %s", strings.Join(st.Tenants, ", "))
	switch {
	case st.TokenProblem != "":
		p.line("Tokens   " + m.st.warn.Render("! "+st.TokenProblem))
	case st.TokenDir != "":
		p.line("Tokens   " + m.st.ok.Render("✓") + " " + st.TokenDir)
	}
	p.blank()
	p.line(m.st.header.Render(fmt.Sprintf("Projects (%d)", len(st.Projects))))
	if len(st.Projects) == 0 {
		p.line(m.st.faint.Render("  none; kiln project create TENANT/PROJECT adds one"))
	} else {
		p.line(m.st.faint.Render(fmt.Sprintf("  %-24s %-10s %-10s %4s  %s", "TENANT/PROJECT", "STATE", "STACK", "AGE", "REASONS")))
		visible := max(rows-len(p.lines)-2, 1)
		first := clamp(s.sel-visible+1, 0, len(st.Projects))
		for i := first; i < len(st.Projects) && i < first+visible; i++ {
			pr := st.Projects[i]
			a := "-"
			if c := pr.Created; !c.IsZero() {
				a = age(m.opts.Now().Sub(c))
			}
			reasons := strings.Join(pr.Reasons, "; ")
			if pr.Operation != "" {
				reasons = "(" + pr.Operation + ") " + reasons
			}
			state := m.projectState(pr.State).Render(fmt.Sprintf("%-10s", pr.State))
			row := fmt.Sprintf("%-24s %s %-10s %4s  %s", trunc(ref(pr), 24), state, trunc(pr.Stack, 10), a, reasons)
			if i == s.sel {
				p.line("> " + m.st.selected.Render(ansi.Strip(row)))
			} else {
				p.line("  " + row)
			}
		}
	}
	m.inspectActions(p, "[enter] details  ")
}

// inspectActions ends both inspect screens: the actions, or the question
// a pending action asks.
func (m *Model) inspectActions(p *page, extra string) {
	a := m.insp.ask
	if a == nil {
		p.line(m.actions([]keyHelp{{"s", "start"}, {"p", "suspend"}, {"r", "restack"}}) + "  " + extra + m.actions([]keyHelp{{"esc", "back"}}))
		return
	}
	switch {
	case a.op == engine.ProjectRestack && len(a.stacks) == 0:
		p.line(m.st.warn.Render("kiln-config lists no stacks to restack onto") + "  " + m.st.faint.Render("esc: back"))
	case a.op == engine.ProjectRestack:
		p.line(m.st.warn.Render(fmt.Sprintf("Restack %s from %s onto ‹ %s ›?", a.ref, a.from, a.stacks[a.stackSel])) +
			m.st.faint.Render(fmt.Sprintf("  ←/→ stack (%d of %d) · enter/y: restack · esc/n: cancel", a.stackSel+1, len(a.stacks))))
	default:
		verb := map[string]string{engine.ProjectStart: "Start", engine.ProjectSuspend: "Suspend"}[a.op]
		p.line(m.st.warn.Render(fmt.Sprintf("%s project %s?", verb, a.ref)) + m.st.faint.Render("  enter/y: "+a.op+" · esc/n: cancel"))
	}
}

func (m *Model) viewProject(p *page) {
	s := m.insp
	m.inspectHeader(p)
	pr := s.project()
	if pr == nil {
		p.blank()
		p.add("Project %s is not in the last read (deleted?).", s.ref)
		p.blank()
		p.line(m.actions([]keyHelp{{"esc", "back"}}))
		return
	}
	p.blank()
	line := m.st.header.Render("Project "+ref(*pr)) + "  " + m.projectState(pr.State).Render(pr.State) +
		fmt.Sprintf(" (desired %s) · stack %s", pr.Desired, pr.Stack)
	if c := pr.Created; !c.IsZero() {
		line += " · age " + age(m.opts.Now().Sub(c))
	}
	p.line(line)
	p.add("Host %s · namespace %s · revision %d", pr.Host, pr.Namespace, pr.Revision)
	if pr.Operation != "" {
		p.line(m.st.warn.Render("Operation under way: " + pr.Operation))
	}
	p.blank()
	p.line(m.st.header.Render("Objects"))
	for _, o := range pr.Objects {
		m.objectRow(p, o.Kind, "", o.Name, o.Status, o.Message, 22)
	}
	p.blank()
	if ok, text := tokenSync(pr); ok {
		p.line("Token sync  " + m.st.ok.Render("✓") + " " + text)
	} else {
		p.line("Token sync  " + m.st.fail.Render("✗") + " " + text)
	}
	p.blank()
	p.line(m.st.header.Render("Reasons"))
	if len(pr.Reasons) == 0 {
		p.line(m.st.faint.Render("  none: the live objects match the desired state"))
	}
	for _, r := range pr.Reasons {
		p.line("  • " + r)
	}
	p.blank()
	m.inspectActions(p, "")
}

// objectRow renders one live object; the project screen leaves out the
// namespace (every object is in the project's).
func (m *Model) objectRow(p *page, kind, ns, name, status, msg string, width int) {
	st, mark := m.st.status(status)
	ref := name
	if ns != "" {
		ref = ns + "/" + name
	}
	p.line(fmt.Sprintf(" %s %-10s %-*s %s %s", st.Render(mark), trunc(kind, 10), width, trunc(ref, width), st.Render(fmt.Sprintf("%-11s", status)), msg))
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

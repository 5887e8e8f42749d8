package tui

import (
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/table"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/internal/human"
)

// page collects a screen's lines and where the terminal cursor goes. Lines
// added with line wrap to the page's width (messages are never cut); rows
// added with row are table rows, cut with … (a detail view shows them in
// full). pinned lines (buttons, actions) stay at the bottom of the body
// when the rest has to scroll.
type page struct {
	width     int
	lines     []string
	pinned    []string
	cursorRow int
	cursorCol int
	cursor    bool
	// focus is a line kept in view when the body scrolls (-1: none).
	focus int
}

func newPage(width int) *page { return &page{width: width, focus: -1} }

func (p *page) add(format string, args ...any) { p.line(fmt.Sprintf(format, args...)) }

// line adds s wrapped to the page width; continuation lines are indented
// like s.
func (p *page) line(s string) {
	plain := ansi.Strip(s)
	p.hang(s, len(plain)-len(strings.TrimLeft(plain, " ")))
}

// hang adds s wrapped to the page width, continuation lines indented by
// indent columns.
func (p *page) hang(s string, indent int) {
	p.lines = append(p.lines, wrap(s, p.width, indent)...)
}

// row adds a table row, cut at the page width.
func (p *page) row(s string) {
	if ansi.StringWidth(s) > p.width {
		s = ansi.Truncate(s, p.width, "…")
	}
	p.lines = append(p.lines, s)
}

func (p *page) blank() { p.lines = append(p.lines, "") }

// pin adds s, wrapped, to the lines that always stay visible.
func (p *page) pin(s string) {
	plain := ansi.Strip(s)
	p.pinned = append(p.pinned, wrap(s, p.width, len(plain)-len(strings.TrimLeft(plain, " ")))...)
}

// pinParts pins parts (actions) joined by two spaces, wrapped between
// parts, never inside one.
func (p *page) pinParts(parts []string) {
	cur := ""
	for _, part := range parts {
		switch {
		case cur == "":
			cur = part
		case ansi.StringWidth(cur)+2+ansi.StringWidth(part) <= p.width:
			cur += "  " + part
		default:
			p.pinned, cur = append(p.pinned, cur), part
		}
	}
	if cur != "" {
		p.pin(cur)
	}
}

// pinButtons pins buttons on one line when they fit, else one a line.
func (p *page) pinButtons(indent string, buttons ...string) {
	one := indent + strings.Join(buttons, "   ")
	if ansi.StringWidth(one) <= p.width {
		p.pinned = append(p.pinned, one)
		return
	}
	for _, b := range buttons {
		p.pin(indent + b)
	}
}

// markFocus keeps the last line added in view when the body scrolls.
func (p *page) markFocus() { p.focus = len(p.lines) - 1 }

// wrap breaks s into lines of at most width columns, continuation lines
// indented by indent (or not at all when that leaves too little room).
// Line breaks in s are kept; the lines after one are indented too.
func wrap(s string, width, indent int) []string {
	if indent > width/2 {
		indent = 0
	}
	pad := strings.Repeat(" ", indent)
	var out []string
	for i, seg := range strings.Split(s, "\n") {
		if i > 0 && !strings.HasPrefix(ansi.Strip(seg), pad) {
			seg = pad + seg
		}
		if ansi.StringWidth(seg) <= width {
			out = append(out, seg)
			continue
		}
		// The text after the leading spaces is wrapped at width-indent,
		// so every continuation line has room for the indent.
		text := strings.TrimLeft(seg, " ")
		lead := seg[:len(seg)-len(text)]
		if len(lead) > indent {
			text, lead = seg, ""
		}
		for j, l := range wordWrap(text, width-indent) {
			if j == 0 {
				l = lead + l
			} else {
				l = pad + strings.TrimLeft(l, " ")
			}
			out = append(out, l)
		}
	}
	return out
}

// wordWrap breaks s into lines of at most width cells at spaces only, so
// paths, names and flags (kiln-tenant-a, --token-dir) stay whole for
// copy-paste; a word wider than width is broken after a / (a path at its
// segments) and only a segment wider than width is cut inside. ANSI
// styles pass through (they hold no spaces).
func wordWrap(s string, width int) []string {
	width = max(width, 1)
	var out []string
	cur, curW := "", 0
	flush := func() {
		out = append(out, cur)
		cur, curW = "", 0
	}
	for _, w := range strings.Split(s, " ") {
		ww := ansi.StringWidth(w)
		switch {
		case curW > 0 && curW+1+ww <= width:
			cur, curW = cur+" "+w, curW+1+ww
			continue
		case curW > 0:
			flush()
		}
		if ww <= width {
			cur, curW = w, ww
			continue
		}
		for _, piece := range splitWide(w, width) {
			if curW > 0 {
				flush()
			}
			cur, curW = piece, ansi.StringWidth(piece)
		}
	}
	if curW > 0 || len(out) == 0 {
		flush()
	}
	return out
}

// splitWide breaks one word wider than width after its slashes, packing
// segments greedily; a segment wider than width is hard-wrapped.
func splitWide(w string, width int) []string {
	var out []string
	cur := ""
	for _, seg := range strings.SplitAfter(w, "/") {
		if ansi.StringWidth(cur+seg) <= width {
			cur += seg
			continue
		}
		if cur != "" {
			out = append(out, cur)
			cur = ""
		}
		if ansi.StringWidth(seg) <= width {
			cur = seg
			continue
		}
		parts := strings.Split(ansi.Hardwrap(seg, width, false), "\n")
		out = append(out, parts[:len(parts)-1]...)
		cur = parts[len(parts)-1]
	}
	if cur != "" {
		out = append(out, cur)
	}
	return out
}

// input adds a labelled text input and, if focused, puts the cursor in it
// and keeps it in view.
func (p *page) input(label string, in interface {
	View() string
	Cursor() *tea.Cursor
}) {
	p.row(label + in.View())
	if c := in.Cursor(); c != nil {
		p.cursor, p.cursorRow, p.cursorCol = true, len(p.lines)-1, lipgloss.Width(label)+c.X
		p.markFocus()
	}
}

// View renders the current screen, fitted to the terminal: the title, the
// body (scrolled when it does not fit, pinned lines always shown) and the
// key hints, wrapped.
func (m *Model) View() tea.View {
	w, h := max(m.width, 20), max(m.height, 6)
	footer := m.footer(w)
	if len(footer) > max(h/3, 1) {
		footer = footer[:max(h/3, 1)]
	}
	rows := h - 1 - len(footer)
	body := newPage(w)
	var title string
	switch {
	case m.help:
		title = "keys"
		m.viewHelp(body)
	case m.detail != nil:
		title = m.detail.title
		m.viewDetail(body, rows)
	default:
		title = m.renderScreen(body, rows)
	}
	lines := make([]string, 0, h)
	lines = append(lines, m.st.title.Render("kiln")+m.st.faint.Render(" · "+title))

	pinned := body.pinned
	if len(pinned) > rows-1 {
		pinned = pinned[len(pinned)-max(rows-1, 0):]
	}
	area := rows - len(pinned)
	shown, offset := body.lines, 0
	m.maxScroll = 0
	if len(shown) > area {
		view := max(area-1, 0) // one row says there is more
		m.maxScroll = len(shown) - view
		offset = clamp(m.scroll, 0, m.maxScroll)
		keep := body.focus
		if body.cursor {
			keep = body.cursorRow
		}
		if keep >= 0 {
			if keep < offset {
				offset = keep
			} else if keep >= offset+view {
				offset = keep - view + 1
			}
		}
		m.scroll = offset
		shown = append(append([]string(nil), shown[offset:offset+view]...),
			m.st.faint.Render(fmt.Sprintf("── %d of %d lines · pgup/pgdn scroll ──", view, len(body.lines))))
	}
	lines = append(lines, shown...)
	if len(pinned) > 0 && len(body.lines) > 0 && len(lines)+1+len(pinned) <= 1+rows && m.maxScroll == 0 {
		lines = append(lines, "") // pinned lines follow the body when it fits
	}
	for m.maxScroll > 0 && len(lines) < 1+rows-len(pinned) {
		lines = append(lines, "")
	}
	lines = append(lines, pinned...)
	for len(lines) < 1+rows {
		lines = append(lines, "")
	}
	lines = append(lines, footer...)
	for i, l := range lines {
		if ansi.StringWidth(l) > w {
			lines[i] = ansi.Truncate(l, w, "…")
		}
	}
	v := tea.NewView(strings.Join(lines, "\n"))
	v.AltScreen = true
	if m.screen == screenInspect || m.screen == screenProject {
		v.MouseMode = tea.MouseModeCellMotion // the wheel scrolls
	}
	if row := body.cursorRow - offset; body.cursor && !m.help && m.detail == nil && row >= 0 && row < len(shown) && body.cursorCol < w {
		v.Cursor = tea.NewCursor(body.cursorCol, row+1)
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
	case screenUpgrade, screenUpgradePlan, screenRotate, screenRotateConfirm:
		return m.viewDayTwo(body, rows)
	case screenProjectNew:
		m.viewNewProject(body)
		return "new project"
	case screenProjectDelete:
		m.viewDeleteProject(body)
		return "delete project " + ref(m.insp.del.project)
	}
	m.viewHome(body, rows)
	return "clusters"
}

// footer is the key hints of the screen, or the question being asked,
// wrapped between hints.
func (m *Model) footer(w int) []string {
	switch {
	case m.askQuit:
		return wrap(m.st.warn.Render("Quit kiln? y/N"), w, 0)
	case m.askCancel:
		return wrap(m.st.warn.Render(fmt.Sprintf("Cancel the running %s? It stops at a safe point. y/N", m.run.kind)), w, 0)
	case m.cancelling && m.run != nil && m.run.running:
		return wrap(m.st.warn.Render("cancelling… waiting for the engine to stop safely"), w, 0)
	}
	var keys []key.Binding
	switch {
	case m.help:
		keys = bindings([]keyHelp{{"?/esc", "close help"}})
	case m.detail != nil:
		keys = bindings([]keyHelp{{"↑/↓", "scroll"}, {"esc", "back"}})
	default:
		keys = m.keys(true)
	}
	return m.helpLines(keys, w)
}

// viewDetail shows the detail's lines, wrapped, in its viewport of the
// body's rows; when they do not fit, the last row says which are shown.
func (m *Model) viewDetail(p *page, rows int) {
	var lines []string
	for _, l := range m.detail.lines {
		plain := ansi.Strip(l)
		lines = append(lines, wrap(l, p.width, len(plain)-len(strings.TrimLeft(plain, " ")))...)
	}
	v := &m.detail.vp
	v.SetWidth(p.width)
	v.SetContentLines(lines)
	h := max(rows, 1)
	if len(lines) > h {
		h = max(rows-1, 1) // one row says there is more
	}
	v.SetHeight(h)
	for _, l := range strings.Split(v.View(), "\n") {
		p.row(strings.TrimRight(l, " "))
	}
	if len(lines) > h {
		first := v.YOffset() + 1
		p.row(m.st.faint.Render(fmt.Sprintf("── lines %d–%d of %d · ↑/↓ pgup/pgdn scroll ──", first, min(first+h-1, len(lines)), len(lines))))
	}
}

func (m *Model) spinner() string {
	return m.spin.View()
}

func (m *Model) viewHelp(p *page) {
	p.line(m.st.header.Render("Keys on this screen"))
	p.blank()
	for _, k := range m.keys(false) {
		keys, desc, long := explained(k)
		line := fmt.Sprintf("  %-12s %s", keys, desc)
		if long != "" {
			line += m.st.faint.Render(" — " + long)
		}
		p.hang(line, 15)
	}
	p.blank()
	p.line(m.st.faint.Render("Everywhere: ? shows this help (also in a text field: it never types), esc goes back, q quits from the home screen. ctrl+c at a question answers no; during a run it asks, then cancels safely; elsewhere it asks before quitting."))
}

func (m *Model) viewHome(p *page, rows int) {
	p.line(m.st.header.Render("Kiln clusters across kubeconfig contexts"))
	p.blank()
	switch {
	case m.homeLoading && len(m.clusters) == 0:
		p.line(m.spinner() + " discovering kiln clusters in every context…")
	case m.homeErr != "":
		p.hang(m.st.errorText.Render("✗ "+m.homeErr), 2)
	case len(m.clusters) == 0:
		p.line("No kiln cluster found. Press n to create one.")
	default:
		cols := []table.Column{{Title: "PROV", Width: 7}, {Title: "NAME", Width: 15}, {Title: "CONTEXT", Width: 18}, {Title: "PLATFORM", Width: 15}, {Title: "PROJ", Width: 5}, {Title: "TOKEN DIR"}}
		trows := make([]table.Row, len(m.clusters))
		for i, c := range m.clusters {
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
			// Projects as kiln list counts them: "-" without a platform or
			// when they could not be read.
			projects := fmt.Sprintf("%4s", "-")
			if c.Platform == engine.PlatformInstalled && c.Projects >= 0 {
				projects = fmt.Sprintf("%4d", c.Projects)
			}
			trows[i] = table.Row{c.Provider, name, c.Location, c.Platform, projects, td}
		}
		p.addTable(m.renderTable(&m.homeTable, cols, trows, m.homeSel, p.width, max(rows-len(p.lines)-9, 4)))
		if m.homeLoading {
			p.line(m.spinner() + m.st.faint.Render(" refreshing…"))
		}
		c := m.clusters[m.homeSel]
		p.blank()
		if len(c.KeyIDs) > 0 {
			p.hang(fmt.Sprintf("Trusted keys: %s", strings.Join(shortKeys(c.KeyIDs), ", ")), 14)
		}
		if c.TokenDir != "" {
			p.hang(fmt.Sprintf("Token dir:    %s", c.TokenDir), 14)
		} else if c.Err == "" {
			p.line("Token dir:    none known with a key this cluster trusts")
		}
		if c.Err != "" {
			p.hang(m.st.errorText.Render(fmt.Sprintf("✗ %s %s: %s", locationNoun(c.Provider), c.Location, c.Err)), 2)
		}
	}
	m.viewRegions(p)
	if m.homeNote != "" {
		p.blank()
		p.hang(m.st.warn.Render("! "+m.homeNote), 2)
	}
	acts := []keyHelp{{"n", "new cluster"}, {"c", "continue"}, {"i", "inspect"}, {"d", "destroy"}, {"r", "refresh"}}
	if m.lastRun != nil {
		acts = append(acts, keyHelp{"l", "last run"})
	}
	p.pinParts(m.actionParts(append(acts, keyHelp{"q", "quit"})))
}

func (m *Model) actions(ks []keyHelp) string { return strings.Join(m.actionParts(ks), "  ") }

func (m *Model) actionParts(ks []keyHelp) []string {
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = "[" + m.st.key.Render(k.key) + "] " + k.desc
	}
	return parts
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

// formNote adds a line under a form field: a problem (✗), a fact (✓) or a
// hint, wrapped under the field's value.
func (m *Model) formNote(p *page, st lipgloss.Style, text string) {
	p.hang(strings.Repeat(" ", 15)+st.Render(text), 17)
}

// viewCfgCheck shows the state of a config file field's check under the
// field, with note (the form's indent): what an empty field means, that the
// check is under way, that the file is valid, or each problem.
func (m *Model) viewCfgCheck(p *page, c cfgCheck, empty string, note func(p *page, st lipgloss.Style, text string)) {
	switch {
	case c.path == "":
		note(p, m.st.faint, empty)
	case c.pending:
		note(p, m.st.faint, "checking…")
	case len(c.problems) == 0:
		note(p, m.st.ok, "✓ valid cluster config")
	default:
		for _, pr := range c.problems {
			note(p, m.st.errorText, "✗ "+pr)
		}
	}
}

// button renders a button's label, in the focused style when it has the
// focus.
func (m *Model) button(label string, focused bool) string {
	if focused {
		return m.st.buttonFocus.Render(label)
	}
	return m.st.button.Render(label)
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

func (m *Model) viewDiscover(p *page) {
	r := m.run
	el := m.opts.Now().Sub(r.started)
	if ph := r.phase("discover"); ph != nil && ph.state != engine.PhaseStarted {
		el = time.Duration(ph.elapsedMS) * time.Millisecond
	}
	p.line(m.spinner() + " Discovering kiln clusters in every kubeconfig context… " + m.st.faint.Render(human.Elapsed(el)))
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
		p.hang(line, 4)
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
		p.hang(fmt.Sprintf("  Token dir        %s", q.TokenDir), 19)
		p.line("                   " + m.st.ok.Render("✓ holds a key the cluster trusts"))
	} else {
		p.line("  Token dir        " + m.st.warn.Render("none found with a trusted key"))
	}
	p.blank()
	p.line("Continuing reuses the key material the cluster already trusts: no key is generated, the token dir is kept, and missing or drifted platform objects are put back. Cancel changes nothing.")
	if q.TokenDir == "" {
		p.line(m.st.warn.Render("Without a trusted token dir, continuing stops and says where kiln looked; the create form's Token dir field (n) can name the right one."))
	}
	b1, b2 := "[ Continue with existing credentials ]", "[ Cancel ]"
	b1, b2 = m.button(b1, m.contFocus == 0), m.button(b2, m.contFocus != 0)
	p.pinButtons("  ", b1, b2)
}

func (m *Model) viewDestroy(p *page) {
	q := m.destAsk.q
	p.line(m.st.fail.Render("Destroy cluster " + q.Name))
	p.blank()
	p.add("This removes kiln cluster %s from %s context %s: its platform objects and tenant namespaces (%s), each verified gone. The keyring entry is removed.",
		q.Name, q.Provider, q.Location, strings.Join(q.Tenants, ", "))
	if q.Projects != "" {
		p.add("Their %s are removed with them.", q.Projects)
	}
	if q.TokenDir != "" {
		p.add("The token dir %s is moved aside, never deleted.", q.TokenDir)
	}
	p.blank()
	p.line("Type the cluster name to confirm:")
	p.input("  > ", m.destIn)
	if m.destErr != "" {
		p.hang(m.st.errorText.Render("✗ "+m.destErr), 2)
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
			done = append(done, ph.name)
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
// exit code, or a neutral line for the user's own cancel.
func (m *Model) viewResult(p *page) {
	r := m.run
	switch {
	case r.result == nil:
	case r.result.OK:
		p.hang(m.st.ok.Render("✓ "+r.result.Message), 2)
	case r.cancelled():
		msg := r.result.Message
		if strings.Contains(msg, "nothing was changed") || strings.Contains(msg, "nothing is changed") {
			msg = "nothing was changed"
		}
		p.hang(m.st.header.Render("○ cancelled — "+msg), 2)
	default:
		p.hang(m.st.fail.Render(fmt.Sprintf("✗ %s (exit %d)", r.result.Message, r.result.ExitCode)), 2)
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

func (m *Model) viewFinal(p *page) {
	r := m.run
	p.hang(m.st.ok.Render("✓ "+r.result.Message), 2)
	p.blank()
	td := r.result.TokenDir
	if td == "" {
		td = "(none)"
	}
	p.hang(fmt.Sprintf("  Token dir     %s", td), 16)
	prov := r.provider
	if prov == "" {
		prov = "kube"
	}
	next := NextCommands(Target{Provider: prov, Name: r.name, Location: r.location})
	if r.provider == "aws" {
		p.hang(fmt.Sprintf("  Region        %s", r.location), 16)
	} else {
		p.hang(fmt.Sprintf("  Kube context  %s", r.location), 16)
	}
	p.blank()
	p.line(m.st.header.Render("Next"))
	p.hang("  "+m.actions([]keyHelp{{"i", "inspect " + r.name}})+m.st.faint.Render("   its platform objects and projects; n there makes a project"), 4)
	p.hang("  "+m.actions([]keyHelp{{"u", "upgrade"}, {"K", "rotate key"}, {"l", "review the run"}}), 4)
	p.blank()
	p.line(m.st.faint.Render("From a shell"))
	for _, c := range next {
		line := "  " + c[0]
		if c[1] != "" {
			line += m.st.faint.Render("   # " + c[1])
		}
		p.hang(line, 4)
	}
	p.pin(m.st.faint.Render(fmt.Sprintf("l: review the run (%d resources, %d log lines) · Enter or Esc: back to clusters", len(r.resources), len(r.logs))))
}

func trunc(s string, n int) string {
	if ansi.StringWidth(s) <= n {
		return s
	}
	return ansi.Truncate(s, n, "…")
}

// inspectHeader is the first lines of both inspect screens: the cluster,
// its readiness and when it was last read, or that a read is under way.
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
	fixed := len(p.lines) + 1 + 1 + 1 + 2 + 3 + 2 // headers, tenants, tokens, entry and isolation, projects head, actions
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
	p.blank()
	shownProjects := s.projects()
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
			reasons := strings.Join(pr.Reasons, "; ")
			if pr.Operation != "" {
				reasons = "(" + pr.Operation + ") " + reasons
			}
			state := pr.State
			if i-s.sel < 2*rows && s.sel-i < 2*rows {
				state = m.projectState(pr.State).Render(state) // styled only where the table can show it
			}
			trows[i] = table.Row{ref(pr), state, pr.Stack, fmt.Sprintf("%4s", a), reasons}
		}
		p.addTable(m.renderTable(&s.table, cols, trows, s.sel, p.width, max(rows-len(p.lines)-4, 4)))
		if why := s.hiddenSel(); why != "" {
			p.hang(m.st.faint.Render("  "+why), 4)
		}
	}
	m.inspectActions(p, shownProjects)
}

// cell fits s to exactly n terminal columns (display width, so wide
// characters count twice): cut with … or padded with spaces.
func cell(s string, n int) string {
	if ansi.StringWidth(s) > n {
		s = ansi.Truncate(s, n, "…")
	}
	return s + strings.Repeat(" ", max(n-ansi.StringWidth(s), 0))
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

// NextCommands are the commands the final screen of a create of cluster t
// suggests, each with what it is for ("" for nothing to say): runnable as
// shown, on the cluster at hand (its context or region named).
func NextCommands(t Target) [][2]string {
	at := locationFlag(t)
	if t.Provider == "aws" {
		return [][2]string{
			{"kiln status aws " + t.Name + at, "health from live objects"},
			{"kiln wait aws " + t.Name + at + " --timeout 2m", "ready and tokens valid?"},
			{"kiln inspect aws " + t.Name + at, "the live inspector"},
			{"kiln destroy aws " + t.Name + at, "verified removal"},
		}
	}
	return [][2]string{
		{"kiln status kube " + t.Name + at, "health from live objects"},
		{"kiln wait kube " + t.Name + at + " --timeout 2m", "ready and tokens valid?"},
		{"kubectl --context " + t.Location + " -n kiln-system get all", ""},
		{"kiln destroy kube " + t.Name + at, "verified removal"},
	}
}

// locationFlag names t's location as the CLI takes it (" --context C",
// " --region R"; "" when there is none).
func locationFlag(t Target) string {
	switch {
	case t.Location == "":
		return ""
	case t.Provider == "aws":
		return " --region " + t.Location
	}
	return " --context " + t.Location
}

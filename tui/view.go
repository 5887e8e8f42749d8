package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
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

func trunc(s string, n int) string {
	if ansi.StringWidth(s) <= n {
		return s
	}
	return ansi.Truncate(s, n, "…")
}

// cell fits s to exactly n terminal columns (display width, so wide
// characters count twice): cut with … or padded with spaces.
func cell(s string, n int) string {
	if ansi.StringWidth(s) > n {
		s = ansi.Truncate(s, n, "…")
	}
	return s + strings.Repeat(" ", max(n-ansi.StringWidth(s), 0))
}

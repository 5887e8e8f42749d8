package tui

import (
	"fmt"
	"slices"
	"strings"

	"charm.land/bubbles/v2/table"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/event"
)

// markCol is the table column that marks the selected row with ">", so
// the selection shows without colour or reverse too.
var markCol = table.Column{Title: "", Width: 2}

// newTable is a bubbles table in the wizard's styles: a one-cell gap
// after each column (the columns' widths include it), the header faint,
// the selected row reversed.
func (m *Model) newTable() table.Model {
	t := table.New(table.WithFocused(false))
	t.SetStyles(m.tableStyles(m.st.selected))
	return t
}

// tableStyles are the wizard's table styles with selected for the
// selected row.
func (m *Model) tableStyles(selected lipgloss.Style) table.Styles {
	return table.Styles{Header: m.st.faint.PaddingRight(1), Cell: lipgloss.NewStyle().PaddingRight(1), Selected: selected}
}

// renderTable lays rows out in t — every column sized in terminal cells
// (display width: a wide character counts twice), cut with … — with row
// sel selected and at most height rows (header included) shown, the
// table scrolling to keep sel in view; the last column takes the rest of
// width. Cells of the selected row are shown without their own styles,
// so its reverse runs the whole row.
func (m *Model) renderTable(t *table.Model, cols []table.Column, rows []table.Row, sel, width, height int) []string {
	used := markCol.Width
	for _, c := range cols[:len(cols)-1] {
		used += c.Width
	}
	cols[len(cols)-1].Width = max(width-used, 2)
	cols = append([]table.Column{markCol}, cols...)
	for i := range cols {
		cols[i].Width-- // the gap is the cells' padding
	}
	full := make([]table.Row, len(rows))
	for i, r := range rows {
		mark := ""
		if i == sel {
			mark = ">"
			r = append(table.Row(nil), r...)
			for j := range r {
				r[j] = ansi.Strip(r[j])
			}
		}
		full[i] = append(table.Row{mark}, r...)
	}
	// Each setter re-renders the rows in view: set only what changed.
	if !slices.Equal(t.Columns(), cols) {
		t.SetColumns(cols)
	}
	if t.Width() != width {
		t.SetWidth(width)
	}
	if h := max(height, 2); t.Height() != h-1 { // the header takes a row
		t.SetHeight(h)
	}
	t.SetRows(full)
	// Move (not SetCursor), so the table scrolls the selection into view.
	if d := sel - t.Cursor(); d > 0 {
		t.MoveDown(d)
	} else if d < 0 {
		t.MoveUp(-d)
	}
	view := t.View()
	if sel < 0 {
		// No row is selected: the table's cursor row is drawn as any other.
		t.SetStyles(m.tableStyles(lipgloss.NewStyle()))
		view = t.View()
		t.SetStyles(m.tableStyles(m.st.selected))
	}
	var out []string
	for _, l := range strings.Split(view, "\n") {
		if strings.TrimSpace(ansi.Strip(l)) == "" && len(out) > 0 {
			continue // the table's padding below its rows
		}
		out = append(out, strings.TrimRight(l, " "))
	}
	return out
}

// addTable adds a table's lines to p, keeping the selected row in view
// when the page scrolls.
func (p *page) addTable(lines []string) {
	for _, l := range lines {
		p.row(l)
		if strings.HasPrefix(ansi.Strip(l), ">") {
			p.markFocus()
		}
	}
}

// fitWidths sizes columns to a line of total cells: each column gets its
// natural width want[i] when they all fit; otherwise the widest columns
// give up cells first, one at a time, none below its least[i]. A column
// whose want is below its least keeps its want. The result may still sum
// to more than total when even the least widths do not fit: the line is
// then cut at the screen's edge. Nothing is cut while space is unused.
func fitWidths(want, least []int, total int) []int {
	w := slices.Clone(want)
	sum := 0
	for _, v := range w {
		sum += v
	}
	for sum > total {
		best := -1
		for i := range w {
			if w[i] > least[i] && (best < 0 || w[i] > w[best]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		w[best]--
		sum--
	}
	return w
}

// widest is the display width of the widest of ss (at least of min).
func widest(min int, ss ...string) int {
	w := min
	for _, s := range ss {
		w = max(w, ansi.StringWidth(s))
	}
	return w
}

// objectLine is one live object's row: status mark, kind, reference
// (namespace/name), status and message.
type objectLine struct {
	kind, ref string
	status    event.Status
	msg       string
}

// objectRows renders live objects as a table fitted to the page: kind and
// reference as wide as their longest values, the message the rest; when
// the page is too narrow the longest of them give up cells first.
func (m *Model) objectRows(p *page, objs []objectLine) {
	if len(objs) == 0 {
		return
	}
	var kinds, refs, msgs []string
	for _, o := range objs {
		kinds, refs, msgs = append(kinds, o.kind), append(refs, o.ref), append(msgs, o.msg)
	}
	const prefix, statusW = 3, 11 // " ✓ ", "InProgress "
	want := []int{widest(0, kinds...), widest(0, refs...), widest(0, msgs...)}
	w := fitWidths(want, []int{7, 16, 12}, p.width-prefix-statusW-3)
	for _, o := range objs {
		st, mark := m.st.status(o.status)
		p.row(fmt.Sprintf(" %s %s %s %s %s", st.Render(mark), cell(o.kind, w[0]), cell(o.ref, w[1]), st.Render(fmt.Sprintf("%-11s", o.status)), o.msg))
	}
}

// projectColumns are the project table's columns fitted to width: each as
// wide as its longest value (or title) plus its gap, REASONS the rest;
// when they do not fit the longest give up cells first.
func (m *Model) projectColumns(ps []engine.ProjectStatus, width int) []table.Column {
	var refs, states, stacks, reasons []string
	for _, p := range ps {
		refs, states, stacks = append(refs, ref(p)), append(states, p.State), append(stacks, p.Stack)
		reasons = append(reasons, projectReasons(p))
	}
	want := []int{widest(len("TENANT/PROJECT"), refs...) + 1, widest(len("STATE"), states...) + 1, widest(len("STACK"), stacks...) + 1, 6, widest(len("REASONS"), reasons...) + 1}
	w := fitWidths(want, []int{16, 10, 8, 6, 12}, width-markCol.Width)
	return []table.Column{{Title: "TENANT/PROJECT", Width: w[0]}, {Title: "STATE", Width: w[1]}, {Title: "STACK", Width: w[2]}, {Title: " AGE", Width: w[3]}, {Title: "REASONS"}}
}

// projectReasons is the REASONS cell of a project's row: the operation
// under way, if any, then why its observed state differs.
func projectReasons(p engine.ProjectStatus) string {
	r := strings.Join(p.Reasons, "; ")
	if p.Operation != "" {
		r = "(" + p.Operation + ") " + r
	}
	return r
}

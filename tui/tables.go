package tui

import (
	"slices"
	"strings"

	"charm.land/bubbles/v2/table"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
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

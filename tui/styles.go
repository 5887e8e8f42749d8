package tui

import (
	"image/color"
	"io"
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/colorprofile"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/event"
)

// styles holds every style the wizard uses, so a reader finds the look of
// every screen in one place. Colour is applied here only; the program's
// colour profile (Ascii under NO_COLOR, none under TERM=dumb) strips it on
// output, and every status also has a symbol so nothing relies on colour.
type styles struct {
	title, header, faint, bold, errorText, key, selected, button, buttonFocus, box lipgloss.Style
	ok, fail, progress, notFound, warn, placeholder                                lipgloss.Style
}

var (
	colGreen  color.Color = lipgloss.Color("2")
	colRed    color.Color = lipgloss.Color("1")
	colYellow color.Color = lipgloss.Color("3")
	colBlue   color.Color = lipgloss.Color("4")
	colGrey   color.Color = lipgloss.Color("8")
)

func newStyles() styles {
	return styles{
		title:       lipgloss.NewStyle().Bold(true).Foreground(colBlue),
		header:      lipgloss.NewStyle().Bold(true),
		faint:       lipgloss.NewStyle().Foreground(colGrey),
		bold:        lipgloss.NewStyle().Bold(true),
		errorText:   lipgloss.NewStyle().Foreground(colRed),
		key:         lipgloss.NewStyle().Bold(true),
		selected:    lipgloss.NewStyle().Reverse(true),
		button:      lipgloss.NewStyle(),
		buttonFocus: lipgloss.NewStyle().Reverse(true).Bold(true),
		box:         lipgloss.NewStyle().Border(lipgloss.NormalBorder()).Padding(0, 1),
		ok:          lipgloss.NewStyle().Foreground(colGreen),
		fail:        lipgloss.NewStyle().Foreground(colRed).Bold(true),
		progress:    lipgloss.NewStyle().Foreground(colYellow),
		notFound:    lipgloss.NewStyle().Foreground(colGrey),
		warn:        lipgloss.NewStyle().Foreground(colYellow),
		placeholder: lipgloss.NewStyle().Foreground(colGrey).Faint(true).Italic(true),
	}
}

// status returns the style and symbol of a resource status.
func (s styles) status(st event.Status) (lipgloss.Style, string) {
	switch st {
	case engine.StatusCurrent:
		return s.ok, "✓"
	case engine.StatusFailed:
		return s.fail, "✗"
	case engine.StatusNotFound:
		return s.notFound, "○"
	case engine.StatusTerminating:
		return s.warn, "↓"
	default:
		return s.progress, "…"
	}
}

// ColorProfile is the profile the wizard renders with: detected from the
// output and environment, then capped at Ascii (no colour, bold and reverse
// kept so focus stays visible) when NO_COLOR is set to any value — the
// detector only honours boolean values — or TERM is dumb, even with
// CLICOLOR_FORCE.
func ColorProfile(out io.Writer, environ []string) colorprofile.Profile {
	p := colorprofile.Detect(out, environ)
	noColor := false
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if k == "NO_COLOR" || k == "TERM" && v == "dumb" {
			noColor = true
		}
	}
	if noColor || p < colorprofile.Ascii {
		p = colorprofile.Ascii
	}
	return p
}

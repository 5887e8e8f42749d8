package tui

import (
	"context"
	"io"

	tea "charm.land/bubbletea/v2"
)

// RunWith opens the wizard on in/out with opts (kiln inspect: Inspect,
// InspectOnly, ReadOnly) and returns when the user quits; opts.Bridge is
// set here. environ is the process environment (colour detection:
// NO_COLOR, TERM=dumb).
func RunWith(ctx context.Context, opts Options, in io.Reader, out io.Writer, environ []string) error {
	bridge := NewBridge()
	opts.Bridge = bridge
	m := New(opts)
	p := tea.NewProgram(m,
		tea.WithContext(ctx),
		tea.WithInput(in),
		tea.WithOutput(out),
		tea.WithEnvironment(environ),
		tea.WithColorProfile(ColorProfile(out, environ)),
	)
	bridge.Start(p.Send)
	_, err := p.Run()
	// An operation still running when the program ends (its context was
	// cancelled, say) is cancelled and awaited, so the engine releases its
	// lock before kiln exits.
	if m.run != nil {
		m.run.cancel()
	}
	m.closeInspect()
	m.ops.Wait()
	bridge.Stop()
	return err
}

package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/internal/cli/ndjson"
	"github.com/kilnctl/kiln/internal/human"
)

// printer is how the headless frontend shows an operation's events: the
// JSON printer writes the NDJSON of DESIGN.md §8 on stdout (-o json), the
// text printer readable lines on stderr. Both are the event.Sink the
// engine's Reporter sends to (behind the log file's tee).
type printer interface {
	event.Sink
}

var (
	_ printer = (*jsonPrinter)(nil)
	_ printer = (*textPrinter)(nil)
)

// jsonPrinter writes each event as one JSON line (DESIGN.md §8).
type jsonPrinter struct {
	mu sync.Mutex
	w  io.Writer
	// failures, when set, also gets a failed result's message as one
	// line, so a CI log shows why a run failed without parsing stdout
	// (which stays pure NDJSON).
	failures io.Writer
}

func newJSONPrinter(w io.Writer) *jsonPrinter { return &jsonPrinter{w: w} }

func (p *jsonPrinter) Emit(e event.Event) {
	if e.Type() == event.TypeSnapshot {
		return // not in the NDJSON schema (DESIGN.md §8)
	}
	b, err := ndjson.Marshal(e)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = p.w.Write(append(b, '\n'))
	if r, ok := e.Payload.(event.ResultEvent); ok && !r.OK && p.failures != nil {
		fmt.Fprintf(p.failures, "kiln: %s (exit %d)\n", oneLine(r.Message), ndjson.ExitCode(r))
	}
}

// oneLine folds a message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// textPrinter prints events as readable lines: ✓/✗ per phase with elapsed
// time, a line per resource status change, warnings and the result.
type textPrinter struct {
	mu sync.Mutex
	w  io.Writer
	// quiet prints only warnings, errors and failed phases (status uses it:
	// its report is the table).
	quiet bool
	// snapshot, when set, prints status --watch's snapshot; after it the
	// printer is no longer quiet: the changes that follow are the report.
	snapshot func(*engine.ClusterStatus)
}

func (s *textPrinter) Emit(e event.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := e.Payload.(*engine.ClusterStatus); ok {
		if s.snapshot != nil && st != nil {
			s.snapshot(st)
			s.quiet = false
		}
		return
	}
	if line := formatText(e, s.quiet); line != "" {
		fmt.Fprintln(s.w, line)
	}
}

func formatText(e event.Event, quiet bool) string {
	elapsed := func(ms int64) string { return human.Elapsed(time.Duration(ms) * time.Millisecond) }
	switch p := e.Payload.(type) {
	case event.PhaseEvent:
		switch p.State {
		case event.Started:
			if quiet {
				return ""
			}
			return fmt.Sprintf("• %s ...", p.Phase)
		case event.Succeeded:
			if quiet {
				return ""
			}
			return fmt.Sprintf("✓ %s (%s)", p.Phase, elapsed(p.ElapsedMS))
		case event.Skipped:
			if quiet {
				return ""
			}
			return fmt.Sprintf("- %s skipped: %s", p.Phase, p.Message)
		case event.Failed:
			return fmt.Sprintf("✗ %s (%s)", p.Phase, elapsed(p.ElapsedMS))
		}
	case event.DiscoveryEvent:
		if quiet {
			return ""
		}
		var b strings.Builder
		for i, c := range p.Clusters {
			if i > 0 {
				b.WriteString("\n")
			}
			name := c.Name
			if name == "" {
				name = "(no kiln cluster)"
			}
			fmt.Fprintf(&b, "  found %s %s: %s, infra %s, platform %s", c.Provider, c.Location, name, c.Infra, c.Platform)
			if len(c.KeyIDs) > 0 {
				fmt.Fprintf(&b, ", keys %s", strings.Join(c.KeyIDs, ","))
			}
			if c.TokenDir != nil {
				fmt.Fprintf(&b, ", token dir %s", *c.TokenDir)
			}
			if c.Error != "" {
				fmt.Fprintf(&b, " (%s)", c.Error)
			}
			fmt.Fprintf(&b, " [%s]", elapsed(c.ElapsedMS))
		}
		if len(p.Skipped) > 0 {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "  skipped (left out of discovery): %s", strings.Join(p.Skipped, ", "))
		}
		return b.String()
	case event.DecisionEvent:
		if quiet {
			return ""
		}
		return fmt.Sprintf("→ %s: %s", p.Decision, p.Reason)
	case event.ResourceEvent:
		if quiet {
			return ""
		}
		ref := strings.ToLower(p.Kind) + "/" + p.Name
		if p.Namespace != "" {
			ref = strings.ToLower(p.Kind) + " " + p.Namespace + "/" + p.Name
		}
		return fmt.Sprintf("  %s %s %s", statusMark(p.Status), ref, strings.TrimSpace(string(p.Status)+" "+dash(p.Message)))
	case *engine.FrontDoor:
		if quiet || p == nil {
			return ""
		}
		return "  " + strings.ReplaceAll(frontDoorText(*p), "\n", "\n  ")
	case *engine.Isolation:
		if quiet || p == nil {
			return ""
		}
		return "  network isolation: " + p.String()
	case event.LogEvent:
		if quiet && p.Level == event.LevelInfo {
			return ""
		}
		if p.Level == event.LevelInfo {
			return "  " + p.Message
		}
		return fmt.Sprintf("  %s: %s", p.Level, p.Message)
	case *engine.ProjectStatus:
		if quiet || p == nil {
			return ""
		}
		line := fmt.Sprintf("  project %s/%s: %s (desired %s)", p.Tenant, p.Project, p.State, p.Desired)
		if len(p.Reasons) > 0 {
			line += " — " + strings.Join(p.Reasons, "; ")
		}
		return line
	case event.PlanEvent:
		return formatPlan(p)
	case event.ResultEvent:
		if p.OK {
			if quiet {
				return ""
			}
			return "✓ " + p.Message
		}
		return fmt.Sprintf("✗ %s (exit %d)", p.Message, ndjson.ExitCode(p))
	}
	return ""
}

func dash(s string) string {
	if s == "" {
		return ""
	}
	return "— " + s
}

func statusMark(s event.Status) string {
	switch s {
	case event.StatusCurrent:
		return "✓"
	case event.StatusFailed:
		return "✗"
	case event.StatusNotFound:
		return "○"
	default:
		return "…"
	}
}

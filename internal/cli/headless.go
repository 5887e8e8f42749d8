package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/internal/exit"
	"github.com/kilnctl/kiln/internal/human"
)

// jsonSink writes each event as one JSON line (DESIGN.md §8).
type jsonSink struct {
	mu  sync.Mutex
	enc *json.Encoder
	// failures, when set, also gets a failed result's message as one
	// line, so a CI log shows why a run failed without parsing stdout
	// (which stays pure NDJSON).
	failures io.Writer
}

func newJSONSink(w io.Writer) *jsonSink { return &jsonSink{enc: json.NewEncoder(w)} }

func (s *jsonSink) Emit(e engine.Event) {
	if e.Type == engine.TypeSnapshot {
		return // not in the NDJSON schema (DESIGN.md §8)
	}
	if e.Type == engine.TypeResult {
		e.ExitCode = resultCode(e)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.enc.Encode(e)
	if e.Type == engine.TypeResult && !e.OK && s.failures != nil {
		fmt.Fprintf(s.failures, "kiln: %s (exit %d)\n", oneLine(e.Message), e.ExitCode)
	}
}

// resultCode is a result event's exit code (DESIGN.md §4): the CLI, not the
// engine, turns the result's error into its number. A failed result is
// never 0, even without an error to classify.
func resultCode(e engine.Event) int {
	if e.OK {
		return exit.OK
	}
	if c := exit.Code(e.Err); c != exit.OK {
		return c
	}
	return exit.Failed
}

// oneLine folds a message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// textSink prints events as readable lines: ✓/✗ per phase with elapsed
// time, a line per resource status change, warnings and the result.
type textSink struct {
	mu sync.Mutex
	w  io.Writer
	// quiet prints only warnings, errors and failed phases (status uses it:
	// its report is the table).
	quiet bool
	// snapshot, when set, prints status --watch's snapshot; after it the
	// sink is no longer quiet: the changes that follow are the report.
	snapshot func(*engine.ClusterStatus)
}

func (s *textSink) Emit(e engine.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.Type == engine.TypeSnapshot {
		if s.snapshot != nil && e.Snapshot != nil {
			s.snapshot(e.Snapshot)
			s.quiet = false
		}
		return
	}
	if line := formatText(e, s.quiet); line != "" {
		fmt.Fprintln(s.w, line)
	}
}

func formatText(e engine.Event, quiet bool) string {
	switch e.Type {
	case engine.TypePhase:
		switch e.State {
		case engine.PhaseStarted:
			if quiet {
				return ""
			}
			return fmt.Sprintf("• %s ...", e.Phase)
		case engine.PhaseSucceeded:
			if quiet {
				return ""
			}
			return fmt.Sprintf("✓ %s (%s)", e.Phase, human.Elapsed(time.Duration(e.ElapsedMS)*time.Millisecond))
		case engine.PhaseSkipped:
			if quiet {
				return ""
			}
			return fmt.Sprintf("- %s skipped: %s", e.Phase, e.Message)
		case engine.PhaseFailed:
			return fmt.Sprintf("✗ %s (%s)", e.Phase, human.Elapsed(time.Duration(e.ElapsedMS)*time.Millisecond))
		}
	case engine.TypeDiscovery:
		if quiet {
			return ""
		}
		var b strings.Builder
		for i, c := range e.Clusters {
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
			fmt.Fprintf(&b, " [%s]", human.Elapsed(time.Duration(c.ElapsedMS)*time.Millisecond))
		}
		if len(e.Skipped) > 0 {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "  skipped (left out of discovery): %s", strings.Join(e.Skipped, ", "))
		}
		return b.String()
	case engine.TypeDecision:
		if quiet {
			return ""
		}
		return fmt.Sprintf("→ %s: %s", e.Decision, e.Reason)
	case engine.TypeResource:
		if quiet {
			return ""
		}
		ref := strings.ToLower(e.Kind) + "/" + e.Name
		if e.Namespace != "" {
			ref = strings.ToLower(e.Kind) + " " + e.Namespace + "/" + e.Name
		}
		return fmt.Sprintf("  %s %s %s", statusMark(e.Status), ref, strings.TrimSpace(e.Status+" "+dash(e.Message)))
	case engine.TypeFrontDoor:
		if quiet || e.FrontDoor == nil {
			return ""
		}
		return "  " + strings.ReplaceAll(frontDoorText(*e.FrontDoor), "\n", "\n  ")
	case engine.TypeIsolation:
		if quiet || e.Isolation == nil {
			return ""
		}
		return "  network isolation: " + e.Isolation.String()
	case engine.TypeLog:
		if quiet && e.Level == engine.LevelInfo {
			return ""
		}
		if e.Level == engine.LevelInfo {
			return "  " + e.Message
		}
		return fmt.Sprintf("  %s: %s", e.Level, e.Message)
	case engine.TypeProject:
		if quiet || e.Project == nil {
			return ""
		}
		line := fmt.Sprintf("  project %s/%s: %s (desired %s)", e.Project.Tenant, e.Project.Project, e.Project.State, e.Project.Desired)
		if len(e.Project.Reasons) > 0 {
			line += " — " + strings.Join(e.Project.Reasons, "; ")
		}
		return line
	case engine.TypePlan:
		return formatPlan(e)
	case engine.TypeResult:
		if e.OK {
			if quiet {
				return ""
			}
			return "✓ " + e.Message
		}
		return fmt.Sprintf("✗ %s (exit %d)", e.Message, resultCode(e))
	}
	return ""
}

func dash(s string) string {
	if s == "" {
		return ""
	}
	return "— " + s
}

func statusMark(s string) string {
	switch s {
	case engine.StatusCurrent:
		return "✓"
	case engine.StatusFailed:
		return "✗"
	case engine.StatusNotFound:
		return "○"
	default:
		return "…"
	}
}

// headlessConfirmer answers from the flags: --continue and --yes. It never
// prompts, so automation gets exit 3 instead of a hang.
type headlessConfirmer struct {
	cont, yes bool
}

func (c headlessConfirmer) ConfirmContinue(context.Context, engine.ContinueQuestion) (bool, error) {
	return c.cont, nil
}

func (c headlessConfirmer) ConfirmDestroy(context.Context, engine.DestroyQuestion) (bool, error) {
	return c.yes, nil
}

// promptConfirmer asks on the terminal (used when stdin is a TTY and the
// operation runs without the wizard).
type promptConfirmer struct {
	in  *bufio.Reader
	out io.Writer
}

func (p promptConfirmer) ask(question string) bool {
	fmt.Fprintf(p.out, "%s [y/N] ", question)
	line, _ := p.in.ReadString('\n')
	ans := strings.ToLower(strings.TrimSpace(line))
	return ans == "y" || ans == "yes"
}

func (p promptConfirmer) ConfirmContinue(_ context.Context, q engine.ContinueQuestion) (bool, error) {
	fmt.Fprintf(p.out, "\nkiln platform %s is already installed in %s %s.\n", q.Name, q.Provider, q.Location)
	fmt.Fprintf(p.out, "  trusted keys: %s\n", strings.Join(q.TrustedKeyIDs, ", "))
	if q.TokenDir != "" {
		fmt.Fprintf(p.out, "  token dir:    %s (holds a trusted key)\n", q.TokenDir)
	} else {
		fmt.Fprintf(p.out, "  token dir:    none found with a trusted key\n")
	}
	fmt.Fprintf(p.out, "Continuing reuses the key the cluster already trusts; nothing is regenerated.\n")
	return p.ask("Continue with existing credentials?"), nil
}

func (p promptConfirmer) ConfirmDestroy(_ context.Context, q engine.DestroyQuestion) (bool, error) {
	fmt.Fprintf(p.out, "\nThis removes kiln cluster %s from %s %s: its platform and tenant namespaces %s.\n",
		q.Name, q.Provider, q.Location, strings.Join(q.Tenants, ", "))
	if q.Projects != "" {
		fmt.Fprintf(p.out, "Their %s are removed with them.\n", q.Projects)
	}
	fmt.Fprintf(p.out, "Type the cluster name to confirm: ")
	line, _ := p.in.ReadString('\n')
	return strings.TrimSpace(line) == q.Name, nil
}

package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/internal/exit"
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
	b, err := marshalEvent(e)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = p.w.Write(append(b, '\n'))
	if r, ok := e.Payload.(event.ResultEvent); ok && !r.OK && p.failures != nil {
		fmt.Fprintf(p.failures, "kiln: %s (exit %d)\n", oneLine(r.Message), exit.Code(r.Err))
	}
}

// resultExit is a result's exit code: 0 when OK, else the failure's.
func resultExit(r event.ResultEvent) int {
	if r.OK {
		return exit.OK
	}
	return exit.Code(r.Err)
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// marshalEvent writes the event in the NDJSON schema of DESIGN.md §8
// (contract: these keys, in this order).
func marshalEvent(e event.Event) ([]byte, error) {
	ts := e.Time.UTC().Format(time.RFC3339Nano)
	typ := e.Type()
	switch p := e.Payload.(type) {
	case event.PhaseEvent:
		return json.Marshal(struct {
			Time      string      `json:"time"`
			Type      event.Type  `json:"type"`
			Phase     event.Phase `json:"phase"`
			State     event.State `json:"state"`
			ElapsedMS int64       `json:"elapsed_ms"`
			Message   string      `json:"message"`
		}{ts, typ, p.Phase, p.State, p.ElapsedMS, p.Message})
	case event.DiscoveryEvent:
		clusters := p.Clusters
		if clusters == nil {
			clusters = []event.ClusterInfo{}
		}
		for i := range clusters {
			if clusters[i].KeyIDs == nil {
				clusters[i].KeyIDs = []string{}
			}
		}
		skipped := p.Skipped
		if skipped == nil {
			skipped = []string{}
		}
		source := p.Source
		if source == "" {
			source = event.SourceDiscovery
		}
		return json.Marshal(struct {
			Time      string              `json:"time"`
			Type      event.Type          `json:"type"`
			Clusters  []event.ClusterInfo `json:"clusters"`
			ElapsedMS int64               `json:"elapsed_ms"`
			Skipped   []string            `json:"skipped"`
			Source    string              `json:"source"`
		}{ts, typ, clusters, p.ElapsedMS, skipped, source})
	case event.DecisionEvent:
		return json.Marshal(struct {
			Time     string     `json:"time"`
			Type     event.Type `json:"type"`
			Decision string     `json:"decision"`
			Reason   string     `json:"reason"`
		}{ts, typ, p.Decision, p.Reason})
	case event.ResourceEvent:
		return json.Marshal(struct {
			Time      string       `json:"time"`
			Type      event.Type   `json:"type"`
			Kind      string       `json:"kind"`
			Namespace string       `json:"namespace"`
			Name      string       `json:"name"`
			Status    event.Status `json:"status"`
			Message   string       `json:"message"`
		}{ts, typ, p.Kind, p.Namespace, p.Name, p.Status, p.Message})
	case event.LogEvent:
		return json.Marshal(struct {
			Time    string      `json:"time"`
			Type    event.Type  `json:"type"`
			Level   event.Level `json:"level"`
			Message string      `json:"message"`
		}{ts, typ, p.Level, p.Message})
	case *engine.ProjectStatus:
		st := engine.ProjectStatus{}
		if p != nil {
			st = *p
		}
		return json.Marshal(struct {
			Time string     `json:"time"`
			Type event.Type `json:"type"`
			engine.ProjectStatus
		}{ts, typ, st})
	case *engine.ClusterStatus:
		return json.Marshal(struct {
			Time   string                `json:"time"`
			Type   event.Type            `json:"type"`
			Status *engine.ClusterStatus `json:"status"`
		}{ts, typ, p})
	case *engine.ClusterSummary:
		c := engine.ClusterSummary{}
		if p != nil {
			c = *p
		}
		keys := c.KeyIDs
		if keys == nil {
			keys = []string{}
		}
		var projects *int
		if c.Projects >= 0 && c.Platform == engine.PlatformInstalled {
			projects = &c.Projects
		}
		return json.Marshal(struct {
			Time     string     `json:"time"`
			Type     event.Type `json:"type"`
			Provider string     `json:"provider"`
			Name     string     `json:"name"`
			Location string     `json:"location"`
			Platform string     `json:"platform"`
			Version  *string    `json:"version"`
			Projects *int       `json:"projects"`
			KeyIDs   []string   `json:"key_ids"`
			TokenDir *string    `json:"token_dir"`
			Error    string     `json:"error,omitempty"`
		}{ts, typ, c.Provider, c.Name, c.Location, c.Platform, nullable(c.Version), projects, keys, nullable(c.TokenDir), c.Err})
	case event.PlanEvent:
		fields := p.Fields
		if fields == nil {
			fields = []string{}
		}
		return json.Marshal(struct {
			Time      string     `json:"time"`
			Type      event.Type `json:"type"`
			Action    string     `json:"action"`
			Kind      string     `json:"kind"`
			Namespace string     `json:"namespace"`
			Name      string     `json:"name"`
			Fields    []string   `json:"fields"`
			Message   string     `json:"message"`
		}{ts, typ, p.Action, p.Kind, p.Namespace, p.Name, fields, p.Message})
	case *engine.FrontDoor:
		f := engine.FrontDoor{}
		if p != nil {
			f = *p
		}
		return json.Marshal(struct {
			Time string     `json:"time"`
			Type event.Type `json:"type"`
			engine.FrontDoor
		}{ts, typ, f})
	case *engine.Isolation:
		i := engine.Isolation{}
		if p != nil {
			i = *p
		}
		return json.Marshal(struct {
			Time string     `json:"time"`
			Type event.Type `json:"type"`
			engine.Isolation
		}{ts, typ, i})
	case *engine.Access:
		a := engine.Access{}
		if p != nil {
			a = *p
		}
		if a.Entries == nil {
			a.Entries = []engine.AccessEntry{}
		}
		return json.Marshal(struct {
			Time string     `json:"time"`
			Type event.Type `json:"type"`
			engine.Access
		}{ts, typ, a})
	case event.ResultEvent:
		return json.Marshal(struct {
			Time     string     `json:"time"`
			Type     event.Type `json:"type"`
			OK       bool       `json:"ok"`
			ExitCode int        `json:"exit_code"`
			Message  string     `json:"message"`
			TokenDir *string    `json:"token_dir"`
		}{ts, typ, p.OK, resultExit(p), p.Message, nullable(p.TokenDir)})
	}
	return json.Marshal(struct {
		Time string     `json:"time"`
		Type event.Type `json:"type"`
	}{ts, typ})
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
		return fmt.Sprintf("✗ %s (exit %d)", p.Message, resultExit(p))
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

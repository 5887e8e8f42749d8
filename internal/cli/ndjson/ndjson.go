// Package ndjson is the NDJSON event schema of DESIGN.md §8 (contract):
// how kiln -o json (and --log-file) writes each event as one JSON object.
// The engine reports typed events (package event); this is their only
// encoding, so the schema lives in one place, beside the printers.
package ndjson

import (
	"encoding/json"
	"time"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/internal/exit"
)

// ExitCode is a result's exit code (DESIGN.md §4): 0 when OK, else its
// failure's (exit.Code of the result's Err). The CLI, not the engine,
// numbers failures; a failed result is never 0, even without an error to
// classify.
func ExitCode(r event.ResultEvent) int {
	if r.OK {
		return exit.OK
	}
	if c := exit.Code(r.Err); c != exit.OK {
		return c
	}
	return exit.Failed
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Marshal writes the event in the NDJSON schema of DESIGN.md §8
// (contract: these keys, in this order), without the newline.
func Marshal(e event.Event) ([]byte, error) {
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
		}{ts, typ, p.OK, ExitCode(p), p.Message, nullable(p.TokenDir)})
	}
	return json.Marshal(struct {
		Time string     `json:"time"`
		Type event.Type `json:"type"`
	}{ts, typ})
}

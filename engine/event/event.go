// Package event is kiln's event vocabulary: the typed facts an operation
// reports (DESIGN.md §8) and the Reporter every producer reports them
// through. An Event is an envelope (its time) around a Payload; the
// payload's type names the event's Type. The payloads of this package
// are the progress facts (phase, discovery, decision, resource, log,
// plan, result); the observations (a project's status, a cluster's
// snapshot, its front door, isolation and access) are model types of
// the engine that implement Payload in their own packages. Frontends
// type-switch on the payload; printers (the CLI's text and NDJSON) live
// with the frontends.
//
// The package imports only the standard library, so that any layer can
// report without depending on the engine.
package event

import (
	"errors"
	"time"
)

// Type names what an event reports: the "type" key of the NDJSON schema
// (DESIGN.md §8, contract).
type Type string

// Event types.
const (
	TypePhase     Type = "phase"
	TypeDiscovery Type = "discovery"
	TypeDecision  Type = "decision"
	TypeResource  Type = "resource"
	TypeLog       Type = "log"
	TypeResult    Type = "result"
	// TypeProject reports a project's observed state (kiln project
	// inspect/list, kiln status): computed from live objects.
	TypeProject Type = "project"
	// TypeSnapshot carries the complete status once status --watch has
	// read it, before the changes that follow. It is for frontends, not
	// part of the NDJSON schema: the JSON printer skips it.
	TypeSnapshot Type = "snapshot"
	// TypeCluster is one kiln cluster kiln list found, or a location it
	// could not inspect.
	TypeCluster Type = "cluster"
	// TypePlan is one change kiln upgrade plans (DESIGN.md §12).
	TypePlan Type = "plan"
	// TypeFrontDoor is how clients reach the gateway.
	TypeFrontDoor Type = "frontdoor"
	// TypeIsolation is whether NetworkPolicies are enforced.
	TypeIsolation Type = "isolation"
	// TypeAccess is an EKS cluster's access entries.
	TypeAccess Type = "access"
)

// Phase names a step of an operation: the Phase of a phase event. create
// runs discover, plan, lock, credentials, infrastructure, platform,
// readiness; destroy runs platform, infrastructure, credentials; status
// discover and readiness; wait readiness; project repair. Frontends match
// on these, not on literals.
type Phase string

// Phases.
const (
	PhaseDiscover       Phase = "discover"
	PhasePlan           Phase = "plan"
	PhaseLock           Phase = "lock"
	PhaseCredentials    Phase = "credentials"
	PhaseInfrastructure Phase = "infrastructure"
	PhasePlatform       Phase = "platform"
	PhaseReadiness      Phase = "readiness"
	PhaseRepair         Phase = "repair"
	// PhaseProjects (upgrade) re-applies project Ingresses and restacks.
	PhaseProjects Phase = "projects"
	// PhaseConfig (upgrade) writes kiln-config, last.
	PhaseConfig Phase = "config"
	// PhaseRetire (rotate-key) removes the rotated-out key from kiln-auth.
	PhaseRetire Phase = "retire"
)

// State is where a phase is: the State of a phase event.
type State string

// Phase states.
const (
	Started   State = "started"
	Succeeded State = "succeeded"
	Failed    State = "failed"
	Skipped   State = "skipped"
)

// Status is an object's status (the kstatus vocabulary kiln reports).
type Status string

// Resource statuses.
const (
	StatusInProgress  Status = "InProgress"
	StatusCurrent     Status = "Current"
	StatusFailed      Status = "Failed"
	StatusNotFound    Status = "NotFound"
	StatusTerminating Status = "Terminating"
)

// Level is a log line's level.
type Level string

// Log levels.
const (
	LevelInfo  Level = "info"
	LevelWarn  Level = "warn"
	LevelError Level = "error"
	// LevelDebug lines (API requests, retries) are reported only with
	// kiln -v or --log-file; frontends show them only with -v.
	LevelDebug Level = "debug"
)

// Payload is what an event reports. EventType names the event's Type.
type Payload interface {
	EventType() Type
}

// Event is one observable fact of an operation: when, and what (the
// payload). Frontends render events; they never compute state on their
// own.
type Event struct {
	Time    time.Time
	Payload Payload
}

// Type is the payload's type ("" for an event without one).
func (e Event) Type() Type {
	if e.Payload == nil {
		return ""
	}
	return e.Payload.EventType()
}

// MarshalJSON refuses: an event's JSON is the NDJSON schema of DESIGN.md
// §8, which only the frontend's encoder writes (internal/cli/ndjson), so
// an event marshaled by accident fails instead of printing another shape.
func (e Event) MarshalJSON() ([]byte, error) {
	return nil, errors.New("event: an event's JSON is the NDJSON printer's (internal/cli/ndjson)")
}

// PhaseEvent is a phase starting or ending.
type PhaseEvent struct {
	Phase     Phase
	State     State
	ElapsedMS int64 // how long the phase took (not for Started)
	Message   string
}

// DiscoveryEvent is what discovery found.
type DiscoveryEvent struct {
	Clusters []ClusterInfo
	// Skipped are the locations the user left out of discovery.
	Skipped []string
	// Source is how the locations were chosen: SourceDiscovery (every
	// location in scope), SourceNamed or SourceRemembered (that one only).
	Source string
	// ElapsedMS is how long discovery took.
	ElapsedMS int64
}

// Sources of a discovery's locations.
const (
	SourceDiscovery  = "discovery"
	SourceNamed      = "named"
	SourceRemembered = "remembered"
)

// ClusterInfo is one cluster (or location) found by discovery.
type ClusterInfo struct {
	Provider string   `json:"provider"`
	Name     string   `json:"name"`
	Location string   `json:"location"`
	Infra    string   `json:"infra"`
	Platform string   `json:"platform"`
	KeyIDs   []string `json:"key_ids"`
	TokenDir *string  `json:"token_dir"`
	// Error says why the location could not be inspected (unreachable
	// context, denied region); such a location is reported, not fatal.
	Error string `json:"error,omitempty"`
	// ElapsedMS is how long the location's inspection took.
	ElapsedMS int64 `json:"elapsed_ms"`
}

// DecisionEvent is what create decided to do, and why.
type DecisionEvent struct {
	Decision string
	Reason   string
}

// ResourceEvent is an object's status, when it changes.
type ResourceEvent struct {
	Kind, Namespace, Name string
	Status                Status
	Message               string
}

// LogEvent is a line of narration.
type LogEvent struct {
	Level   Level
	Message string
}

// PlanEvent is one change kiln upgrade plans.
type PlanEvent struct {
	Action                string // create, update, delete
	Kind, Namespace, Name string
	Fields                []string // the fields an update changes
	Message               string
}

// ResultEvent ends an operation.
type ResultEvent struct {
	OK bool
	// Err is the failure itself (nil when OK): frontends decide from it
	// (its kind, the input it names), never from Message's words. The
	// exit number is the CLI's to derive from it.
	Err error
	// Message is the outcome, worded for the user.
	Message string
	// TokenDir is the token dir the operation leaves ("" for none).
	TokenDir string
}

// EventType implements Payload.
func (PhaseEvent) EventType() Type { return TypePhase }

// EventType implements Payload.
func (DiscoveryEvent) EventType() Type { return TypeDiscovery }

// EventType implements Payload.
func (DecisionEvent) EventType() Type { return TypeDecision }

// EventType implements Payload.
func (ResourceEvent) EventType() Type { return TypeResource }

// EventType implements Payload.
func (LogEvent) EventType() Type { return TypeLog }

// EventType implements Payload.
func (PlanEvent) EventType() Type { return TypePlan }

// EventType implements Payload.
func (ResultEvent) EventType() Type { return TypeResult }

// Sink receives every event of an operation, in order. Emit must not block
// for long: producers call it from their own goroutines.
type Sink interface {
	Emit(Event)
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(Event)

// Emit calls f.
func (f SinkFunc) Emit(e Event) { f(e) }

// MessageOf is the words a payload carries ("" for one without any): a
// phase's, resource's, log line's, plan change's or result's Message, a
// decision's Reason.
func MessageOf(p Payload) string {
	switch p := p.(type) {
	case PhaseEvent:
		return p.Message
	case ResourceEvent:
		return p.Message
	case LogEvent:
		return p.Message
	case PlanEvent:
		return p.Message
	case ResultEvent:
		return p.Message
	case DecisionEvent:
		return p.Reason
	}
	return ""
}

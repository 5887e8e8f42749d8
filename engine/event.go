package engine

import (
	"encoding/json"
	"time"
)

// Event types (DESIGN.md §8, contract).
const (
	TypePhase     = "phase"
	TypeDiscovery = "discovery"
	TypeDecision  = "decision"
	TypeResource  = "resource"
	TypeLog       = "log"
	TypeResult    = "result"
	// TypeProject reports a project's observed state (kiln project
	// inspect/list, kiln status): computed from live objects.
	TypeProject = "project"
	// TypeSnapshot carries the complete status once status --watch has
	// read it, before the changes that follow (Snapshot is set). It is
	// for frontends, not part of the NDJSON schema: the CLI's JSON sink
	// skips it.
	TypeSnapshot = "snapshot"
	// TypeCluster is one kiln cluster kiln list found (Cluster is set), or
	// a location it could not inspect (Cluster.Err is set).
	TypeCluster = "cluster"
	// TypePlan is one change kiln upgrade plans (DESIGN.md §12): Action,
	// Kind, Namespace, Name, Fields and Message are set.
	TypePlan = "plan"
)

// Phase names: the Phase of a phase event. create runs discover, plan,
// lock, credentials, infrastructure, platform, readiness; destroy runs platform,
// infrastructure, credentials; status discover and readiness; wait
// readiness; project repair. Frontends match on these, not on literals.
const (
	PhaseDiscover       = "discover"
	PhasePlan           = "plan"
	PhaseLock           = "lock"
	PhaseCredentials    = "credentials"
	PhaseInfrastructure = "infrastructure"
	PhasePlatform       = "platform"
	PhaseReadiness      = "readiness"
	PhaseRepair         = "repair"
	// PhaseProjects (upgrade) re-applies project Ingresses and restacks.
	PhaseProjects = "projects"
	// PhaseConfig (upgrade) writes kiln-config, last.
	PhaseConfig = "config"
	// PhaseRetire (rotate-key) removes the rotated-out key from kiln-auth.
	PhaseRetire = "retire"
)

// Phase states: the State of a phase event.
const (
	PhaseStarted   = "started"
	PhaseSucceeded = "succeeded"
	PhaseFailed    = "failed"
	PhaseSkipped   = "skipped"
)

// Resource statuses (the kstatus vocabulary kiln reports).
const (
	StatusInProgress  = "InProgress"
	StatusCurrent     = "Current"
	StatusFailed      = "Failed"
	StatusNotFound    = "NotFound"
	StatusTerminating = "Terminating"
)

// Log levels.
const (
	LevelInfo  = "info"
	LevelWarn  = "warn"
	LevelError = "error"
	// LevelDebug events (API requests, retries) are emitted only with
	// kiln -v or --log-file; frontends show them only with -v.
	LevelDebug = "debug"
)

// Event is one observable fact of an operation. Frontends render events;
// they never compute state on their own. Which fields are meaningful depends
// on Type; MarshalJSON writes exactly the fields of DESIGN.md §8.
type Event struct {
	Time time.Time
	Type string

	// phase
	Phase     string
	State     string
	ElapsedMS int64
	Message   string // phase, resource, log, result

	// discovery (ElapsedMS: how long discovery took)
	Clusters []ClusterInfo
	// Skipped are the locations the user left out of discovery.
	Skipped []string
	// Source is how the locations were chosen: SourceDiscovery (every
	// location in scope), SourceNamed or SourceRemembered (that one only).
	Source string

	// decision
	Decision string
	Reason   string

	// resource
	Kind      string
	Namespace string
	Name      string
	Status    string

	// log
	Level string

	// project
	Project *ProjectStatus

	// snapshot
	Snapshot *ClusterStatus

	// frontdoor, isolation
	FrontDoor *FrontDoor
	Isolation *Isolation
	// access
	Access *Access

	// cluster
	Cluster *ClusterSummary
	// plan (Kind, Namespace, Name and Message as for resource)
	Action string
	Fields []string

	// result
	OK bool
	// Err is a failed result's error: frontends decide from its failure
	// kind and fields (engine/failure), never from Message's words. It is
	// not marshaled; the engine never sets ExitCode, the CLI's printers
	// derive it from Err (internal/exit) before they print.
	Err      error
	ExitCode int
	TokenDir string // empty means null
	// Input is the input a failed result's error names (an input error's
	// Input: the flag, or the wizard's field, the user fixes), "" for
	// none. Frontends decide from it, never from Message's words; it is
	// not part of the NDJSON contract and MarshalJSON leaves it out.
	Input Input
}

// ClusterInfo is one cluster found by discovery.
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

// Infra states reported by discovery.
const (
	InfraPresent     = "present"
	InfraAbsent      = "absent"
	InfraPartial     = "partial"
	InfraUnreachable = "unreachable"
)

// Platform states reported by discovery.
const (
	PlatformInstalled = "installed"
	PlatformAbsent    = "absent"
	// PlatformPartlyRemoved (kiln list, the wizard; not in the discovery
	// event, whose values are a contract): a destroy began and did not
	// finish; running destroy again finishes it.
	PlatformPartlyRemoved = "partly-removed"
)

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// MarshalJSON writes the event in the NDJSON schema of DESIGN.md §8.
func (e Event) MarshalJSON() ([]byte, error) {
	ts := e.Time.UTC().Format(time.RFC3339Nano)
	switch e.Type {
	case TypePhase:
		return json.Marshal(struct {
			Time      string `json:"time"`
			Type      string `json:"type"`
			Phase     string `json:"phase"`
			State     string `json:"state"`
			ElapsedMS int64  `json:"elapsed_ms"`
			Message   string `json:"message"`
		}{ts, e.Type, e.Phase, e.State, e.ElapsedMS, e.Message})
	case TypeDiscovery:
		clusters := e.Clusters
		if clusters == nil {
			clusters = []ClusterInfo{}
		}
		for i := range clusters {
			if clusters[i].KeyIDs == nil {
				clusters[i].KeyIDs = []string{}
			}
		}
		skipped := e.Skipped
		if skipped == nil {
			skipped = []string{}
		}
		source := e.Source
		if source == "" {
			source = SourceDiscovery
		}
		return json.Marshal(struct {
			Time      string        `json:"time"`
			Type      string        `json:"type"`
			Clusters  []ClusterInfo `json:"clusters"`
			ElapsedMS int64         `json:"elapsed_ms"`
			Skipped   []string      `json:"skipped"`
			Source    string        `json:"source"`
		}{ts, e.Type, clusters, e.ElapsedMS, skipped, source})
	case TypeDecision:
		return json.Marshal(struct {
			Time     string `json:"time"`
			Type     string `json:"type"`
			Decision string `json:"decision"`
			Reason   string `json:"reason"`
		}{ts, e.Type, e.Decision, e.Reason})
	case TypeResource:
		return json.Marshal(struct {
			Time      string `json:"time"`
			Type      string `json:"type"`
			Kind      string `json:"kind"`
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
			Status    string `json:"status"`
			Message   string `json:"message"`
		}{ts, e.Type, e.Kind, e.Namespace, e.Name, e.Status, e.Message})
	case TypeLog:
		return json.Marshal(struct {
			Time    string `json:"time"`
			Type    string `json:"type"`
			Level   string `json:"level"`
			Message string `json:"message"`
		}{ts, e.Type, e.Level, e.Message})
	case TypeProject:
		p := ProjectStatus{}
		if e.Project != nil {
			p = *e.Project
		}
		return json.Marshal(struct {
			Time string `json:"time"`
			Type string `json:"type"`
			ProjectStatus
		}{ts, e.Type, p})
	case TypeSnapshot:
		return json.Marshal(struct {
			Time   string         `json:"time"`
			Type   string         `json:"type"`
			Status *ClusterStatus `json:"status"`
		}{ts, e.Type, e.Snapshot})
	case TypeCluster:
		c := ClusterSummary{}
		if e.Cluster != nil {
			c = *e.Cluster
		}
		keys := c.KeyIDs
		if keys == nil {
			keys = []string{}
		}
		var projects *int
		if c.Projects >= 0 && c.Platform == PlatformInstalled {
			projects = &c.Projects
		}
		return json.Marshal(struct {
			Time     string   `json:"time"`
			Type     string   `json:"type"`
			Provider string   `json:"provider"`
			Name     string   `json:"name"`
			Location string   `json:"location"`
			Platform string   `json:"platform"`
			Version  *string  `json:"version"`
			Projects *int     `json:"projects"`
			KeyIDs   []string `json:"key_ids"`
			TokenDir *string  `json:"token_dir"`
			Error    string   `json:"error,omitempty"`
		}{ts, e.Type, c.Provider, c.Name, c.Location, c.Platform, nullable(c.Version), projects, keys, nullable(c.TokenDir), c.Err})
	case TypePlan:
		fields := e.Fields
		if fields == nil {
			fields = []string{}
		}
		return json.Marshal(struct {
			Time      string   `json:"time"`
			Type      string   `json:"type"`
			Action    string   `json:"action"`
			Kind      string   `json:"kind"`
			Namespace string   `json:"namespace"`
			Name      string   `json:"name"`
			Fields    []string `json:"fields"`
			Message   string   `json:"message"`
		}{ts, e.Type, e.Action, e.Kind, e.Namespace, e.Name, fields, e.Message})
	case TypeFrontDoor:
		f := FrontDoor{}
		if e.FrontDoor != nil {
			f = *e.FrontDoor
		}
		return json.Marshal(struct {
			Time string `json:"time"`
			Type string `json:"type"`
			FrontDoor
		}{ts, e.Type, f})
	case TypeIsolation:
		i := Isolation{}
		if e.Isolation != nil {
			i = *e.Isolation
		}
		return json.Marshal(struct {
			Time string `json:"time"`
			Type string `json:"type"`
			Isolation
		}{ts, e.Type, i})
	case TypeAccess:
		a := Access{}
		if e.Access != nil {
			a = *e.Access
		}
		if a.Entries == nil {
			a.Entries = []AccessEntry{}
		}
		return json.Marshal(struct {
			Time string `json:"time"`
			Type string `json:"type"`
			Access
		}{ts, e.Type, a})
	case TypeResult:
		return json.Marshal(struct {
			Time     string  `json:"time"`
			Type     string  `json:"type"`
			OK       bool    `json:"ok"`
			ExitCode int     `json:"exit_code"`
			Message  string  `json:"message"`
			TokenDir *string `json:"token_dir"`
		}{ts, e.Type, e.OK, e.ExitCode, e.Message, nullable(e.TokenDir)})
	}
	return json.Marshal(struct {
		Time    string `json:"time"`
		Type    string `json:"type"`
		Message string `json:"message"`
	}{ts, e.Type, e.Message})
}

// Sink receives every event of an operation, in order. Emit must not block
// for long: the engine calls it from its own goroutines.
type Sink interface {
	Emit(Event)
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(Event)

// Emit calls f.
func (f SinkFunc) Emit(e Event) { f(e) }

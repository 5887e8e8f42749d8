package engine

import "github.com/kilnctl/kiln/engine/event"

// The engine reports through package event (engine/event): these names
// are the engine's for the same types and values, so that callers of the
// engine read engine.PhaseDiscover as they always have.

// Event is one observable fact of an operation (see event.Event).
type Event = event.Event

// Sink receives every event of an operation, in order (see event.Sink).
type Sink = event.Sink

// SinkFunc adapts a function to a Sink.
type SinkFunc = event.SinkFunc

// ClusterInfo is one cluster found by discovery.
type ClusterInfo = event.ClusterInfo

// Event types (DESIGN.md §8, contract).
const (
	TypePhase     = event.TypePhase
	TypeDiscovery = event.TypeDiscovery
	TypeDecision  = event.TypeDecision
	TypeResource  = event.TypeResource
	TypeLog       = event.TypeLog
	TypeResult    = event.TypeResult
	TypeProject   = event.TypeProject
	TypeSnapshot  = event.TypeSnapshot
	TypeCluster   = event.TypeCluster
	TypePlan      = event.TypePlan
	TypeFrontDoor = event.TypeFrontDoor
	TypeIsolation = event.TypeIsolation
	TypeAccess    = event.TypeAccess
)

// Phase names: the Phase of a phase event.
const (
	PhaseDiscover       = event.PhaseDiscover
	PhasePlan           = event.PhasePlan
	PhaseLock           = event.PhaseLock
	PhaseCredentials    = event.PhaseCredentials
	PhaseInfrastructure = event.PhaseInfrastructure
	PhasePlatform       = event.PhasePlatform
	PhaseReadiness      = event.PhaseReadiness
	PhaseRepair         = event.PhaseRepair
	PhaseProjects       = event.PhaseProjects
	PhaseConfig         = event.PhaseConfig
	PhaseRetire         = event.PhaseRetire
)

// Phase states: the State of a phase event.
const (
	PhaseStarted   = event.Started
	PhaseSucceeded = event.Succeeded
	PhaseFailed    = event.Failed
	PhaseSkipped   = event.Skipped
)

// Resource statuses (the kstatus vocabulary kiln reports).
const (
	StatusInProgress  = event.StatusInProgress
	StatusCurrent     = event.StatusCurrent
	StatusFailed      = event.StatusFailed
	StatusNotFound    = event.StatusNotFound
	StatusTerminating = event.StatusTerminating
)

// Log levels.
const (
	LevelInfo  = event.LevelInfo
	LevelWarn  = event.LevelWarn
	LevelError = event.LevelError
	LevelDebug = event.LevelDebug
)

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

// The engine's observations are event payloads of their own.

// EventType implements event.Payload: the complete status of status --watch.
func (*ClusterStatus) EventType() event.Type { return event.TypeSnapshot }

// EventType implements event.Payload: one cluster kiln list found.
func (*ClusterSummary) EventType() event.Type { return event.TypeCluster }

// EventType implements event.Payload.
func (*FrontDoor) EventType() event.Type { return event.TypeFrontDoor }

// EventType implements event.Payload.
func (*Isolation) EventType() event.Type { return event.TypeIsolation }

// EventType implements event.Payload.
func (*Access) EventType() event.Type { return event.TypeAccess }

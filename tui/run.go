package tui

import (
	"context"
	"strings"
	"time"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/internal/exit"
)

// maxLogLines bounds the log the run view keeps; the oldest lines go first.
// Phases, resources and the result are never dropped.
const maxLogLines = 2000

type phaseRow struct {
	name, state, message string
	started              time.Time
	elapsedMS            int64
}

type resourceRow struct {
	kind, namespace, name, status, message string
}

// runState is what the run view shows of one operation; it is built only
// from engine events.
type runState struct {
	kind     opKind
	name     string
	location string
	// provider is "aws" for a create of the form's aws provider ("" is
	// kube).
	provider  string
	started   time.Time
	running   bool
	cancel    context.CancelFunc
	phases    []phaseRow
	resources []resourceRow
	resIndex  map[string]int
	logs      []string
	found     []engine.ClusterInfo
	decision  string
	reason    string
	result    *engine.Event
	// failures counts failed phases and resources seen (never dropped).
	failures int
	events   int

	// userCancel says the user chose to stop the operation (declined a
	// question, or confirmed Ctrl-C): its end is a cancel, not a failure.
	userCancel bool
	// fromForm says the create form started it: a failed create goes back
	// to the form as it was typed.
	fromForm bool
	// target is the cluster a destroy run is about (what d runs again).
	target Target

	focusLog  bool
	logOffset int // lines scrolled up from the bottom
	resSel    int // the selected resource row
}

func newRunState(kind opKind, name, location string, cancel context.CancelFunc, now time.Time) *runState {
	return &runState{kind: kind, name: name, location: location, cancel: cancel, started: now, running: true, resIndex: map[string]int{}}
}

// destroyAgain reports whether the run view offers to run an ended
// destroy again: it was cancelled or failed after the user confirmed it
// (not declined, exit 3, and not bad input, exit 2, which a rerun meets
// again). The rerun asks again and finishes what this run began.
func (r *runState) destroyAgain() bool {
	if r.kind != opDestroy || r.running || r.result == nil || r.result.OK || r.target.Name == "" {
		return false
	}
	return r.result.ExitCode != exit.NeedConfirm && r.result.ExitCode != exit.BadInput
}

// ingest applies a batch of events to the running operation.
func (m *Model) ingest(evs []engine.Event) {
	if m.opts.Record {
		m.recorded = append(m.recorded, evs...)
	}
	r := m.run
	if r == nil {
		return
	}
	for _, ev := range evs {
		r.apply(ev, m.opts.Now())
		if m.screen == screenDiscover && ev.Type == engine.TypePhase && ev.Phase != "discover" {
			m.screen = screenRun
		}
	}
}

func (r *runState) apply(ev engine.Event, now time.Time) {
	r.events++
	switch ev.Type {
	case engine.TypePhase:
		p := r.phase(ev.Phase)
		if p == nil {
			r.phases = append(r.phases, phaseRow{name: ev.Phase, started: now})
			p = &r.phases[len(r.phases)-1]
		}
		p.state, p.message = ev.State, ev.Message
		if ev.State == engine.PhaseStarted {
			p.started, p.elapsedMS = now, 0
		} else {
			p.elapsedMS = ev.ElapsedMS
		}
		if ev.State == engine.PhaseFailed {
			r.failures++
		}
	case engine.TypeDiscovery:
		r.found = ev.Clusters
	case engine.TypeDecision:
		r.decision, r.reason = ev.Decision, ev.Reason
		r.addLog("→ " + ev.Decision + ": " + ev.Reason)
	case engine.TypeResource:
		key := ev.Kind + "/" + ev.Namespace + "/" + ev.Name
		row := resourceRow{kind: ev.Kind, namespace: ev.Namespace, name: ev.Name, status: ev.Status, message: ev.Message}
		if i, ok := r.resIndex[key]; ok {
			r.resources[i] = row
		} else {
			r.resIndex[key] = len(r.resources)
			r.resources = append(r.resources, row)
		}
		if ev.Status == engine.StatusFailed {
			r.failures++
		}
	case engine.TypeLog:
		msg := ev.Message
		if ev.Level != engine.LevelInfo && ev.Level != "" {
			msg = ev.Level + ": " + msg
		}
		r.addLog(msg)
	case engine.TypePlan:
		r.addLog(planLogLine(ev))
	case engine.TypeResult:
		e := ev
		r.result = &e
	}
}

func (r *runState) addLog(s string) {
	for _, line := range strings.Split(s, "\n") {
		r.logs = append(r.logs, line)
	}
	// Trim in chunks so a flood of log lines costs amortised O(1) each.
	if len(r.logs) > maxLogLines+maxLogLines/2 {
		r.logs = append(r.logs[:0], r.logs[len(r.logs)-maxLogLines:]...)
	}
}

func (r *runState) scroll(d int) {
	if r.focusLog {
		// Up (negative d) scrolls back in the log.
		r.logOffset = clamp(r.logOffset-d, 0, len(r.logs)-1)
		return
	}
	r.resSel = clamp(r.resSel+d, 0, len(r.resources)-1)
}

// phase returns the named phase row, if seen.
func (r *runState) phase(name string) *phaseRow {
	for i := range r.phases {
		if r.phases[i].name == name {
			return &r.phases[i]
		}
	}
	return nil
}

package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/kilnctl/kiln/engine/event"

	tea "charm.land/bubbletea/v2"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/failure"
)

func runningModel() *Model {
	m := New(Options{Static: true, Now: func() time.Time { return time.Unix(0, 0) }})
	m.start(opCreate, "dev1", "kiln-local", nil)
	m.screen = screenRun
	return m
}

// BenchmarkViewRun1000Resources renders the run view with 1,000 resource
// rows at 80x24.
func BenchmarkViewRun1000Resources(b *testing.B) {
	m := runningModel()
	evs := make([]engine.Event, 0, 1010)
	for _, p := range []event.Phase{"discover", "plan", "credentials", "platform"} {
		evs = append(evs, engine.Event{Payload: event.PhaseEvent{Phase: p, State: engine.PhaseSucceeded, ElapsedMS: 120}})
	}
	evs = append(evs, engine.Event{Payload: event.PhaseEvent{Phase: "readiness", State: engine.PhaseStarted}})
	statuses := []event.Status{engine.StatusCurrent, engine.StatusInProgress, engine.StatusFailed, engine.StatusNotFound}
	for i := range 1000 {
		evs = append(evs, engine.Event{Payload: event.ResourceEvent{Kind: "Deployment", Namespace: "kiln-tenant-t", Name: fmt.Sprintf("app-%04d", i), Status: statuses[i%len(statuses)], Message: "1/2 replicas available"}})
	}
	m.ingest(evs)
	m.run.resSel = 500
	if n := len(m.run.resources); n != 1000 {
		b.Fatalf("%d rows", n)
	}
	for b.Loop() {
		_ = m.View()
	}
}

// counting wraps the model and reports when the result event arrived.
type counting struct {
	*Model
	done chan struct{}
}

func (c counting) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	_, cmd := c.Model.Update(msg)
	if _, ok := msg.(eventsMsg); ok && c.run.result != nil {
		close(c.done)
	}
	return c, cmd
}

// BenchmarkIngest10000Events sends 10,000 events (resources, logs, phases,
// failures, then the result) from an engine goroutine through the Bridge
// into a running program, and checks none of the failure or result events
// was dropped. One op is 10,000 events; events/s is reported.
func BenchmarkIngest10000Events(b *testing.B) {
	const n = 10000
	var total time.Duration
	for b.Loop() {
		b.StopTimer()
		m := runningModel()
		c := counting{Model: m, done: make(chan struct{})}
		ctx, cancel := context.WithCancel(context.Background())
		p := tea.NewProgram(c, tea.WithContext(ctx), tea.WithInput(nil), tea.WithOutput(io.Discard), tea.WithoutRenderer(), tea.WithoutSignals())
		br := NewBridge()
		br.Start(p.Send)
		go func() { _, _ = p.Run() }()
		b.StartTimer()
		start := time.Now()
		failures := 0
		for i := range n - 1 {
			var ev engine.Event
			switch i % 10 {
			case 0:
				ev = engine.Event{Payload: event.PhaseEvent{Phase: event.Phase(fmt.Sprintf("p%d", i%50)), State: engine.PhaseFailed, Message: "boom"}}
				failures++
			case 1, 2, 3:
				ev = engine.Event{Payload: event.LogEvent{Level: engine.LevelInfo, Message: "line"}}
			default:
				ev = engine.Event{Payload: event.ResourceEvent{Kind: "Pod", Namespace: "ns", Name: fmt.Sprintf("pod-%d", i%300), Status: engine.StatusInProgress}}
			}
			br.Emit(ev)
		}
		br.Emit(engine.Event{Payload: event.ResultEvent{OK: false, Err: errors.New("failed"), Message: "failed"}})
		<-c.done
		total += time.Since(start)
		b.StopTimer()
		if m.run.events != n || m.run.failures != failures || m.run.result == nil || failure.Of(m.run.result.Err) != failure.Failed {
			b.Fatalf("events %d/%d, failures %d/%d, result %v", m.run.events, n, m.run.failures, failures, m.run.result)
		}
		cancel()
		p.Wait()
		br.Stop()
		b.StartTimer()
	}
	b.ReportMetric(float64(n*b.N)/total.Seconds(), "events/s")
}

// BenchmarkViewInspect1000Projects renders the inspect screen with 1,000
// projects at 80x24, the selection in the middle: the bubbles table gets
// every row and renders the ones around the selection.
func BenchmarkViewInspect1000Projects(b *testing.B) {
	m := New(Options{Static: true, Now: func() time.Time { return time.Unix(1e6, 0) }})
	st := &engine.ClusterStatus{Provider: "kube", Name: "dev1", Location: "kiln-local", Installed: true, Ready: true, Tenants: []string{"t"}, Stacks: []string{"default"}}
	for i := range 1000 {
		st.Projects = append(st.Projects, engine.ProjectStatus{Tenant: "t", Project: fmt.Sprintf("p%04d", i), State: "running", Desired: "running",
			Stack: "default", Created: time.Unix(0, 0), Reasons: []string{}})
	}
	m.insp = &inspectState{target: engine.ClusterRef{Provider: "kube", Name: "dev1", Location: "kiln-local"}, table: m.newTable(),
		data: st, sel: 500}
	m.screen = screenInspect
	for b.Loop() {
		_ = m.View()
	}
}

// Package tuitest drives the wizard in tests: scripted Ops (Backend) that
// emit a fixed create through any Sink, and a Harness that runs the model
// under teatest and reads its screen without racing the program.
package tuitest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnctl/kiln/engine/event"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/project"
	"github.com/kilnctl/kiln/tui"
)

// T0 is the fixed clock of every test.
var T0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Script emits an operation's events through sink and asks confirm.
type Script = tui.Op

// Backend is tui.Ops whose operations run scripts and record the
// requests they were asked with.
type Backend struct {
	Contexts             []string
	Current              string
	List                 []tui.Cluster
	OnCreate             Script
	OnDestroy, OnProject Script
	// Inspections are what successive Status reads return; the last one
	// repeats. Empty: Status fails.
	Inspections []*engine.ClusterStatus
	// StatusGate, when set, holds every Status read until it receives or
	// is closed (a test looks at the screen while a read is under way).
	StatusGate chan struct{}
	// AWSCheck, when set, checks the create form's aws fields
	// (CheckCreate); nil accepts everything.
	AWSCheck func(engine.ClusterRef, engine.Infra) error
	// AWSUpgradeCheck, when set, checks the upgrade screen's EKS fields
	// (CheckUpgrade); nil accepts everything.
	AWSUpgradeCheck func(engine.ClusterRef, engine.Infra) error

	// OnUpgrade and OnRotate run kiln upgrade and rotate-key (daytwo.go).
	OnUpgrade, OnRotate Script

	mu sync.Mutex
	// Requests are the creates asked for, ProjectOps the project
	// operations.
	Requests   []Create
	ProjectOps []engine.ProjectRequest
	reads      int
	day2       dayTwoCalls
}

// Create is one create the wizard asked for.
type Create struct {
	Cluster engine.ClusterRef
	Infra   engine.Infra
	Req     engine.CreateRequest
}

var _ tui.Ops = (*Backend)(nil)

// CheckCreate checks with AWSCheck.
func (b *Backend) CheckCreate(c engine.ClusterRef, in engine.Infra) error {
	if b.AWSCheck == nil {
		return nil
	}
	return b.AWSCheck(c, in)
}

// CheckUpgrade checks with AWSUpgradeCheck.
func (b *Backend) CheckUpgrade(c engine.ClusterRef, in engine.Infra) error {
	if b.AWSUpgradeCheck == nil {
		return nil
	}
	return b.AWSUpgradeCheck(c, in)
}

func (b *Backend) Locations() ([]string, string, error) { return b.Contexts, b.Current, nil }

// Clusters returns List, reporting no search.
func (b *Backend) Clusters(context.Context, func(engine.SearchProgress)) ([]tui.Cluster, error) {
	return b.List, nil
}

// Create runs OnCreate.
func (b *Backend) Create(c engine.ClusterRef, in engine.Infra, req engine.CreateRequest) tui.Op {
	return func(ctx context.Context, sink engine.Sink, confirm engine.Confirmer) error {
		b.mu.Lock()
		b.Requests = append(b.Requests, Create{Cluster: c, Infra: in, Req: req})
		b.mu.Unlock()
		return run(ctx, b.OnCreate, sink, confirm)
	}
}

func (b *Backend) Status(ctx context.Context, t engine.ClusterRef) (*engine.ClusterStatus, error) {
	if b.StatusGate != nil {
		select {
		case <-b.StatusGate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.Inspections) == 0 {
		return nil, fmt.Errorf("no kiln cluster %s in kube context %s", t.Name, t.Location)
	}
	in := b.Inspections[min(b.reads, len(b.Inspections)-1)]
	b.reads++
	return in, nil
}

// Reads is how many Status reads were made.
func (b *Backend) Reads() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reads
}

// Project runs OnProject.
func (b *Backend) Project(_ engine.ClusterRef, req engine.ProjectRequest) tui.Op {
	return func(ctx context.Context, sink engine.Sink, c engine.Confirmer) error {
		b.mu.Lock()
		b.ProjectOps = append(b.ProjectOps, req)
		b.mu.Unlock()
		return run(ctx, b.OnProject, sink, c)
	}
}

// Ops returns the project operations run so far.
func (b *Backend) Ops() []engine.ProjectRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]engine.ProjectRequest(nil), b.ProjectOps...)
}

// Destroy runs OnDestroy.
func (b *Backend) Destroy(engine.ClusterRef, engine.DestroyRequest) tui.Op {
	return func(ctx context.Context, sink engine.Sink, c engine.Confirmer) error {
		return run(ctx, b.OnDestroy, sink, c)
	}
}

func run(ctx context.Context, s Script, sink engine.Sink, c engine.Confirmer) error {
	if s == nil {
		return nil
	}
	return s(ctx, sink, c)
}

// CreateScript is the event sequence of a create of NAME in LOCATION, shaped
// like the engine's. With installed, the platform is found installed and
// confirm is asked; a refusal ends with failure.Confirm. Before the readiness phase
// it waits for gate (if not nil), so a test can look at the run mid-way.
func CreateScript(name, location string, installed bool, gate <-chan struct{}) Script {
	return func(ctx context.Context, sink engine.Sink, confirm engine.Confirmer) error {
		at := T0
		emit := func(ev engine.Event) {
			at = at.Add(10 * time.Millisecond)
			ev.Time = at
			sink.Emit(ev)
		}
		phase := func(p event.Phase, state event.State, ms int64, msg string) {
			emit(engine.Event{Payload: event.PhaseEvent{Phase: p, State: state, ElapsedMS: ms, Message: msg}})
		}
		res := func(kind, ns, n string, status event.Status, msg string) {
			emit(engine.Event{Payload: event.ResourceEvent{Kind: kind, Namespace: ns, Name: n, Status: status, Message: msg}})
		}
		keyID := "sha256:3f1c0a9be2d47d6b1e0f5a8c9d2e7b4a6c1f0e9d8b7a6c5d4e3f2a1b0c9d8e7f"
		phase("discover", engine.PhaseStarted, 0, "")
		info := engine.ClusterInfo{Provider: "kube", Location: location, Infra: engine.InfraPresent, Platform: engine.PlatformAbsent}
		if installed {
			info.Name, info.Platform, info.KeyIDs = name, engine.PlatformInstalled, []string{keyID}
		}
		emit(engine.Event{Payload: event.DiscoveryEvent{Clusters: []engine.ClusterInfo{info,
			{Provider: "kube", Location: "staging", Infra: engine.InfraUnreachable, Platform: engine.PlatformAbsent, Error: "connection refused"}}}})
		emit(engine.Event{Payload: event.LogEvent{Level: engine.LevelWarn, Message: "kube staging: connection refused"}})
		phase("discover", engine.PhaseSucceeded, 412, "")
		phase("plan", engine.PhaseStarted, 0, "")
		decision, reason := engine.DecisionFresh, "no kiln platform in context "+location
		if installed {
			ok, err := confirm.ConfirmContinue(ctx, engine.ContinueQuestion{Provider: "kube", Name: name, Location: location,
				TrustedKeyIDs: []string{keyID}, TokenDir: "/home/dev/.local/state/kiln/kube/" + name + "/tokens"})
			if err != nil || !ok {
				phase("plan", engine.PhaseFailed, 5, "already installed; nothing was changed")
				msg := "kiln platform " + name + " is already installed; nothing was changed"
				emit(engine.Event{Payload: event.ResultEvent{Err: failure.NeedsConfirm("%s", msg), Message: msg}})
				return context.Canceled
			}
			decision, reason = engine.DecisionContinue, "platform installed; continuing with trusted key "+keyID[:19]
		}
		emit(engine.Event{Payload: event.DecisionEvent{Decision: decision, Reason: reason}})
		phase("plan", engine.PhaseSucceeded, 8, "")
		phase("credentials", engine.PhaseStarted, 0, "")
		phase("credentials", engine.PhaseSucceeded, 230, "")
		phase("infrastructure", engine.PhaseStarted, 0, "")
		phase("infrastructure", engine.PhaseSkipped, 1, "existing cluster")
		phase("platform", engine.PhaseStarted, 0, "")
		res("Namespace", "", "kiln-system", engine.StatusCurrent, "")
		res("ConfigMap", "kiln-system", "kiln-auth", engine.StatusCurrent, "")
		res("ConfigMap", "kiln-system", "kiln-config", engine.StatusCurrent, "")
		res("Namespace", "", "kiln-tenant-default", engine.StatusCurrent, "")
		res("Deployment", "kiln-system", "kiln-gateway", engine.StatusInProgress, "0/1 replicas available")
		res("Service", "kiln-system", "kiln-gateway", engine.StatusInProgress, "no ready endpoints")
		phase("platform", engine.PhaseSucceeded, 1840, "")
		phase("readiness", engine.PhaseStarted, 0, "")
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				phase("readiness", engine.PhaseFailed, 100, "interrupted")
				emit(engine.Event{Payload: event.ResultEvent{Err: failure.Interrupt("interrupted during %s", name), Message: "interrupted during " + name}})
				return ctx.Err()
			}
		}
		res("Deployment", "kiln-system", "kiln-gateway", engine.StatusCurrent, "1/1 replicas available")
		res("Service", "kiln-system", "kiln-gateway", engine.StatusCurrent, "1 ready endpoint")
		phase("readiness", engine.PhaseSucceeded, 2310, "")
		emit(engine.Event{Payload: event.ResultEvent{OK: true, Message: "cluster " + name + " is ready (kube " + location + ")", TokenDir: "/home/dev/.local/state/kiln/kube/" + name + "/tokens"}})
		return nil
	}
}

// Inspection is a read of cluster NAME in LOCATION: the platform ready,
// tenants default and team-a, and three projects (running, degraded with
// its token out of sync, suspended), created a few hours to days before T0.
// Stacks are default and gpu.
func Inspection(name, location string) *engine.ClusterStatus {
	ns := func(t string) string { return "kiln-tenant-" + t }
	obj := func(kind, namespace, n string, status event.Status, msg string) engine.ObjectStatus {
		return engine.ObjectStatus{Kind: kind, Namespace: namespace, Name: n, Status: status, Message: msg}
	}
	projObjs := func(tenant, p, desired, stack string, dep, svc, ing, secret engine.ObjectStatus) []project.ObjectStatus {
		out := []project.ObjectStatus{{Kind: "ConfigMap", Namespace: ns(tenant), Name: "kiln-project-" + p, Status: engine.StatusCurrent, Message: "desired " + desired + ", stack " + stack}}
		for _, o := range []engine.ObjectStatus{secret, dep, svc, ing} {
			out = append(out, project.ObjectStatus{Kind: o.Kind, Namespace: ns(tenant), Name: o.Name, Status: o.Status, Message: o.Message})
		}
		return out
	}
	web := engine.ProjectStatus{Tenant: "default", Project: "web", Namespace: ns("default"), Stack: "default", Host: "web.default." + name + ".kiln.test",
		Desired: "running", State: "running", Reasons: []string{}, Revision: 3,
		TokenSync: engine.TokenInSync, Created: T0.Add(-50 * time.Hour),
		Objects: projObjs("default", "web", "running", "default",
			obj("Deployment", "", "web", engine.StatusCurrent, "2/2 replicas available"),
			obj("Service", "", "web", engine.StatusCurrent, "2 ready endpoints"),
			obj("Ingress", "", "web", engine.StatusCurrent, "host web.default."+name+".kiln.test"),
			obj("Secret", "", "web-auth", engine.StatusCurrent, "token k2"))}
	api := engine.ProjectStatus{Tenant: "team-a", Project: "api", Namespace: ns("team-a"), Stack: "gpu", Host: "api.team-a." + name + ".kiln.test",
		Desired: "running", State: "degraded", Reasons: []string{"token out of sync", "no ready endpoints"}, Revision: 5,
		TokenSync: engine.TokenOutOfSync, Created: T0.Add(-5 * time.Hour),
		Objects: projObjs("team-a", "api", "running", "gpu",
			obj("Deployment", "", "api", engine.StatusInProgress, "0/1 replicas available"),
			obj("Service", "", "api", engine.StatusInProgress, "no ready endpoints"),
			obj("Ingress", "", "api", engine.StatusInProgress, "backend svc/api has no ready endpoints"),
			obj("Secret", "", "api-auth", engine.StatusCurrent, "token k1"))}
	batch := engine.ProjectStatus{Tenant: "team-a", Project: "batch", Namespace: ns("team-a"), Stack: "default", Host: "batch.team-a." + name + ".kiln.test",
		Desired: "suspended", State: "suspended", Reasons: []string{}, Revision: 2,
		TokenSync: engine.TokenUnknown, Created: T0.Add(-12 * time.Minute),
		Objects: projObjs("team-a", "batch", "suspended", "default",
			obj("Deployment", "", "batch", engine.StatusNotFound, "not found"),
			obj("Service", "", "batch", engine.StatusNotFound, "not found"),
			obj("Ingress", "", "batch", engine.StatusNotFound, "not found"),
			obj("Secret", "", "batch-auth", engine.StatusCurrent, "token k1"))}
	st := &engine.ClusterStatus{Provider: "kube", Name: name, Location: location, Installed: true, Ready: true,
		Objects: []engine.ObjectStatus{
			obj("Namespace", "", "kiln-system", engine.StatusCurrent, ""),
			obj("ConfigMap", "kiln-system", "kiln-auth", engine.StatusCurrent, ""),
			obj("ConfigMap", "kiln-system", "kiln-config", engine.StatusCurrent, ""),
			obj("Namespace", "", ns("default"), engine.StatusCurrent, ""),
			obj("Namespace", "", ns("team-a"), engine.StatusCurrent, ""),
			obj("Deployment", "kiln-system", "kiln-gateway", engine.StatusCurrent, "1/1 replicas available"),
			obj("Service", "kiln-system", "kiln-gateway", engine.StatusCurrent, "1 ready endpoint"),
		},
		Tenants:  []string{"default", "team-a"},
		KeyIDs:   []string{"sha256:3f1c0a9be2d47d6b1e0f5a8c9d2e7b4a6c1f0e9d8b7a6c5d4e3f2a1b0c9d8e7f"},
		TokenDir: "/home/dev/.local/state/kiln/kube/" + name + "/tokens", KeyTrusted: true,
		Projects: []engine.ProjectStatus{web, api, batch},
		Stacks:   []string{"default", "gpu"},
	}
	return st
}

// ProjectScript is the event sequence of a project operation that
// succeeds: a project phase with the project's objects, then the result.
func ProjectScript(op, ref string) Script {
	return func(ctx context.Context, sink engine.Sink, _ engine.Confirmer) error {
		at := T0
		emit := func(ev engine.Event) {
			at = at.Add(10 * time.Millisecond)
			ev.Time = at
			sink.Emit(ev)
		}
		tenant, p, _ := strings.Cut(ref, "/")
		emit(engine.Event{Payload: event.PhaseEvent{Phase: "discover", State: engine.PhaseStarted}})
		emit(engine.Event{Payload: event.PhaseEvent{Phase: "discover", State: engine.PhaseSucceeded, ElapsedMS: 40}})
		emit(engine.Event{Payload: event.PhaseEvent{Phase: event.Phase(op), State: engine.PhaseStarted}})
		emit(engine.Event{Payload: event.ResourceEvent{Kind: "Deployment", Namespace: "kiln-tenant-" + tenant, Name: p, Status: engine.StatusCurrent, Message: "1/1 replicas available"}})
		emit(engine.Event{Payload: event.PhaseEvent{Phase: event.Phase(op), State: engine.PhaseSucceeded, ElapsedMS: 900}})
		emit(engine.Event{Payload: event.ResultEvent{OK: true, Message: "project " + ref + " " + op + " done"}})
		return nil
	}
}

// probe asks the running model for its screen and recorded events.
type probe struct{ reply chan snapshot }

type snapshot struct {
	content string
	events  []engine.Event
}

// probed wraps the model so tests read it on the program's goroutine.
type probed struct{ m *tui.Model }

func (p probed) Init() tea.Cmd { return p.m.Init() }

func (p probed) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if pr, ok := msg.(probe); ok {
		pr.reply <- snapshot{content: p.m.View().Content, events: append([]engine.Event(nil), p.m.Recorded()...)}
		return p, nil
	}
	_, cmd := p.m.Update(msg)
	return p, cmd
}

func (p probed) View() tea.View { return p.m.View() }

// Harness runs the wizard at 80x24 with the Ascii profile.
type Harness struct {
	TM     *teatest.TestModel
	Bridge *tui.Bridge
}

// Start runs a model over ops; opts.Ops and opts.Bridge are set.
func Start(t testing.TB, ops tui.Ops, opts tui.Options) *Harness {
	t.Helper()
	br := tui.NewBridge()
	opts.Ops, opts.Bridge = ops, br
	if opts.Now == nil {
		opts.Now = func() time.Time { return T0 }
	}
	opts.Static = true
	tm := teatest.NewTestModel(t, probed{m: tui.New(opts)},
		teatest.WithInitialTermSize(80, 24),
		teatest.WithProgramOptions(tea.WithColorProfile(colorprofile.Ascii)))
	br.Start(tm.Send)
	h := &Harness{TM: tm, Bridge: br}
	t.Cleanup(func() {
		_ = tm.Quit()
		tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
		br.Stop()
	})
	return h
}

func (h *Harness) snap() snapshot {
	reply := make(chan snapshot, 1)
	h.TM.Send(probe{reply: reply})
	return <-reply
}

// Screen is the current screen with colour removed (the Ascii profile).
func (h *Harness) Screen() string { return Ascii(h.snap().content) }

// Events are the events the model received (Options.Record).
func (h *Harness) Events() []engine.Event { return h.snap().events }

// WaitFor waits until the screen contains s, failing after 5 s.
func (h *Harness) WaitFor(t testing.TB, s string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := h.Screen()
		if strings.Contains(ansi.Strip(got), s) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("screen never showed %q; last screen:\n%s", s, got)
		}
		time.Sleep(5 * time.Millisecond) // polling the program, not waiting for settling
	}
}

// Key sends one key: a name like "enter", "tab", "esc", "right",
// "ctrl+c", or a single character.
func (h *Harness) Key(name string) {
	var k tea.KeyPressMsg
	switch name {
	case "enter":
		k.Code = tea.KeyEnter
	case "tab":
		k.Code = tea.KeyTab
	case "esc":
		k.Code = tea.KeyEscape
	case "right":
		k.Code = tea.KeyRight
	case "left":
		k.Code = tea.KeyLeft
	case "down":
		k.Code = tea.KeyDown
	case "up":
		k.Code = tea.KeyUp
	case "backspace":
		k.Code = tea.KeyBackspace
	case "ctrl+c":
		k.Code, k.Mod = 'c', tea.ModCtrl
	default:
		r := []rune(name)[0]
		k.Code, k.Text = r, name
	}
	h.TM.Send(k)
}

// Ascii renders styled text as the Ascii colour profile would: no colour,
// attributes kept.
func Ascii(s string) string {
	var b bytes.Buffer
	w := &colorprofile.Writer{Forward: &b, Profile: colorprofile.Ascii}
	_, _ = w.WriteString(s)
	return b.String()
}

// WatchBackend is a Backend whose inspect screens are live (tui.Watcher):
// Watch delivers Inspections[0], then each inspection sent on Updates,
// until its context ends; Stopped receives once per watch that ended.
type WatchBackend struct {
	*Backend
	Updates chan *engine.ClusterStatus
	Stopped chan struct{}
	mu      sync.Mutex
	started int
}

// NewWatchBackend wraps b.
func NewWatchBackend(b *Backend) *WatchBackend {
	return &WatchBackend{Backend: b, Updates: make(chan *engine.ClusterStatus), Stopped: make(chan struct{}, 8)}
}

func (w *WatchBackend) Watch(ctx context.Context, t engine.ClusterRef, fn engine.WatchFunc) error {
	w.mu.Lock()
	w.started++
	w.mu.Unlock()
	defer func() { w.Stopped <- struct{}{} }()
	if len(w.Inspections) == 0 {
		return fmt.Errorf("no kiln cluster %s in kube context %s", t.Name, t.Location)
	}
	fn(w.Inspections[0], nil)
	for {
		select {
		case in := <-w.Updates:
			fn(in, nil)
		case <-ctx.Done():
			return nil
		}
	}
}

// Started is how many watches were started.
func (w *WatchBackend) Started() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.started
}

// Send sends any message to the program (a mouse wheel, say).
func (h *Harness) Send(msg tea.Msg) { h.TM.Send(msg) }

package tui_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/kilnctl/kiln/engine/event"

	"github.com/charmbracelet/x/ansi"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/tui"
	"github.com/kilnctl/kiln/tui/tuitest"
)

// interruptedLeft is what the engine says of a destroy cancelled after it
// deleted the tenant namespaces (engine.destroyInterrupted).
const interruptedLeft = "interrupted during the platform phase: cluster dev1 is partly removed: a destroy began at 2026-01-02T03:04:05Z (removed kiln-config) and did not finish; left: tenant namespace kiln-tenant-default and namespace kiln-system. Run `kiln destroy kube dev1 --context kiln-local` again to finish it"

// A destroy cancelled mid-way (Ctrl-C, confirmed) says what it did and
// what is left — from the engine's result, not just "cancelled" — and how
// to finish: d runs destroy again (asking again), and the CLI command is
// shown too. The home screen shows a partly removed cluster as such.
func TestInterruptedDestroySaysWhatIsLeftAndRunsAgain(t *testing.T) {
	b := backend()
	b.List = append(b.List, tui.Cluster{Provider: "kube", Name: "old3", Location: "lab", Platform: engine.PlatformPartlyRemoved})
	var mu sync.Mutex
	runs := 0
	b.OnDestroy = func(ctx context.Context, sink engine.Sink, c engine.Confirmer) error {
		mu.Lock()
		runs++
		n := runs
		mu.Unlock()
		ok, err := c.ConfirmDestroy(ctx, engine.DestroyQuestion{Provider: "kube", Name: "dev1", Location: "kiln-local", Tenants: []string{"default"}})
		if err != nil || !ok {
			sink.Emit(engine.Event{Payload: event.ResultEvent{Err: failure.NeedsConfirm("nothing was changed"), Message: "nothing was changed"}})
			return err
		}
		sink.Emit(engine.Event{Payload: event.PhaseEvent{Phase: engine.PhasePlatform, State: engine.PhaseStarted}})
		if n == 1 {
			sink.Emit(engine.Event{Payload: event.ResourceEvent{Kind: "Namespace", Name: "kiln-tenant-default", Status: engine.StatusTerminating}})
			<-ctx.Done()
			sink.Emit(engine.Event{Payload: event.PhaseEvent{Phase: engine.PhasePlatform, State: engine.PhaseFailed, Message: "wait interrupted: context canceled"}})
			sink.Emit(engine.Event{Payload: event.ResultEvent{Err: failure.Interrupt("%s", interruptedLeft), Message: interruptedLeft}})
			return failure.Interrupt("%s", interruptedLeft)
		}
		sink.Emit(engine.Event{Payload: event.PhaseEvent{Phase: engine.PhasePlatform, State: engine.PhaseSucceeded}})
		sink.Emit(engine.Event{Payload: event.ResultEvent{OK: true, Message: "cluster dev1 destroyed"}})
		return nil
	}
	h := tuitest.Start(t, b, tui.Options{})
	home := ansi.Strip(h.WaitFor(t, "old3"))
	if !strings.Contains(home, "partly-removed") {
		t.Errorf("home screen does not show a partly removed cluster whole:\n%s", home)
	}
	h.Key("d")
	h.WaitFor(t, "Type the cluster name to confirm")
	h.TM.Type("dev1")
	h.Key("enter")
	h.WaitFor(t, "kiln-tenant-default")
	h.Key("ctrl+c")
	h.WaitFor(t, "Cancel the running destroy?")
	h.Key("y")
	got := ansi.Strip(h.WaitFor(t, "d destroy again"))
	// One line, as wrapped text reads (a line may break after a hyphen).
	flat := strings.ReplaceAll(strings.Join(strings.Fields(got), " "), "- ", "-")
	for _, want := range []string{
		"○ cancelled — interrupted during the platform phase: cluster dev1 is partly removed",
		"left: tenant namespace kiln-tenant-default and namespace kiln-system",
		"`kiln destroy kube dev1 --context kiln-local`",
		"Press d to run destroy again",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("the cancelled destroy's screen lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "✗") {
		t.Errorf("a confirmed cancel is shown as a failure:\n%s", got)
	}

	// d runs destroy again: it asks again, then finishes.
	h.Key("d")
	h.WaitFor(t, "Type the cluster name to confirm")
	h.TM.Type("dev1")
	h.Key("enter")
	done := ansi.Strip(h.WaitFor(t, "✓ cluster dev1 destroyed"))
	if strings.Contains(done, "destroy again") {
		t.Errorf("a finished destroy still offers to run again:\n%s", done)
	}
	mu.Lock()
	defer mu.Unlock()
	if runs != 2 {
		t.Errorf("destroy ran %d times, want 2", runs)
	}
}

// A destroy the user declined (a Confirm failure) changed nothing: there is nothing
// to run again.
func TestDeclinedDestroyOffersNoRerun(t *testing.T) {
	b := backend()
	b.OnDestroy = func(ctx context.Context, sink engine.Sink, c engine.Confirmer) error {
		_, err := c.ConfirmDestroy(ctx, engine.DestroyQuestion{Provider: "kube", Name: "dev1", Location: "kiln-local"})
		sink.Emit(engine.Event{Payload: event.ResultEvent{Err: failure.NeedsConfirm("nothing was changed"), Message: "nothing was changed"}})
		return err
	}
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("d")
	h.WaitFor(t, "Type the cluster name to confirm")
	h.Key("esc")
	got := ansi.Strip(h.WaitFor(t, "esc back"))
	if strings.Contains(got, "destroy again") {
		t.Errorf("a declined destroy offers to run again:\n%s", got)
	}
}

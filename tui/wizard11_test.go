package tui_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnctl/kiln/engine/event"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/tui"
	"github.com/kilnctl/kiln/tui/tuitest"
)

// plain is a screen without styling and trailing blanks, one string per
// line.
func plain(screen string) []string {
	lines := strings.Split(ansi.Strip(screen), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return lines
}

// joined is the screen's text with line breaks (and the indent after them)
// folded into single spaces, so a wrapped message reads whole.
func joined(screen string) string {
	return strings.Join(strings.Fields(ansi.Strip(screen)), " ")
}

func checkWidth(t *testing.T, screen string, w, h int) {
	t.Helper()
	lines := plain(screen)
	if len(lines) != h {
		t.Errorf("%d lines, want %d", len(lines), h)
	}
	for _, l := range lines {
		if ansi.StringWidth(l) > w {
			t.Errorf("line wider than %d: %q", w, l)
		}
	}
}

// longFailure is a create failing in plan with the engine's message for a
// platform found without a trusted token dir, worded for the wizard.
const longFailure = "kiln platform dev1 is installed in context kiln-local, but no token dir holds a key it trusts (trusted: sha256:3f1c0a9be2d4). Looked in: /home/dev/.local/state/kiln/kube/dev1/tokens (default path), keyring entry (none). Pass the Token dir field of the create form (n) with the directory created when the cluster was made"

func failScript(msg string, kind failure.Kind) tuitest.Script {
	return func(ctx context.Context, sink engine.Sink, _ engine.Confirmer) error {
		sink.Emit(engine.Event{Payload: event.PhaseEvent{Phase: "discover", State: engine.PhaseStarted}})
		sink.Emit(engine.Event{Payload: event.PhaseEvent{Phase: "discover", State: engine.PhaseSucceeded, ElapsedMS: 40}})
		sink.Emit(engine.Event{Payload: event.PhaseEvent{Phase: "plan", State: engine.PhaseStarted}})
		sink.Emit(engine.Event{Payload: event.PhaseEvent{Phase: "plan", State: engine.PhaseFailed, ElapsedMS: 3, Message: msg}})
		err := failure.Newf(kind, "%s", msg)
		sink.Emit(engine.Event{Payload: event.ResultEvent{Err: err, Message: msg}})
		return err
	}
}

// TestFailureShownOnceAndWhole: a long failure is shown whole, wrapped to
// the width, once (not in the phase line nor the log as well), with its
// kind in the wizard's words at the end (not the CLI's exit number).
func TestFailureShownOnceAndWhole(t *testing.T) {
	b := backend()
	b.OnCreate = failScript(longFailure, failure.Failed)
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("c")
	h.WaitFor(t, "(failed)")
	got := h.WaitFor(t, "esc back") // the run has ended
	if !strings.Contains(joined(got), "✗ "+longFailure+" (failed)") {
		t.Errorf("the failure is not shown whole:\n%s", ansi.Strip(got))
	}
	if n := strings.Count(joined(got), "no token dir holds a key"); n != 1 {
		t.Errorf("the failure is shown %d times, want once:\n%s", n, ansi.Strip(got))
	}
	if strings.Contains(got, "--") {
		t.Errorf("the wizard names a CLI flag:\n%s", ansi.Strip(got))
	}
	requireGolden(t, got)

	// At 60 columns it still reads whole.
	h.TM.Send(tea.WindowSizeMsg{Width: 60, Height: 16})
	got = h.WaitFor(t, "(failed)")
	checkWidth(t, got, 60, 16)
	if !strings.Contains(joined(got), longFailure) {
		t.Errorf("the failure is cut at 60 columns:\n%s", ansi.Strip(got))
	}
}

// TestInputNamesAreTheWizards: the wizard's Namer words every input as its
// own fields and keys, never as a flag.
func TestInputNamesAreTheWizards(t *testing.T) {
	for _, in := range []engine.Input{engine.InputContext, engine.InputContexts, engine.InputRegion, engine.InputRegions,
		engine.InputContinue, engine.InputYes, engine.InputTokenDir, engine.InputConfig, engine.InputAll} {
		got := tui.InputName(in)
		if strings.Contains(got, "--") || got == string(in) {
			t.Errorf("%s is worded %q", in, got)
		}
	}
	err := engine.NewInputError(failure.Failed, engine.InputTokenDir, "dev1", "no trusted token dir; pass {input}")
	var ie *engine.InputError
	if !errors.As(err, &ie) {
		t.Fatal("not an InputError")
	}
	if got := ie.Render(tui.InputName); got != "no trusted token dir; pass the Token dir field of the create form (n)" {
		t.Errorf("rendered %q", got)
	}
}

// TestResourceDetailOpensInFull: a resource row cut at the width opens in
// full with enter.
func TestResourceDetailOpensInFull(t *testing.T) {
	b := backend()
	const long = "0/3 replicas available: pod kiln-gateway-7d9f: container gateway waiting: ImagePullBackOff pulling registry.example/kiln/gateway:v9"
	b.OnCreate = func(ctx context.Context, sink engine.Sink, _ engine.Confirmer) error {
		sink.Emit(engine.Event{Payload: event.PhaseEvent{Phase: "discover", State: engine.PhaseStarted}})
		sink.Emit(engine.Event{Payload: event.PhaseEvent{Phase: "discover", State: engine.PhaseSucceeded}})
		sink.Emit(engine.Event{Payload: event.ResourceEvent{Kind: "Deployment", Namespace: "kiln-system", Name: "kiln-gateway", Status: engine.StatusInProgress, Message: long}})
		sink.Emit(engine.Event{Payload: event.ResultEvent{Err: failure.Deadline("timed out"), Message: "timed out"}})
		return failure.Deadline("timed out")
	}
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("c")
	h.WaitFor(t, "(timed out)")
	got := h.WaitFor(t, "esc back")
	if strings.Contains(joined(got), long) {
		t.Fatalf("the row was expected to be cut at 80 columns:\n%s", ansi.Strip(got))
	}
	h.Key("enter")
	got = h.WaitFor(t, "Message")
	if !strings.Contains(joined(got), long) {
		t.Errorf("the detail view does not show the message whole:\n%s", ansi.Strip(got))
	}
	h.Key("esc")
	h.WaitFor(t, "Resources (1)")
	// tab, enter: the whole log and the result.
	h.Key("tab")
	h.Key("enter")
	h.WaitFor(t, "Result (timed out): timed out")
}

// TestFormChecksWhatItKnows: the create form says, as you type, that the
// context hosts another cluster, that the name lives elsewhere, and what
// is wrong with the config file by field; Create is refused until fixed.
func TestFormChecksWhatItKnows(t *testing.T) {
	b := backend()
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("n")
	h.TM.Type("dev2")
	h.Key("tab") // the context: kiln-local, where dev1 lives
	got := h.WaitFor(t, "✗ context kiln-local already hosts")
	if !strings.Contains(joined(got), "a context hosts one kiln platform: choose another context (←/→)") {
		t.Errorf("occupied context not explained whole:\n%s", ansi.Strip(got))
	}
	// Create is refused, and says which field to fix.
	h.Key("enter")
	h.Key("enter")
	h.Key("enter")
	h.Key("enter")
	h.WaitFor(t, "✗ fix the Context field first")
	if n := len(b.Requests); n != 0 {
		t.Fatalf("%d creates ran", n)
	}
	h.Key("right") // lab, free
	h.WaitFor(t, "‹ lab ›")
	h.Key("up")
	// The name of a cluster in another context.
	for range 4 {
		h.Key("backspace")
	}
	h.TM.Type("ci7")
	h.WaitFor(t, "✗ cluster ci7 already exists")
	for range 3 {
		h.Key("backspace")
	}
	h.TM.Type("dev2")
	h.WaitFor(t, "✓ valid name")

	// Config file: missing, then invalid by field, then valid.
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.yaml")
	h.Key("tab")
	h.Key("tab") // the config file field
	h.TM.Type(missing)
	h.WaitFor(t, "✗ no such file")
	// A relative path (the golden file stays the same): the test runs in
	// the package directory.
	bad := filepath.Join("testdata", "bad-config.yaml")
	for range len(missing) {
		h.Key("backspace")
	}
	h.TM.Type(bad)
	got = h.WaitFor(t, "domian")
	if !strings.Contains(ansi.Strip(got), "✗ line 5") {
		t.Errorf("the config problem does not name its line and field:\n%s", ansi.Strip(got))
	}
	requireGolden(t, got)
}

// TestFailedSubmitKeepsTheForm: a create that fails goes back, on Esc, to
// the form as it was typed.
func TestFailedSubmitKeepsTheForm(t *testing.T) {
	b := backend()
	b.OnCreate = failScript("cluster dev2 already exists in context lab", failure.Input)
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("n")
	h.TM.Type("dev2")
	h.Key("tab")
	h.Key("right")
	h.Key("tab")
	h.Key("tab")
	h.TM.Type("/tmp/tokens")
	h.Key("tab")
	h.Key("enter")
	h.WaitFor(t, "(bad input)")
	h.WaitFor(t, "esc back") // the run has ended: esc goes back
	h.Key("esc")
	got := ansi.Strip(h.WaitFor(t, "New kiln cluster"))
	for _, want := range []string{"Name         dev2", "‹ lab ›", "Token dir    /tmp/tokens", "✗ Create failed: cluster dev2 already exists in context lab"} {
		if !strings.Contains(got, want) {
			t.Errorf("the form lost %q:\n%s", want, got)
		}
	}
	if r := b.Requests; len(r) != 1 || r[0].Req.TokenDir != "/tmp/tokens" {
		t.Errorf("requests %+v", r)
	}
}

// TestRunIsReviewable: the final screen opens the run's resources and
// log; Esc comes back; home opens the last run again.
func TestRunIsReviewable(t *testing.T) {
	b := backend()
	b.OnCreate = tuitest.CreateScript("dev1", "kiln-local", true, nil)
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("c")
	h.WaitFor(t, "Continue with existing credentials")
	h.Key("left")
	h.Key("enter")
	got := h.WaitFor(t, "Next")
	if !strings.Contains(ansi.Strip(got), "l review the run") {
		t.Errorf("the final screen does not offer the run:\n%s", ansi.Strip(got))
	}
	h.Key("l")
	got = h.WaitFor(t, "Resources (6)")
	for _, want := range []string{"→ continue:", "esc back", "✓ cluster dev1 is ready"} {
		if !strings.Contains(ansi.Strip(got), want) {
			t.Errorf("the reviewed run lacks %q:\n%s", want, ansi.Strip(got))
		}
	}
	h.Key("esc")
	h.WaitFor(t, "Next")
	h.Key("esc")
	got = h.WaitFor(t, "[l] last run")
	if !strings.Contains(ansi.Strip(got), "l last run") {
		t.Errorf("footer lacks l:\n%s", ansi.Strip(got))
	}
	h.Key("l")
	h.WaitFor(t, "Resources (6)")
	h.Key("esc")
	h.WaitFor(t, "Kiln clusters")
}

// TestKeys: ? opens help also in a text field (never types), Esc never
// quits home, Ctrl-C on home asks, c on an unreachable context says why.
func TestKeys(t *testing.T) {
	b := backend()
	b.List = append([]tui.Cluster{{Provider: "kube", Location: "staging", Platform: "?", Err: "connection refused by https://10.0.0.9:6443"}}, b.List[:2]...)
	h := tuitest.Start(t, b, tui.Options{})
	// The unreachable context is listed first but not selected.
	got := h.WaitFor(t, "> kube   dev1")
	if !strings.Contains(ansi.Strip(got), "r refresh") {
		t.Errorf("footer lacks r refresh:\n%s", ansi.Strip(got))
	}
	h.Key("up")
	h.WaitFor(t, "> kube   -")
	h.Key("c")
	got = h.WaitFor(t, "! context staging is unreachable")
	if !strings.Contains(joined(got), "press r to search again") {
		t.Errorf("c on an unreachable context does not say why:\n%s", ansi.Strip(got))
	}
	h.Key("esc")
	h.Key("ctrl+c")
	h.WaitFor(t, "Quit kiln? y/N")
	h.Key("n")
	h.WaitFor(t, "q quit")

	h.Key("n")
	h.WaitFor(t, "New kiln cluster")
	// The placeholder is worded as a hint (NO_COLOR: no grey to tell it).
	h.WaitFor(t, "e.g. dev1")
	h.TM.Type("dev")
	h.Key("?")
	h.WaitFor(t, "Keys on this screen")
	h.Key("esc")
	got = h.WaitFor(t, "New kiln cluster")
	if !strings.Contains(ansi.Strip(got), "Name         dev\n") && !strings.Contains(ansi.Strip(got), "Name         dev ") {
		t.Errorf("? typed into the name field:\n%s", ansi.Strip(got))
	}
	if strings.Contains(ansi.Strip(got), "dev?") {
		t.Errorf("? typed into the name field:\n%s", ansi.Strip(got))
	}
}

// TestSmallTerminalKeepsButtons: at 40x10 the continue question keeps both
// buttons on screen (wrapped), the text scrolls.
func TestSmallTerminalKeepsButtons(t *testing.T) {
	b := backend()
	b.OnCreate = tuitest.CreateScript("dev1", "kiln-local", true, nil)
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "dev1")
	h.TM.Send(tea.WindowSizeMsg{Width: 40, Height: 10})
	h.Key("c")
	got := h.WaitFor(t, "[ Cancel ]")
	checkWidth(t, got, 40, 10)
	if !strings.Contains(ansi.Strip(got), "[ Continue with existing credentials ]") {
		t.Errorf("the Continue button is off screen at 40x10:\n%s", ansi.Strip(got))
	}
	if !strings.Contains(ansi.Strip(got), "pgup/pgdn") {
		t.Errorf("the cut text does not say it scrolls:\n%s", ansi.Strip(got))
	}
	h.Key("end")
	got = h.WaitFor(t, "Cancel changes nothing")
	if !strings.Contains(ansi.Strip(got), "[ Cancel ]") {
		t.Errorf("scrolling hid the buttons:\n%s", ansi.Strip(got))
	}
	// The create form at 40x10 keeps its button too.
	h.Key("enter") // Cancel
	h.WaitFor(t, "cancelled")
	// The run has ended once its footer offers esc (a phase row says
	// cancelled before the run's end lands; an esc then is ignored).
	h.WaitFor(t, "esc back")
	h.Key("esc")
	h.WaitFor(t, "[n]")
	h.Key("n")
	got = h.WaitFor(t, "[ Create ]")
	checkWidth(t, got, 40, 10)
}

// TestCtrlCAtAQuestionAnswersNo: Ctrl-C on the continue question is a
// cancel: neutral, nothing changed.
func TestCtrlCAtAQuestionAnswersNo(t *testing.T) {
	b := backend()
	b.OnCreate = tuitest.CreateScript("dev1", "kiln-local", true, nil)
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("c")
	h.WaitFor(t, "Continue with existing credentials")
	h.Key("ctrl+c")
	h.WaitFor(t, "○ cancelled — nothing was changed")
	got := ansi.Strip(h.WaitFor(t, "esc back"))
	if strings.Contains(got, "✗") || strings.Contains(got, "partly set up") {
		t.Errorf("Ctrl-C at the question:\n%s", got)
	}
}

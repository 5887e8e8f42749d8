package tui_test

import (
	"context"
	"io"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/kilnctl/kiln/engine/event"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/tui"
	"github.com/kilnctl/kiln/tui/tuitest"
)

func backend() *tuitest.Backend {
	return &tuitest.Backend{
		Contexts: []string{"kiln-local", "lab", "staging", "prod-eu"},
		Current:  "kiln-local",
		List: []tui.Cluster{
			{Provider: "kube", Name: "dev1", Location: "kiln-local", Platform: engine.PlatformInstalled,
				KeyIDs:   []string{"sha256:3f1c0a9be2d47d6b1e0f5a8c9d2e7b4a6c1f0e9d8b7a6c5d4e3f2a1b0c9d8e7f"},
				TokenDir: "/home/dev/.local/state/kiln/kube/dev1/tokens", Projects: 3},
			{Provider: "kube", Name: "ci7", Location: "prod-eu", Platform: engine.PlatformAbsent},
			{Provider: "kube", Location: "staging", Platform: "?", Err: "connection refused by https://10.0.0.9:6443"},
		},
	}
}

// sgrColour matches an SGR sequence that sets a colour.
var sgrColour = regexp.MustCompile(`\x1b\[[0-9;:]*\b(3[0-9]|4[0-9]|9[0-7]|10[0-7])\b[0-9;:]*m`)

func requireGolden(t *testing.T, screen string) {
	t.Helper()
	if sgrColour.MatchString(screen) {
		t.Errorf("screen has colour under the Ascii profile: %q", screen)
	}
	if n := strings.Count(screen, "\n") + 1; n != 24 {
		t.Errorf("screen has %d lines, want 24", n)
	}
	golden.RequireEqual(t, screen)
}

func TestHomeScreen(t *testing.T) {
	h := tuitest.Start(t, backend(), tui.Options{})
	h.WaitFor(t, "ci7")
	h.Key("down")
	requireGolden(t, h.WaitFor(t, "> kube   ci7"))
}

func TestCreateFormValidatesAsYouType(t *testing.T) {
	h := tuitest.Start(t, backend(), tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("n")
	h.WaitFor(t, "New kiln cluster")
	h.TM.Type("Dev_1")
	h.WaitFor(t, "✗ NAME \"Dev_1\"")
	for range 5 {
		h.Key("backspace")
	}
	h.TM.Type("dev2")
	h.Key("tab")
	h.Key("right")
	h.Key("right")
	// staging is unreachable (the home screen's discovery said so): the
	// form says it before submit.
	requireGolden(t, h.WaitFor(t, "✗ context staging is unreachable"))
}

func TestCreateFreshRunAndFinal(t *testing.T) {
	b := backend()
	gate := make(chan struct{})
	b.OnCreate = tuitest.CreateScript("dev2", "lab", false, gate)
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("n")
	h.TM.Type("dev2")
	h.Key("tab")
	h.Key("right") // lab
	h.WaitFor(t, "‹ lab ›")
	h.Key("enter")
	h.Key("enter")
	h.Key("enter") // the Create button
	h.Key("enter")
	t.Run("run view mid-way", func(t *testing.T) {
		requireGolden(t, h.WaitFor(t, "no ready endpoints"))
	})
	close(gate)
	t.Run("final", func(t *testing.T) {
		requireGolden(t, h.WaitFor(t, "Next"))
	})
	if got := b.Requests; len(got) != 1 || !reflect.DeepEqual(got[0], tuitest.Create{Cluster: engine.ClusterRef{Provider: "kube", Name: "dev2", Location: "lab"}}) {
		t.Errorf("create requests = %+v", got)
	}
	// The wizard's next step first: i inspects the new cluster (where n
	// makes a project).
	h.Key("i")
	h.WaitFor(t, "inspect dev2")
}

func TestAlreadyInstalledContinue(t *testing.T) {
	b := backend()
	b.OnCreate = tuitest.CreateScript("dev1", "kiln-local", true, nil)
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("c") // continue the selected cluster
	requireGolden(t, h.WaitFor(t, "Continue with existing credentials"))
	h.Key("left") // focus moves from Cancel to Continue
	h.Key("enter")
	h.WaitFor(t, "✓ cluster dev1 is ready")
}

func TestAlreadyInstalledCancelChangesNothing(t *testing.T) {
	b := backend()
	b.OnCreate = tuitest.CreateScript("dev1", "kiln-local", true, nil)
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("c")
	h.WaitFor(t, "Continue with existing credentials")
	h.Key("enter") // focus starts on Cancel
	// The user's own choice is not a failure: no ✗, no exit code.
	h.WaitFor(t, "○ cancelled — nothing was changed")
	got := ansi.Strip(h.WaitFor(t, "esc back"))
	if strings.Contains(got, "credentials ") {
		t.Errorf("credentials phase ran after cancel:\n%s", got)
	}
	if strings.Contains(got, "✗") || strings.Contains(got, "(not confirmed)") {
		t.Errorf("a cancel is shown as a failure:\n%s", got)
	}
	requireGolden(t, h.Screen())
}

// A cancelled run says "nothing was changed" when its failure says so
// (failure.NothingChanged), whatever the message's words: a message
// without the phrase still reads as nothing changed, and one with the
// phrase that is not that fact is shown whole.
func TestCancelNothingChangedIsTheFailures(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"marked", failure.Unchanged(failure.Interrupted, "interrupted before anything was written"), "○ cancelled — nothing was changed"},
		{"words only", failure.Interrupt("partly set up; nothing was changed in kiln-config"), "○ cancelled — partly set up; nothing was changed in kiln-config"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := backend()
			b.OnCreate = func(ctx context.Context, sink engine.Sink, _ engine.Confirmer) error {
				sink.Emit(engine.Event{Payload: event.PhaseEvent{Phase: "discover", State: engine.PhaseStarted}})
				<-ctx.Done()
				sink.Emit(engine.Event{Payload: event.ResultEvent{Err: c.err, Message: c.err.Error()}})
				return c.err
			}
			h := tuitest.Start(t, b, tui.Options{})
			h.WaitFor(t, "dev1")
			h.Key("c")
			h.WaitFor(t, "discover")
			h.Key("ctrl+c")
			h.WaitFor(t, "Cancel the running create?")
			h.Key("y")
			h.WaitFor(t, c.want)
		})
	}
}

func TestCtrlCAsksThenCancels(t *testing.T) {
	b := backend()
	b.OnCreate = tuitest.CreateScript("dev2", "lab", false, make(chan struct{}))
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("n")
	h.TM.Type("dev2")
	h.Key("enter")
	h.Key("right") // lab
	for range 4 {
		h.Key("enter")
	}
	h.WaitFor(t, "no ready endpoints")
	h.Key("ctrl+c")
	h.WaitFor(t, "Cancel the running create?")
	h.Key("n")
	h.WaitFor(t, "? help")
	h.Key("ctrl+c")
	h.Key("y")
	h.WaitFor(t, "○ cancelled — interrupted during dev2")
	got := ansi.Strip(h.WaitFor(t, "esc back")) // the run has ended
	if strings.Contains(got, "✗") {
		t.Errorf("a confirmed cancel is shown as a failure:\n%s", got)
	}
	// Finished: the footer offers esc back, not ctrl+c cancel.
	if !strings.Contains(got, "esc back") || strings.Contains(got, "ctrl+c cancel") {
		t.Errorf("footer of a finished run:\n%s", got)
	}
}

func TestDestroyRequiresTypingName(t *testing.T) {
	b := backend()
	asked := make(chan bool, 1)
	b.OnDestroy = func(ctx context.Context, sink engine.Sink, c engine.Confirmer) error {
		ok, err := c.ConfirmDestroy(ctx, engine.DestroyQuestion{Provider: "kube", Name: "dev1", Location: "kiln-local", Tenants: []string{"default"}})
		asked <- ok
		if err != nil || !ok {
			sink.Emit(engine.Event{Payload: event.ResultEvent{Err: failure.NeedsConfirm("nothing was changed"), Message: "nothing was changed"}})
			return err
		}
		sink.Emit(engine.Event{Payload: event.ResultEvent{OK: true, Message: "cluster dev1 destroyed"}})
		return nil
	}
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("d")
	h.WaitFor(t, "Type the cluster name to confirm")
	h.TM.Type("dev")
	h.Key("enter")
	h.WaitFor(t, "type the cluster name exactly")
	h.TM.Type("1")
	h.Key("enter")
	if !<-asked {
		t.Fatal("destroy was not confirmed after typing the name")
	}
	h.WaitFor(t, "✓ cluster dev1 destroyed")
	h.WaitFor(t, "esc back") // the run has ended: esc goes back

	// Esc on the question cancels: neutral, nothing changed.
	h.Key("esc")
	h.WaitFor(t, "Kiln clusters")
	h.Key("d")
	h.WaitFor(t, "Type the cluster name to confirm")
	h.Key("esc")
	if <-asked {
		t.Fatal("Esc confirmed the destroy")
	}
	got := ansi.Strip(h.WaitFor(t, "○ cancelled — nothing was changed"))
	if strings.Contains(got, "✗") {
		t.Errorf("Esc on destroy is shown as a failure:\n%s", got)
	}
}

func TestHelpAndResize(t *testing.T) {
	h := tuitest.Start(t, backend(), tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("?")
	h.WaitFor(t, "Keys on this screen")
	h.Key("esc")
	h.WaitFor(t, "Kiln clusters")
	h.TM.Send(tea.WindowSizeMsg{Width: 60, Height: 12})
	h.WaitFor(t, "[n] new cluster")
	got := h.WaitFor(t, "Kiln clusters")
	for _, l := range strings.Split(ansi.Strip(got), "\n") {
		if w := ansi.StringWidth(l); w > 60 {
			t.Errorf("line wider than 60: %q", l)
		}
	}
	if n := strings.Count(got, "\n") + 1; n != 12 {
		t.Errorf("%d lines at height 12", n)
	}
}

func TestColorProfile(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want colorprofile.Profile
	}{
		{[]string{"TERM=xterm-256color", "NO_COLOR=yes"}, colorprofile.Ascii},
		{[]string{"TERM=xterm-256color", "NO_COLOR="}, colorprofile.Ascii},
		{[]string{"TERM=dumb", "CLICOLOR_FORCE=1"}, colorprofile.Ascii},
		{[]string{"TERM=xterm-256color", "CLICOLOR_FORCE=1"}, colorprofile.ANSI256},
	} {
		if got := tui.ColorProfile(io.Discard, tc.env); got != tc.want {
			t.Errorf("%v: profile %v, want %v", tc.env, got, tc.want)
		}
	}
}

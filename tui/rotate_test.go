package tui_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/tui"
	"github.com/kilnctl/kiln/tui/tuitest"
)

// TestRotateKeyTypedConfirmation: K on home explains what a rotation does;
// Keep old key is checked as typed; the engine's question is confirmed by
// typing the cluster name exactly.
func TestRotateKeyTypedConfirmation(t *testing.T) {
	b := backend()
	b.OnRotate = tuitest.RotateScript("dev1", "kiln-local", engine.RotateStart, 24*time.Hour)
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "> kube   dev1")
	h.Key("K")
	h.WaitFor(t, "Rotate the signing key of kiln cluster dev1")
	h.TM.Type("soon")
	h.WaitFor(t, `✗ "soon" is not a duration`)
	h.Key("enter")
	h.Key("enter") // the button: refused while the field is wrong
	h.WaitFor(t, `✗ "soon" is not a duration`)
	for range 4 {
		h.Key("backspace")
	}
	h.TM.Type("24h")
	t.Run("explained", func(t *testing.T) {
		requireGolden(t, h.WaitFor(t, "✓ both keys stay trusted for 24h after"))
	})
	if got := b.Rotations(); len(got) != 0 {
		t.Fatalf("rotation started with a wrong Keep old key: %+v", got)
	}
	h.Key("enter")
	h.Key("enter")
	t.Run("confirm", func(t *testing.T) {
		requireGolden(t, h.WaitFor(t, "Type the cluster name to confirm"))
	})
	h.TM.Type("dev")
	h.Key("enter")
	h.WaitFor(t, "type the cluster name exactly")
	h.TM.Type("1")
	h.Key("enter")
	h.WaitFor(t, "✓ key of dev1 rotated to")
	h.WaitFor(t, "esc back")
	if got, want := b.Rotations(), []engine.RotateKeyRequest{{KeepOld: 24 * time.Hour}}; !reflect.DeepEqual(got, want) {
		t.Errorf("rotate requests %+v, want %+v", got, want)
	}
	if got := b.Answers(); !reflect.DeepEqual(got, []bool{true}) {
		t.Errorf("answers %v, want [true]", got)
	}
	h.Key("esc")
	h.WaitFor(t, "Kiln clusters")
}

// TestRotateFinishPending: a cluster that trusts two keys has a rotation
// under way: K offers to finish it (no Keep old key); the engine asks to
// retire the old key; Esc there cancels, neutral.
func TestRotateFinishPending(t *testing.T) {
	b := backend()
	b.List[0].KeyIDs = append(b.List[0].KeyIDs, "sha256:9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b")
	b.OnRotate = tuitest.RotateScript("dev1", "kiln-local", engine.RotateRetire, 0)
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "> kube   dev1")
	h.Key("K")
	got := ansi.Strip(h.WaitFor(t, "[ Finish rotation ]"))
	if strings.Contains(got, "Keep old key") {
		t.Errorf("finishing offers Keep old key:\n%s", got)
	}
	if !strings.Contains(joined(got), "A rotation is under way: cluster dev1 trusts 2 keys") {
		t.Errorf("the screen does not say a rotation is under way:\n%s", got)
	}
	h.Key("enter")
	asked := h.WaitFor(t, "Remove the old key of cluster dev1")
	if !strings.Contains(joined(asked), "tokens signed with it stop working") {
		t.Errorf("the question does not say what retiring does:\n%s", ansi.Strip(asked))
	}
	h.Key("esc")
	end := ansi.Strip(h.WaitFor(t, "○ cancelled — nothing was changed"))
	if strings.Contains(end, "✗") {
		t.Errorf("Esc on the rotate question is shown as a failure:\n%s", end)
	}
	if got, want := b.Rotations(), []engine.RotateKeyRequest{{Finish: true}}; !reflect.DeepEqual(got, want) {
		t.Errorf("rotate requests %+v, want %+v", got, want)
	}
	if got := b.Answers(); !reflect.DeepEqual(got, []bool{false}) {
		t.Errorf("answers %v, want [false]", got)
	}
}

// TestRotateFromInspectGoesBack: K on the inspect screen opens the rotate
// key screen with the keys the last read saw; Esc goes back to the
// inspect screen, and so does the end of the run.
func TestRotateFromInspectGoesBack(t *testing.T) {
	b := inspectBackend()
	b.OnRotate = tuitest.RotateScript("dev1", "kiln-local", engine.RotateStart, 0)
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("i")
	h.WaitFor(t, "Projects (3)")
	h.Key("K")
	h.WaitFor(t, "Trusted key     sha256:3f1c0a9be2d4…")
	h.Key("esc")
	h.WaitFor(t, "Projects (3)")
	h.Key("K")
	h.WaitFor(t, "Rotate the signing key")
	h.Key("enter")
	h.Key("enter")
	h.WaitFor(t, "Type the cluster name to confirm")
	h.TM.Type("dev1")
	h.Key("enter")
	h.WaitFor(t, "✓ key of dev1 rotated")
	h.WaitFor(t, "esc back")
	h.Key("esc")
	h.WaitFor(t, "Projects (3)")
}

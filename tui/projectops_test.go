package tui_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/tui"
	"github.com/kilnctl/kiln/tui/tuitest"
)

func typeText(h *tuitest.Harness, s string) {
	for _, r := range s {
		h.Key(string(r))
	}
}

// onAPI starts the wizard over b and selects team-a/api on the inspect
// screen of dev1.
func onAPI(t *testing.T, b tui.Ops, opts tui.Options) *tuitest.Harness {
	t.Helper()
	h := tuitest.Start(t, b, opts)
	h.WaitFor(t, "dev1")
	h.Key("i")
	h.WaitFor(t, "Projects (3)")
	h.Key("down")
	h.WaitFor(t, "> team-a/api")
	return h
}

// TestNewProjectForm: n on the inspect screen opens the new project form;
// the name is checked as it is typed with the engine's rules and against
// the projects the cluster has; tenant and stack are chosen from the
// platform's config; Create runs project create in the run view and the
// new project is the selection when the inspect screen comes back.
func TestNewProjectForm(t *testing.T) {
	b := inspectBackend()
	b.OnProject = tuitest.ProjectScript("create", "team-a/shop")
	h := onAPI(t, b, tui.Options{}) // the form starts on team-a/api's tenant
	h.Key("n")
	h.WaitFor(t, "New project on kiln cluster dev1")
	h.WaitFor(t, "‹ team-a ›")

	typeText(h, "Shop")
	h.WaitFor(t, `✗ name "Shop": must contain only lowercase letters`)
	for range 4 {
		h.Key("backspace")
	}
	typeText(h, "api")
	h.WaitFor(t, "✗ team-a/api exists already")
	// Another tenant: the same name is free there.
	h.Key("up")
	h.Key("right")
	h.WaitFor(t, "‹ default ›")
	h.WaitFor(t, "✓ default/api is free")
	h.Key("left")
	h.WaitFor(t, "✗ team-a/api exists already")
	// Create refuses a taken name and puts the focus back on it.
	h.Key("tab")
	h.Key("tab")
	h.Key("tab")
	h.Key("enter")
	h.WaitFor(t, "✗ team-a/api exists already")
	for range 3 {
		h.Key("backspace")
	}
	typeText(h, "shop")
	h.WaitFor(t, "✓ team-a/shop is free")
	h.Key("tab") // stack
	h.Key("right")
	got := h.WaitFor(t, "‹ gpu ›")
	requireGolden(t, got)
	for _, word := range []string{"--", "kiln project"} {
		if strings.Contains(ansi.Strip(got), word) {
			t.Errorf("the new project form speaks CLI (%q):\n%s", word, got)
		}
	}
	h.Key("tab")
	h.Key("enter")
	h.WaitFor(t, "✓ project team-a/shop create done")
	h.WaitFor(t, "esc back")
	want := []engine.ProjectRequest{{Op: engine.ProjectCreate, Ref: "team-a/shop", Stack: "gpu"}}
	if got := b.Ops(); !reflect.DeepEqual(got, want) {
		t.Errorf("project ops = %+v, want %+v", got, want)
	}
	h.Key("esc")
	// The backend's read does not have team-a/shop: the selection is
	// cleared visibly, not moved to another project.
	h.WaitFor(t, "team-a/shop is gone from the cluster")
}

// newProjectForm opens the new project form of dev1 from the inspect
// screen, its first project (default/web) selected.
func newProjectForm(t *testing.T, b tui.Ops) *tuitest.Harness {
	t.Helper()
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("i")
	h.WaitFor(t, "> default/web")
	h.Key("n")
	h.WaitFor(t, "New project on kiln cluster dev1")
	return h
}

// TestNewProjectFormEscChangesNothing: esc leaves the form, nothing runs.
func TestNewProjectFormEscChangesNothing(t *testing.T) {
	b := inspectBackend()
	h := newProjectForm(t, b)
	typeText(h, "blog")
	h.Key("esc")
	h.WaitFor(t, "Projects (3)")
	if got := b.Ops(); len(got) != 0 {
		t.Errorf("esc on the form ran %+v", got)
	}
}

// TestNewProjectFormQ: q is a letter of the name while the name field
// has the key, and leaves the form (changing nothing) from the tenant
// and stack choices, whose ← steps back (from the first to the last).
func TestNewProjectFormQ(t *testing.T) {
	b := inspectBackend()
	h := newProjectForm(t, b)
	typeText(h, "aq")
	h.WaitFor(t, "aq")
	h.Key("down") // the stack, the first of two
	h.WaitFor(t, "(1 of 2)")
	h.Key("left") // back one: the last stack
	h.WaitFor(t, "‹ gpu ›")
	h.Key("q")
	h.WaitFor(t, "Projects (3)")
	if got := b.Ops(); len(got) != 0 {
		t.Errorf("q on the form ran %+v", got)
	}
}

// TestDeleteProjectIsTyped: x asks for the project's name; a wrong name
// is refused, esc changes nothing, the right name deletes it.
func TestDeleteProjectIsTyped(t *testing.T) {
	b := inspectBackend()
	b.OnProject = tuitest.ProjectScript("delete", "team-a/api")
	h := onAPI(t, b, tui.Options{})
	h.Key("x")
	got := h.WaitFor(t, "Delete project team-a/api")
	for _, want := range []string{"Type the project name (api) to confirm", "Secret api-auth", "Deployment api"} {
		if !strings.Contains(ansi.Strip(got), want) {
			t.Errorf("delete screen lacks %q:\n%s", want, got)
		}
	}
	h.Key("esc")
	h.WaitFor(t, "> team-a/api")
	h.Key("x")
	h.WaitFor(t, "Delete project team-a/api")
	typeText(h, "web")
	h.Key("enter")
	h.WaitFor(t, "type the project name (api) exactly")
	for range 3 {
		h.Key("backspace")
	}
	typeText(h, "api")
	h.Key("enter")
	h.WaitFor(t, "✓ project team-a/api delete done")
	want := []engine.ProjectRequest{{Op: engine.ProjectDelete, Ref: "team-a/api"}}
	if got := b.Ops(); !reflect.DeepEqual(got, want) {
		t.Errorf("project ops = %+v, want %+v", got, want)
	}
}

// TestRotateProjectTokenIsConfirmed: t asks, n declines, y rotates.
func TestRotateProjectTokenIsConfirmed(t *testing.T) {
	b := inspectBackend()
	b.OnProject = tuitest.ProjectScript("rotate-token", "team-a/api")
	h := onAPI(t, b, tui.Options{})
	h.Key("enter")
	h.WaitFor(t, "Token sync")
	h.Key("t")
	h.WaitFor(t, "Rotate the token of project team-a/api?")
	h.Key("n")
	h.WaitFor(t, "[t] rotate token")
	h.Key("t")
	h.WaitFor(t, "Rotate the token of project team-a/api?")
	h.Key("y")
	h.WaitFor(t, "✓ project team-a/api rotate-token done")
	want := []engine.ProjectRequest{{Op: engine.ProjectRotateToken, Ref: "team-a/api"}}
	if got := b.Ops(); !reflect.DeepEqual(got, want) {
		t.Errorf("project ops = %+v, want %+v", got, want)
	}
}

// TestReadOnlyInspectorHasNoLifecycle: kiln inspect --read-only offers no
// new, delete or rotate token, and the keys change nothing.
func TestReadOnlyInspectorHasNoLifecycle(t *testing.T) {
	b := inspectBackend()
	h := tuitest.Start(t, b, tui.Options{ReadOnly: true})
	h.WaitFor(t, "dev1")
	h.Key("i")
	h.WaitFor(t, "Projects (3)")
	for _, k := range []string{"n", "x", "t"} {
		h.Key(k)
		got := h.WaitFor(t, "read-only: this inspector changes nothing")
		if strings.Contains(ansi.Strip(got), "[n] new project") {
			t.Errorf("read-only inspector offers n:\n%s", got)
		}
	}
	if got := b.Ops(); len(got) != 0 {
		t.Errorf("read-only inspector ran %+v", got)
	}
}

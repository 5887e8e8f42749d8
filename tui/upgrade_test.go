package tui_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/kilnctl/kiln/engine/input"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/tui"
	"github.com/kilnctl/kiln/tui/tuitest"
)

func space(h *tuitest.Harness) { h.Send(tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}) }

// TestUpgradeFormPlanAndApply: u on home opens the upgrade screen; the
// config file is checked as typed; the options are toggles; Plan runs the
// engine, whose question is the plan as a diff grouped per platform,
// tenant and project (+ create, ~ update with fields, - delete); Apply
// (not focused first) applies it in the run view.
func TestUpgradeFormPlanAndApply(t *testing.T) {
	b := backend()
	b.OnUpgrade = tuitest.UpgradeScript("dev1", "kiln-local", tuitest.UpgradePlan("dev1"))
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "> kube   dev1")
	h.Key("u")
	h.WaitFor(t, "Upgrade kiln platform dev1")
	h.TM.Type("testdata/upgrade.yaml")
	h.WaitFor(t, "✓ valid cluster config")
	h.Key("tab")
	space(h) // Restack on
	h.Key("tab")
	h.Key("tab") // past Delete projects (off) to the button
	t.Run("form", func(t *testing.T) {
		requireGolden(t, h.WaitFor(t, "[x] on"))
	})
	h.Key("enter")
	plan := h.WaitFor(t, "[ Apply 7 changes ]")
	t.Run("plan", func(t *testing.T) { requireGolden(t, plan) })
	got := ansi.Strip(plan)
	for _, want := range []string{
		"7 changes: 3 to create, 3 to update, 1 to delete. Nothing has changed yet.",
		"Platform", "~ update Deployment kiln-system/kiln-gateway", "fields: spec.replicas",
		"Tenant old", "- delete Namespace kiln-tenant-old", "Tenant staging", "+ create Token staging",
		"restack on · delete projects off", "── lines 1–15 of 30",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("plan screen lacks %q:\n%s", want, got)
		}
	}
	// The diff scrolls: the end has the projects and the notes.
	h.Key("end")
	end := ansi.Strip(h.WaitFor(t, "! project default/api needs a restack"))
	for _, want := range []string{"+ create Namespace kiln-tenant-staging", "+ create NetworkPolicy kiln-tenant-staging/kiln-deny-ingress",
		"Project default/blog", "~ update Ingress kiln-system/default.blog", "fields: spec.rules[0].host", "── lines 16–30 of 30"} {
		if !strings.Contains(end, want) {
			t.Errorf("end of the plan lacks %q:\n%s", want, end)
		}
	}
	h.Key("left") // from Cancel to Apply
	h.Key("enter")
	h.WaitFor(t, "✓ platform dev1 upgraded: 7 changes applied")
	h.WaitFor(t, "esc back") // the run has ended
	want := []tuitest.Upgrade{{Req: engine.UpgradeRequest{ConfigPath: "testdata/upgrade.yaml", Restack: true}}}
	if got := b.Upgrades(); !reflect.DeepEqual(got, want) {
		t.Errorf("upgrade requests %+v, want %+v", got, want)
	}
	if got := b.Answers(); !reflect.DeepEqual(got, []bool{true}) {
		t.Errorf("answers %v, want [true]", got)
	}
	// The run's log keeps the plan.
	h.Key("tab")
	h.Key("enter")
	h.WaitFor(t, "plan: + create Namespace kiln-tenant-staging")
	h.Key("esc")
	h.Key("esc")
	h.WaitFor(t, "Kiln clusters")
}

// TestUpgradePlanCancelChangesNothing: Esc on the plan answers no; the
// end is neutral and says nothing was changed.
func TestUpgradePlanCancelChangesNothing(t *testing.T) {
	for _, key := range []string{"esc", "enter", "ctrl+c"} {
		t.Run(key, func(t *testing.T) {
			b := backend()
			b.OnUpgrade = tuitest.UpgradeScript("dev1", "kiln-local", tuitest.UpgradePlan("dev1"))
			h := tuitest.Start(t, b, tui.Options{})
			h.WaitFor(t, "> kube   dev1")
			h.Key("u")
			h.WaitFor(t, "Upgrade kiln platform dev1")
			for range 4 { // past the fields to Plan, and Plan
				h.Key("enter")
			}
			h.WaitFor(t, "[ Apply 7 changes ]")
			h.Key(key) // enter: Cancel has the focus
			h.WaitFor(t, "○ cancelled — nothing was changed")
			got := ansi.Strip(h.WaitFor(t, "esc back"))
			if strings.Contains(got, "✗") || strings.Contains(got, "(not confirmed)") {
				t.Errorf("a cancelled plan is shown as a failure:\n%s", got)
			}
			if got := b.Answers(); !reflect.DeepEqual(got, []bool{false}) {
				t.Errorf("answers %v, want [false]", got)
			}
			if got := b.Upgrades(); len(got) != 1 || !reflect.DeepEqual(got[0], tuitest.Upgrade{}) {
				t.Errorf("upgrade requests %+v, want one with no config and no options", got)
			}
			h.Key("esc")
			h.WaitFor(t, "Kiln clusters")
		})
	}
}

// TestUpgradeRefusedPlanShownWhole: a plan the engine refuses (a removed
// tenant still has projects) shows the engine's message whole; Esc goes
// back to the upgrade screen with it, and from there to the inspect
// screen the upgrade was opened from.
func TestUpgradeRefusedPlanShownWhole(t *testing.T) {
	b := inspectBackend()
	b.OnUpgrade = tuitest.RefusedUpgradeScript("dev1")
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "dev1")
	h.Key("i")
	h.WaitFor(t, "Projects (3)")
	h.Key("u")
	h.WaitFor(t, "Upgrade kiln platform dev1")
	for range 4 {
		h.Key("enter")
	}
	h.WaitFor(t, "(bad input)")
	failed := h.WaitFor(t, "esc back")
	msg := "the config removes tenants that still have projects: old/web; nothing was changed. Delete those projects first, or pass the Delete projects option of the upgrade screen (u) to delete them with their tenant"
	if !strings.Contains(joined(failed), "✗ "+msg+" (bad input)") {
		t.Errorf("the refusal is not shown whole:\n%s", ansi.Strip(failed))
	}
	if strings.Contains(ansi.Strip(failed), "Apply") {
		t.Errorf("a refused plan offers Apply:\n%s", ansi.Strip(failed))
	}
	h.Key("esc")
	form := h.WaitFor(t, "Upgrade kiln platform dev1")
	if !strings.Contains(joined(form), "✗ the last plan was refused: "+msg) {
		t.Errorf("the upgrade screen does not say why the last plan was refused:\n%s", ansi.Strip(form))
	}
	// The focus is on Delete projects, where the refusal is fixed.
	space(h)
	h.WaitFor(t, "Delete projects [x] on")
	h.Key("esc")
	h.WaitFor(t, "Projects (3)")
	if got := b.Answers(); len(got) != 0 {
		t.Errorf("a refused plan asked: %v", got)
	}
}

// TestUpgradeConfigFileChecked: a config file that does not decode is
// marked as typed and Plan does not start.
func TestUpgradeConfigFileChecked(t *testing.T) {
	b := backend()
	b.OnUpgrade = tuitest.UpgradeScript("dev1", "kiln-local", nil)
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "> kube   dev1")
	h.Key("u")
	h.WaitFor(t, "Upgrade kiln platform dev1")
	h.TM.Type("testdata/bad-config.yaml")
	h.WaitFor(t, "✗ ")
	for range 3 {
		h.Key("enter")
	}
	h.Key("enter")
	h.WaitFor(t, "fix the Config file field first")
	if got := b.Upgrades(); len(got) != 0 {
		t.Errorf("an invalid config file started an upgrade: %+v", got)
	}
	h.TM.Type("x")
	for range 30 {
		h.Key("backspace")
	}
	h.WaitFor(t, "empty: the installed config")
}

// TestDayTwoKeysInHelp: home and the inspect screens list upgrade and
// rotate key in their key help; the read-only inspector does not offer
// them, and u and K there change nothing.
func TestDayTwoKeysInHelp(t *testing.T) {
	h := tuitest.Start(t, inspectBackend(), tui.Options{})
	got := h.WaitFor(t, "> kube   dev1")
	for _, want := range []string{"u upgrade", "K rotate key"} {
		if !strings.Contains(ansi.Strip(got), want) {
			t.Errorf("home footer lacks %q:\n%s", want, ansi.Strip(got))
		}
	}
	h.Key("i")
	h.WaitFor(t, "Projects (3)")
	h.Key("?")
	help := ansi.Strip(h.WaitFor(t, "Keys on this screen"))
	// The help is longer than a screen at 80x24: its last page too.
	h.Send(tea.KeyPressMsg{Code: tea.KeyEnd})
	help += ansi.Strip(h.WaitFor(t, "Everywhere:"))
	for _, want := range []string{"upgrade", "rotate key"} {
		if !strings.Contains(help, want) {
			t.Errorf("inspect help lacks %q:\n%s", want, help)
		}
	}
}

func TestReadOnlyInspectOffersNoUpgradeOrRotate(t *testing.T) {
	b := inspectBackend()
	b.OnUpgrade = tuitest.UpgradeScript("dev1", "kiln-local", tuitest.UpgradePlan("dev1"))
	b.OnRotate = tuitest.RotateScript("dev1", "kiln-local", engine.RotateStart, 0)
	h := tuitest.Start(t, b, tui.Options{ReadOnly: true, InspectOnly: true, Inspect: &engine.ClusterRef{Provider: "kube", Name: "dev1", Location: "kiln-local"}})
	got := ansi.Strip(h.WaitFor(t, "Projects (3)"))
	h.Key("?")
	got += ansi.Strip(h.WaitFor(t, "Keys on this screen"))
	for _, bad := range []string{"upgrade", "rotate key"} {
		if strings.Contains(got, bad) {
			t.Errorf("read-only inspector offers %q:\n%s", bad, got)
		}
	}
	h.Key("esc")
	for _, k := range []string{"u", "K"} {
		h.Key(k)
		scr := ansi.Strip(h.WaitFor(t, "read-only: this inspector changes nothing"))
		if strings.Contains(scr, "Upgrade kiln platform") || strings.Contains(scr, "Rotate the signing key") {
			t.Errorf("%s opened a screen in the read-only inspector:\n%s", k, scr)
		}
	}
	h.Key("enter")
	h.WaitFor(t, "Token sync")
	h.Key("u")
	h.WaitFor(t, "read-only: this inspector changes nothing")
	if len(b.Upgrades()) != 0 || len(b.Rotations()) != 0 {
		t.Errorf("read-only inspector ran upgrade %v or rotate %v", b.Upgrades(), b.Rotations())
	}
}

// TestDayTwoInputNamesAreTheWizards: the engine's messages about the
// upgrade and rotate-key inputs name the wizard's options, not flags.
func TestDayTwoInputNamesAreTheWizards(t *testing.T) {
	for _, in := range []engine.Input{engine.InputDeleteProjects, engine.InputRestack, engine.InputKeepOld, engine.InputFinish, input.KubernetesVersion} {
		got := tui.InputName(in)
		if strings.Contains(got, "--") || got == string(in) {
			t.Errorf("%s is worded %q", in, got)
		}
	}
}

// TestUpgradePlanFitsSmallTerminals: at 60x16 the plan keeps its buttons
// and every line fits (display width); the diff scrolls to its end.
func TestUpgradePlanFitsSmallTerminals(t *testing.T) {
	b := backend()
	b.OnUpgrade = tuitest.UpgradeScript("dev1", "kiln-local", tuitest.UpgradePlan("dev1"))
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "> kube   dev1")
	h.Key("u")
	h.WaitFor(t, "Upgrade kiln platform dev1")
	for range 4 {
		h.Key("enter")
	}
	h.WaitFor(t, "[ Apply 7 changes ]")
	h.Send(tea.WindowSizeMsg{Width: 60, Height: 16})
	got := h.WaitFor(t, "── lines 1–")
	checkWidth(t, got, 60, 16)
	if !strings.Contains(ansi.Strip(got), "[ Cancel ]") {
		t.Errorf("the buttons left the screen at 60x16:\n%s", ansi.Strip(got))
	}
	for range 20 {
		h.Send(tea.KeyPressMsg{Code: tea.KeyPgDown})
	}
	end := h.WaitFor(t, "! project default/api needs a")
	checkWidth(t, end, 60, 16)
	if !strings.Contains(ansi.Strip(end), "[ Apply 7 changes ]") {
		t.Errorf("the buttons left the screen at the end of the plan:\n%s", ansi.Strip(end))
	}
}

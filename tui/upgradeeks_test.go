package tui_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/kilnctl/kiln/engine"
	awsprovider "github.com/kilnctl/kiln/engine/provider/aws"
	"github.com/kilnctl/kiln/tui"
	"github.com/kilnctl/kiln/tui/tuitest"
)

// eksBackend has an aws cluster eks1 next to the kube ones, and checks
// the upgrade screen's EKS fields with the aws provider's rules, as the
// wizard's backend does (CheckNodes, then ValidateFlags of the Change).
func eksBackend() *tuitest.Backend {
	b := backend()
	b.List = append(b.List, tui.Cluster{Provider: "aws", Name: "eks1", Location: "eu-west-1", Platform: engine.PlatformInstalled, Projects: 1})
	b.AWSUpgradeCheck = func(t engine.ClusterRef, req engine.Infra) error {
		if req.NodesGiven && req.Nodes < 0 {
			return awsprovider.NotANodeCount()
		}
		if err := awsprovider.CheckNodes(req.Nodes, req.NodesGiven); err != nil {
			return err
		}
		p := &awsprovider.Provider{Region: t.Location, Change: awsprovider.Change{Nodes: req.Nodes, InstanceType: req.InstanceType, KubernetesVersion: req.KubernetesVersion}}
		return p.ValidateFlags()
	}
	return b
}

// selectEKS selects eks1 on home.
func selectEKS(t *testing.T, h *tuitest.Harness) {
	t.Helper()
	h.WaitFor(t, "eks1")
	for range 3 {
		if strings.Contains(ansi.Strip(h.Screen()), "> aws    eks1") {
			break
		}
		h.Key("down")
	}
	h.WaitFor(t, "> aws    eks1")
}

// openEKSUpgrade selects eks1 on home and opens its upgrade screen.
func openEKSUpgrade(t *testing.T, h *tuitest.Harness) string {
	t.Helper()
	selectEKS(t, h)
	h.Key("u")
	return h.WaitFor(t, "Upgrade kiln platform eks1")
}

func backspaces(h *tuitest.Harness, n int) {
	for range n {
		h.Key("backspace")
	}
}

// refused waits for the screen to show wait and checks that it says want
// (wrapped as it may be) and names no flag.
func refused(t *testing.T, h *tuitest.Harness, wait, want string) {
	t.Helper()
	got := joined(h.WaitFor(t, wait))
	if !strings.Contains(got, want) {
		t.Errorf("the screen does not say %q:\n%s", want, got)
	}
	for _, flag := range []string{"--kubernetes-version", "--nodes", "--instance-type"} {
		if strings.Contains(got, flag) {
			t.Errorf("the refusal names the flag %s:\n%s", flag, got)
		}
	}
}

// TestUpgradeEKSFields: the upgrade screen of an aws cluster has the EKS
// fields (Kubernetes version, Nodes, Node type), empty meaning "keep what
// runs"; each is checked as typed with the aws provider's rules and a bad
// value is refused naming the field, never a flag; Plan is refused while
// one is marked ✗; the values reach the backend's UpgradeRequest, and the
// plan shows the infrastructure changes first.
func TestUpgradeEKSFields(t *testing.T) {
	b := eksBackend()
	b.OnUpgrade = tuitest.UpgradeScriptOn("aws", "eks1", "eu-west-1", tuitest.EKSUpgradePlan("eks1"))
	h := tuitest.Start(t, b, tui.Options{})
	form := ansi.Strip(openEKSUpgrade(t, h))
	for _, want := range []string{"Kubernetes version keep what runs", "Nodes              keep what runs", "Node type          keep what runs"} {
		if !strings.Contains(form, want) {
			t.Errorf("upgrade screen of an aws cluster lacks %q:\n%s", want, form)
		}
	}
	t.Run("form", func(t *testing.T) { requireGolden(t, h.Screen()) })

	h.Key("tab") // Kubernetes version
	typeText(h, "v1.32")
	refused(t, h, "is not an EKS", `✗ the Kubernetes version field of the upgrade screen (u, provider aws): "v1.32" is not an EKS Kubernetes version (MAJOR.MINOR, like 1.31)`)
	// Plan is refused while a field is marked ✗, and nothing runs.
	for range 5 { // Nodes, Node type, Restack, Delete projects, Plan
		h.Key("tab")
	}
	h.Key("enter")
	h.WaitFor(t, "fix the Kubernetes version field first")
	if got := b.Upgrades(); len(got) != 0 {
		t.Fatalf("an invalid field started an upgrade: %+v", got)
	}
	// The focus is back on the field: fix it.
	backspaces(h, 5)
	typeText(h, "1.32")
	h.WaitFor(t, "MAJOR.MINOR, one minor above what runs")

	h.Key("tab") // Nodes
	h.Key("0")
	refused(t, h, "0 is out of range", "✗ the Nodes field of the upgrade screen (u, provider aws): 0 is out of range; a node group has 1 to 100 nodes")
	backspaces(h, 1)
	typeText(h, "many")
	refused(t, h, "not a number", "✗ the Nodes field of the upgrade screen (u, provider aws): not a number")
	backspaces(h, 4)
	h.Key("3")
	h.WaitFor(t, "the node group's size; empty")

	h.Key("tab") // Node type
	typeText(h, "M6i large")
	refused(t, h, "is not an EC2", `✗ the Node type (EC2 instance type) field of the upgrade screen (u, provider aws): "M6i large" is not an EC2 instance type`)
	backspaces(h, 9)
	typeText(h, "m6i.large")
	h.WaitFor(t, "EC2 instance type, like m6i.large")

	for range 3 {
		h.Key("tab") // Restack, Delete projects, Plan
	}
	h.Key("enter")
	plan := h.WaitFor(t, "[ Apply 4 changes ]")
	t.Run("plan", func(t *testing.T) { requireGolden(t, plan) })
	got := ansi.Strip(plan)
	if inf, pl := strings.Index(got, "Infrastructure"), strings.Index(got, "Platform"); inf < 0 || (pl >= 0 && pl < inf) {
		t.Errorf("the plan does not show the infrastructure first:\n%s", got)
	}
	for _, want := range []string{"~ update EKSCluster eks1", "~ update Nodegroup kiln-nodes", "2 → 3 nodes",
		"EKS Kubernetes version 1.32 · Nodes 3 · Node type m6i.large"} {
		if !strings.Contains(got, want) {
			t.Errorf("plan screen lacks %q:\n%s", want, got)
		}
	}
	h.Key("end")
	h.WaitFor(t, "~ update Deployment kiln-system/kiln-gateway") // then the platform
	h.Key("left")                                                // Apply
	h.Key("enter")
	h.WaitFor(t, "✓ platform eks1 upgraded: 4 changes applied")
	want := []tuitest.Upgrade{{Infra: engine.Infra{KubernetesVersion: "1.32", Nodes: 3, NodesGiven: true, InstanceType: "m6i.large"}}}
	if got := b.Upgrades(); !reflect.DeepEqual(got, want) {
		t.Errorf("upgrade requests %+v, want %+v", got, want)
	}
	if got := b.Answers(); !reflect.DeepEqual(got, []bool{true}) {
		t.Errorf("answers %v, want [true]", got)
	}
}

// TestUpgradeEKSFieldsEmptyKeepWhatRuns: left empty, the EKS fields ask
// nothing of the infrastructure (the request has none of them).
func TestUpgradeEKSFieldsEmptyKeepWhatRuns(t *testing.T) {
	b := eksBackend()
	b.OnUpgrade = tuitest.UpgradeScriptOn("aws", "eks1", "eu-west-1", tuitest.UpgradePlan("eks1"))
	h := tuitest.Start(t, b, tui.Options{})
	openEKSUpgrade(t, h)
	for range 7 { // past the fields to Plan, and Plan
		h.Key("enter")
	}
	plan := ansi.Strip(h.WaitFor(t, "[ Apply 7 changes ]"))
	if !strings.Contains(plan, "EKS kept as it runs") {
		t.Errorf("the plan does not say the EKS cluster is kept:\n%s", plan)
	}
	h.Key("esc")
	h.WaitFor(t, "○ cancelled — nothing was changed")
	if got := b.Upgrades(); len(got) != 1 || !reflect.DeepEqual(got[0], tuitest.Upgrade{}) {
		t.Errorf("upgrade requests %+v, want one asking nothing", got)
	}
}

// TestUpgradeEKSFieldsOnlyForAWS: a kube cluster's upgrade screen has no
// EKS field, and its focus goes from the config file to Restack.
func TestUpgradeEKSFieldsOnlyForAWS(t *testing.T) {
	b := eksBackend()
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "> kube   dev1")
	h.Key("u")
	got := ansi.Strip(h.WaitFor(t, "Upgrade kiln platform dev1"))
	for _, bad := range []string{"Kubernetes version", "Nodes", "Node type", "EKS"} {
		if strings.Contains(got, bad) {
			t.Errorf("a kube cluster's upgrade screen shows %q:\n%s", bad, got)
		}
	}
	h.Key("tab")
	space(h)
	h.WaitFor(t, "Restack         [x] on")
}

// TestUpgradeEKSRefusalFocusesTheField: the aws provider's refusal of a
// version jump is shown with the field's name, and Esc goes back to the
// upgrade screen with the focus on the Kubernetes version field.
func TestUpgradeEKSRefusalFocusesTheField(t *testing.T) {
	b := eksBackend()
	b.OnUpgrade = tuitest.RefusedEKSUpgradeScript("eks1")
	h := tuitest.Start(t, b, tui.Options{})
	openEKSUpgrade(t, h)
	h.Key("tab")
	typeText(h, "1.33")
	for range 5 {
		h.Key("tab")
	}
	h.Key("enter")
	failed := ansi.Strip(h.WaitFor(t, "(bad input)"))
	if strings.Contains(failed, "--") {
		t.Errorf("the refusal names a flag:\n%s", failed)
	}
	h.WaitFor(t, "esc back")
	h.Key("esc")
	form := h.WaitFor(t, "✗ the last plan was refused: the Kubernetes version field")
	if !strings.Contains(ansi.Strip(form), "> Kubernetes version") {
		t.Errorf("the focus is not on the Kubernetes version field:\n%s", ansi.Strip(form))
	}
	backspaces(h, 1)
	h.Key("2")
	h.WaitFor(t, "Kubernetes version 1.32")
}

// TestUpgradeEKSShowsTheRunningVersion: opened from the inspect screen,
// the Kubernetes version field's placeholder gives the version the
// cluster runs, as the inspection read it.
func TestUpgradeEKSShowsTheRunningVersion(t *testing.T) {
	b := eksBackend()
	in := tuitest.Inspection("eks1", "eu-west-1")
	in.Provider, in.KubernetesVersion = "aws", "v1.31.4-eks-0f1e2d3"
	b.Inspections = []*engine.ClusterStatus{in}
	h := tuitest.Start(t, b, tui.Options{})
	selectEKS(t, h)
	h.Key("i")
	h.WaitFor(t, "Projects (3)")
	h.Key("u")
	h.WaitFor(t, "Kubernetes version keep what runs (1.31)")
}

package main

import (
	"strings"
	"testing"
	"time"
)

// TestWizardAWSUpgradeNodesInTmux drives the wizard's upgrade screen of an
// aws cluster (made with the CLI, on the EKS emulator) in a real
// terminal: the EKS fields are there, a node count the aws provider
// refuses is refused as typed naming the Nodes field, never a flag; Nodes
// 3 plans the node group 2 → 3 first, as kiln upgrade aws --nodes 3
// does, and Apply resizes it: EKS reports 3 nodes.
func TestWizardAWSUpgradeNodesInTmux(t *testing.T) {
	needTmux(t)
	e, emu := awsEnv(t)
	const name, region = "wizeks", "us-east-1"
	t.Cleanup(func() {
		if r := e.aws("destroy", "aws", name, "--region", region, "--yes", "--headless"); r.code != 0 {
			t.Errorf("cleanup destroy: %s", r)
		}
		waitNamespaceGone(t, clusterB.Client, "kiln-system")
	})
	expect(t, e.aws("create", "aws", name, "--region", region, "--nodes", "2", "--headless"), 0)
	before := describeEKS(t, emu, name, region)
	if got := before.Groups["kiln-nodes"]; !strings.HasPrefix(got, "2 × t3.medium, ") {
		t.Fatalf("after create: %s, want 2 nodes", before)
	}

	x := startWizardArgs(t, e, 100, 30, e.vars, "--regions", strings.Join(awsRegions, ","))
	x.waitFor(time.Minute, "Kiln clusters", "aws    "+name)
	for range 10 {
		if strings.Contains(x.screen(), "> aws    "+name) {
			break
		}
		x.keys("Down")
		time.Sleep(200 * time.Millisecond)
	}
	x.waitFor(10*time.Second, "> aws    "+name)
	x.keys("u")
	form := x.waitFor(10*time.Second, "Upgrade kiln platform "+name, "Kubernetes version", "Nodes", "Node type", "keep what runs")
	fitsWidth(t, form, 100)

	x.keys("Tab", "Tab") // past the config file and the version to Nodes
	x.text("0")
	bad := folded(x.waitFor(10*time.Second, "0 is out of range"))
	if !strings.Contains(bad, "the Nodes field of the upgrade screen") || strings.Contains(bad, "--nodes") {
		t.Errorf("a node count of 0 is not refused naming the field:\n%s", bad)
	}
	x.keys("BSpace")
	x.text("3")
	x.waitFor(10*time.Second, "the node group's size; empty: keep it")
	x.keys("Enter", "Enter", "Enter", "Enter", "Enter") // Node type, Restack, Delete projects, Plan, and Plan
	plan := x.waitFor(2*time.Minute, "Plan for kiln platform "+name, "[ Apply ", "[ Cancel ]")
	t.Logf("upgrade plan at 100x30:\n%s", plan)
	for _, want := range []string{"Infrastructure", "~ update Nodegroup kiln-nodes", "2 → 3 nodes (t3.medium)", "EKS Nodes 3"} {
		if !strings.Contains(plan, want) {
			t.Errorf("plan screen lacks %q:\n%s", want, plan)
		}
	}
	if i, j := strings.Index(plan, "Infrastructure"), strings.Index(plan, "Platform"); j >= 0 && j < i {
		t.Errorf("the plan does not show the infrastructure first:\n%s", plan)
	}
	// Nothing changed while the plan is on screen.
	if got := describeEKS(t, emu, name, region); got.Groups["kiln-nodes"] != before.Groups["kiln-nodes"] {
		t.Errorf("the plan changed EKS: %s → %s", before, got)
	}
	x.keys("Left", "Enter") // Apply
	x.waitFor(5*time.Minute, "✓ platform "+name+" upgraded", "esc back")
	after := describeEKS(t, emu, name, region)
	if got := after.Groups["kiln-nodes"]; !strings.HasPrefix(got, "3 × t3.medium, ") || !strings.HasSuffix(got, ", ACTIVE") || after.Version != before.Version {
		t.Errorf("after the wizard's upgrade: %s, want the node group at 3 nodes, ACTIVE, the version kept (%s)", after, before)
	}
	x.keys("Escape")
	x.waitFor(time.Minute, "Kiln clusters")
	x.keys("q")
}

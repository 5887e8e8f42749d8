package tui_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/kilnctl/kiln/engine"
	awsprovider "github.com/kilnctl/kiln/engine/provider/aws"
	"github.com/kilnctl/kiln/tui"
	"github.com/kilnctl/kiln/tui/tuitest"
)

// TestCreateFormAWS: the create form's provider choice switches to aws;
// the region is offered from the home screen's discovery; nodes and
// instance type are checked as typed with the aws provider's rules
// (ValidateFlags), worded with the wizard's fields; Create is refused
// while one is marked ✗, then sends the aws request.
func TestCreateFormAWS(t *testing.T) {
	b := backend()
	b.List = append(b.List, tui.Cluster{Provider: "aws", Name: "eks0", Location: "eu-west-1", Platform: engine.PlatformInstalled})
	b.AWSCheck = func(c engine.ClusterRef, req engine.Infra) error { // as the wizard's backend: the provider's node-count rule, then ValidateFlags
		if req.Nodes < 0 {
			return awsprovider.NotANodeCount()
		}
		if err := awsprovider.CheckNodes(req.Nodes, req.NodesGiven); err != nil {
			return err
		}
		p := &awsprovider.Provider{Region: c.Location, Nodes: req.Nodes, InstanceType: req.InstanceType, Profile: req.Profile}
		return p.ValidateFlags()
	}
	done := make(chan struct{})
	close(done)
	b.OnCreate = tuitest.CreateScript("eks1", "eu-west-1", false, done)
	h := tuitest.Start(t, b, tui.Options{})
	h.WaitFor(t, "eks0")
	h.Key("n")
	h.WaitFor(t, "New kiln cluster")
	h.Key("up") // the provider
	h.WaitFor(t, "←/→ kube|aws")
	h.Key("right")
	h.WaitFor(t, "‹ aws › a new EKS cluster")
	h.Key("tab")
	for _, r := range "eks1" {
		h.Key(string(r))
	}
	h.Key("tab") // region, filled from discovery
	got := ansi.Strip(h.WaitFor(t, "kiln clusters found in: eu-west-1"))
	if !strings.Contains(got, "Region       eu-west-1") {
		t.Errorf("region not offered from discovery:\n%s", got)
	}
	h.Key("tab") // nodes
	h.Key("0")
	// The provider's rule and range, not words of the form's own.
	flat := strings.Join(strings.Fields(ansi.Strip(h.WaitFor(t, "create form (n, provider aws): 0 is"))), " ")
	if want := fmt.Sprintf("✗ the Nodes field of the create form (n, provider aws): 0 is out of range; a node group has 1 to %d nodes", awsprovider.MaxNodes); !strings.Contains(flat, want) {
		t.Errorf("a typed 0 nodes: want %q on the form:\n%s", want, flat)
	}
	h.Key("backspace")
	for _, r := range "101" {
		h.Key(string(r))
	}
	h.WaitFor(t, "the Nodes field of the create form")
	for range 3 {
		h.Key("backspace")
	}
	h.Key("3")
	h.Key("tab") // instance type
	for _, r := range "T3" {
		h.Key(string(r))
	}
	got = h.WaitFor(t, "the Node type (EC2 instance type) field of the create form")
	requireGolden(t, got)
	for _, k := range []string{"tab", "tab", "tab", "tab", "enter"} { // to Create
		h.Key(k)
	}
	h.WaitFor(t, "fix the aws fields first")
	h.Key("backspace")
	h.Key("backspace")
	for _, r := range "m6i.large" {
		h.Key(string(r))
	}
	h.WaitFor(t, "✓ region, nodes and instance type are valid")
	for _, k := range []string{"tab", "tab", "tab", "tab", "enter"} {
		h.Key(k)
	}
	h.WaitFor(t, "cluster eks1 is ready")
	fin := ansi.Strip(h.WaitFor(t, "Next")) // the final screen, once the run has ended
	if !strings.Contains(fin, "Region        eu-west-1") || !strings.Contains(fin, "kiln status aws eks1 --region eu-west-1") {
		t.Errorf("final screen of an aws create:\n%s", fin)
	}
	if len(b.Requests) != 1 {
		t.Fatalf("requests %+v", b.Requests)
	}
	r := b.Requests[0]
	if c := r.Cluster; c.Provider != "aws" || c.Name != "eks1" || c.Location != "eu-west-1" || r.Infra.Nodes != 3 || r.Infra.InstanceType != "m6i.large" {
		t.Errorf("create request %+v", r)
	}
}

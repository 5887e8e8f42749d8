package cli

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kilnctl/kiln/engine"
	awsprovider "github.com/kilnctl/kiln/engine/provider/aws"
	"github.com/kilnctl/kiln/tui"
)

// TestWizardAWSFormUsesTheProvidersRules: the create form's aws fields are
// checked by the aws provider kiln create aws builds (ValidateFlags), and
// each problem names the wizard's field, never a flag; the provider built
// for Create carries the form's region, nodes, instance type and profile.
func TestWizardAWSFormUsesTheProvidersRules(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	b := &wizardBackend{g: &globals{}}
	cases := []struct {
		req  tui.CreateRequest
		in   engine.Input
		word string
	}{
		{tui.CreateRequest{Provider: "aws", Name: "eks1", Location: "mars-1"}, engine.InputRegion, "Region field"},
		{tui.CreateRequest{Provider: "aws", Name: "eks1", Location: "eu-west-1", Nodes: 101}, engine.InputNodes, "Nodes field"},
		{tui.CreateRequest{Provider: "aws", Name: "eks1", Location: "eu-west-1", Nodes: -1}, engine.InputNodes, "Nodes field"},
		// A typed 0 is refused as --nodes 0 is (left empty, the field
		// is the default), with the provider's range.
		{tui.CreateRequest{Provider: "aws", Name: "eks1", Location: "eu-west-1", Nodes: 0, NodesGiven: true}, engine.InputNodes, fmt.Sprintf("0 is out of range; a node group has 1 to %d nodes", awsprovider.MaxNodes)},
		{tui.CreateRequest{Provider: "aws", Name: "eks1", Location: "eu-west-1", Nodes: awsprovider.MaxNodes + 1, NodesGiven: true}, engine.InputNodes, fmt.Sprintf("a node group has 1 to %d nodes", awsprovider.MaxNodes)},
		{tui.CreateRequest{Provider: "aws", Name: "eks1", Location: "eu-west-1", InstanceType: "T3 large"}, engine.InputInstanceType, "Node type (EC2 instance type) field"},
	}
	for _, c := range cases {
		err := b.CheckAWS(c.req)
		var ie *engine.InputError
		if !errors.As(err, &ie) || ie.Input != c.in {
			t.Errorf("CheckAWS(%+v) = %v, want an input error on %s", c.req, err, c.in)
			continue
		}
		if msg := ie.Render(tui.InputName); !strings.Contains(msg, c.word) || strings.Contains(msg, "--") {
			t.Errorf("CheckAWS(%+v) says %q, want it to name the %s and no flag", c.req, msg, c.word)
		}
	}
	ok := tui.CreateRequest{Provider: "aws", Name: "eks1", Location: "eu-west-1", Nodes: 3, InstanceType: "m6i.large", Profile: "team"}
	if err := b.CheckAWS(ok); err != nil {
		t.Fatalf("CheckAWS(%+v) = %v, want nil", ok, err)
	}
	p, err := b.awsCreateProvider(ok)
	if err != nil {
		t.Fatal(err)
	}
	if p.Region != "eu-west-1" || p.Nodes != 3 || p.InstanceType != "m6i.large" || p.Profile != "team" {
		t.Errorf("provider for the form: region %q nodes %d type %q profile %q", p.Region, p.Nodes, p.InstanceType, p.Profile)
	}
	var _ *awsprovider.Provider = p
}

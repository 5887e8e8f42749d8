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
	b := &wizardOps{g: &globals{}}
	at := engine.ClusterRef{Provider: "aws", Name: "eks1", Location: "eu-west-1"}
	cases := []struct {
		region string
		req    engine.Infra
		in     engine.Input
		word   string
	}{
		{"mars-1", engine.Infra{}, engine.InputRegion, "Region field"},
		{"eu-west-1", engine.Infra{Nodes: 101}, engine.InputNodes, "Nodes field"},
		{"eu-west-1", engine.Infra{Nodes: -1}, engine.InputNodes, "Nodes field"},
		// A typed 0 is refused as --nodes 0 is (left empty, the field
		// is the default), with the provider's range.
		{"eu-west-1", engine.Infra{Nodes: 0, NodesGiven: true}, engine.InputNodes, fmt.Sprintf("0 is out of range; a node group has 1 to %d nodes", awsprovider.MaxNodes)},
		{"eu-west-1", engine.Infra{Nodes: awsprovider.MaxNodes + 1, NodesGiven: true}, engine.InputNodes, fmt.Sprintf("a node group has 1 to %d nodes", awsprovider.MaxNodes)},
		{"eu-west-1", engine.Infra{InstanceType: "T3 large"}, engine.InputInstanceType, "Node type (EC2 instance type) field"},
	}
	for _, c := range cases {
		err := b.CheckCreate(engine.ClusterRef{Provider: "aws", Name: "eks1", Location: c.region}, c.req)
		var ie *engine.InputError
		if !errors.As(err, &ie) || ie.Input != c.in {
			t.Errorf("CheckCreate(%s, %+v) = %v, want an input error on %s", c.region, c.req, err, c.in)
			continue
		}
		if msg := ie.Render(tui.InputName); !strings.Contains(msg, c.word) || strings.Contains(msg, "--") {
			t.Errorf("CheckCreate(%s, %+v) says %q, want it to name the %s and no flag", c.region, c.req, msg, c.word)
		}
	}
	ok := engine.Infra{Nodes: 3, InstanceType: "m6i.large", Profile: "team"}
	if err := b.CheckCreate(at, ok); err != nil {
		t.Fatalf("CheckCreate(%+v) = %v, want nil", ok, err)
	}
	p, err := b.awsCreateProvider(at, ok)
	if err != nil {
		t.Fatal(err)
	}
	if p.Region != "eu-west-1" || p.Nodes != 3 || p.InstanceType != "m6i.large" || p.Profile != "team" {
		t.Errorf("provider for the form: region %q nodes %d type %q profile %q", p.Region, p.Nodes, p.InstanceType, p.Profile)
	}
	var _ *awsprovider.Provider = p
}

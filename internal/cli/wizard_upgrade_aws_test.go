package cli

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/event"
	awsprovider "github.com/kilnctl/kiln/engine/provider/aws"
	"github.com/kilnctl/kiln/internal/exit"
	"github.com/kilnctl/kiln/tui"
)

// headlessUpgradeProvider is the aws provider kiln upgrade aws builds
// with args (its flags) at region eu-west-1.
func headlessUpgradeProvider(t *testing.T, args ...string) (*awsprovider.Provider, error) {
	t.Helper()
	g := &globals{region: "eu-west-1"}
	cmd := newUpgradeCmd(g)
	if err := cmd.Flags().Parse(args); err != nil {
		t.Fatalf("flags %v: %v", args, err)
	}
	g.aws.upgrading = true // as the command's RunE sets it
	p, err := g.awsProvider()
	if err != nil {
		return nil, err
	}
	return p.(*awsprovider.Provider), nil
}

// TestWizardUpgradeBuildsTheHeadlessChange: the wizard's upgrade of an
// aws cluster with the EKS fields builds the provider kiln upgrade aws
// builds with the same values as flags — the same Change, so the same
// infrastructure plan and question — and refuses what the flags refuse,
// on the same input, worded with the upgrade screen's field instead of
// the flag.
func TestWizardUpgradeBuildsTheHeadlessChange(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	at := engine.ClusterRef{Provider: "aws", Name: "eks1", Location: "eu-west-1"}
	ok := []struct {
		flags []string
		req   engine.Infra
		want  awsprovider.Change
	}{
		{nil, engine.Infra{}, awsprovider.Change{}},
		{[]string{"--nodes", "3"}, engine.Infra{Nodes: 3, NodesGiven: true}, awsprovider.Change{Nodes: 3}},
		{[]string{"--kubernetes-version", "1.32"}, engine.Infra{KubernetesVersion: "1.32"}, awsprovider.Change{KubernetesVersion: "1.32"}},
		{[]string{"--instance-type", "m6i.large"}, engine.Infra{InstanceType: "m6i.large"}, awsprovider.Change{InstanceType: "m6i.large"}},
		{[]string{"--kubernetes-version", "1.32", "--nodes", "5", "--instance-type", "m6i.large"},
			engine.Infra{KubernetesVersion: "1.32", Nodes: 5, NodesGiven: true, InstanceType: "m6i.large"},
			awsprovider.Change{Nodes: 5, InstanceType: "m6i.large", KubernetesVersion: "1.32"}},
	}
	for _, c := range ok {
		hp, err := headlessUpgradeProvider(t, c.flags...)
		if err != nil {
			t.Fatalf("kiln upgrade aws %v: %v", c.flags, err)
		}
		b := &wizardOps{g: &globals{}}
		if err := b.CheckUpgrade(at, c.req); err != nil {
			t.Errorf("CheckUpgrade(%+v) = %v, want nil", c.req, err)
		}
		r, err := b.upgradeTarget(at, c.req)
		if err != nil {
			t.Fatalf("wizard upgrade %+v: %v", c.req, err)
		}
		wp := r.Provider.(*awsprovider.Provider)
		if hp.Change != c.want || wp.Change != hp.Change {
			t.Errorf("%v: headless Change %+v, wizard Change %+v, want %+v", c.flags, hp.Change, wp.Change, c.want)
		}
		if wp.Region != "eu-west-1" || r.Name != "eks1" {
			t.Errorf("wizard upgrade target: region %q name %q", wp.Region, r.Name)
		}
	}

	bad := []struct {
		flags []string
		req   engine.Infra
		in    engine.Input
		field string
	}{
		{[]string{"--nodes", "0"}, engine.Infra{NodesGiven: true}, engine.InputNodes, "the Nodes field of the upgrade screen"},
		{[]string{"--nodes", "101"}, engine.Infra{Nodes: 101, NodesGiven: true}, engine.InputNodes, "the Nodes field of the upgrade screen"},
		{[]string{"--instance-type", "M6i large"}, engine.Infra{InstanceType: "M6i large"}, engine.InputInstanceType, "the Node type (EC2 instance type) field of the upgrade screen"},
		{[]string{"--kubernetes-version", "v1.32"}, engine.Infra{KubernetesVersion: "v1.32"}, "kubernetes-version", "the Kubernetes version field of the upgrade screen"},
	}
	for _, c := range bad {
		_, herr := headlessUpgradeProvider(t, c.flags...)
		var hie *engine.InputError
		if !errors.As(herr, &hie) || hie.Input != c.in || exit.Code(herr) != exit.BadInput || !strings.Contains(herr.Error(), c.flags[0]) {
			t.Errorf("kiln upgrade aws %v: %v, want exit 2 on %s naming the flag", c.flags, herr, c.in)
		}
		b := &wizardOps{g: &globals{}}
		werr := b.CheckUpgrade(at, c.req)
		var wie *engine.InputError
		if !errors.As(werr, &wie) || wie.Input != c.in || exit.Code(werr) != exit.BadInput {
			t.Errorf("CheckUpgrade(%+v) = %v, want exit 2 on %s", c.req, werr, c.in)
			continue
		}
		if msg := wie.Render(tui.UpgradeInputName); !strings.Contains(msg, c.field) || strings.Contains(msg, "--") {
			t.Errorf("CheckUpgrade(%+v) says %q, want it to name %s and no flag", c.req, msg, c.field)
		}
		if herr != nil && werr.Error() != herr.Error() {
			t.Errorf("the wizard refuses %+v otherwise than the flags %v: %q vs %q", c.req, c.flags, werr, herr)
		}

		// Upgrade refuses it before the engine reaches AWS, with the
		// result worded for the screen.
		var results []event.ResultEvent
		sink := engine.SinkFunc(func(ev engine.Event) {
			if r, ok := ev.Payload.(event.ResultEvent); ok {
				results = append(results, r)
			}
		})
		if err := b.Upgrade(at, c.req, engine.UpgradeRequest{})(context.Background(), sink, nil); exit.Code(err) != exit.BadInput {
			t.Errorf("Upgrade(%+v) = %v, want exit 2", c.req, err)
		}
		if len(results) != 1 || exit.Code(results[0].Err) != exit.BadInput || !strings.Contains(results[0].Message, c.field) || strings.Contains(results[0].Message, "--") {
			t.Errorf("Upgrade(%+v) results %+v, want one exit 2 naming %s and no flag", c.req, results, c.field)
		}
	}

	// Not a number (the flag parser refuses such a --nodes).
	b := &wizardOps{g: &globals{}}
	err := b.CheckUpgrade(at, engine.Infra{Nodes: -1, NodesGiven: true})
	var ie *engine.InputError
	if !errors.As(err, &ie) || ie.Input != engine.InputNodes || !strings.Contains(ie.Render(tui.UpgradeInputName), "not a number") {
		t.Errorf("Nodes not a number: %v", err)
	}
	// A kube cluster has no EKS fields to check.
	if err := b.CheckUpgrade(engine.ClusterRef{Provider: "kube", Name: "dev1", Location: "kind-dev1"}, engine.Infra{Nodes: 101, NodesGiven: true}); err != nil {
		t.Errorf("kube cluster: %v", err)
	}
}

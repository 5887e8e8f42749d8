package cli

import (
	"context"
	"fmt"

	"github.com/kilnctl/kiln/engine"
	awsprovider "github.com/kilnctl/kiln/engine/provider/aws"
	"github.com/kilnctl/kiln/tui"
)

// Upgrade runs kiln upgrade for the wizard at the cluster's known
// location: the engine plans, asks through the wizard's plan screen, then
// applies, as the command does on a terminal.
// An aws cluster's EKS fields (infra) set the provider's Change as kiln
// upgrade aws's flags do (setUpgradeChange), so the engine plans the same
// infrastructure changes first and asks the same question.
func (b *wizardOps) Upgrade(t engine.ClusterRef, infra engine.Infra, req engine.UpgradeRequest) tui.Op {
	return func(ctx context.Context, sink engine.Sink, confirm engine.Confirmer) error {
		ctx = b.opContext(ctx)
		e := b.engine(sink, confirm)
		// Messages name the upgrade screen's EKS fields.
		e.Namer = tui.UpgradeInputName
		r, err := b.upgradeTarget(t, infra)
		if err != nil {
			// Refused before the engine runs (a field the checks as typed did
			// not see): the result the engine would give, in the screen's
			// words.
			return e.Refuse(err)
		}
		req.Target, req.Timeout = r, b.g.timeout
		return e.Upgrade(ctx, req)
	}
}

// upgradeTarget is the target of the wizard's upgrade of cluster t: for
// aws, the provider kiln upgrade aws builds, with the upgrade screen's
// EKS fields in place of its flags.
func (b *wizardOps) upgradeTarget(t engine.ClusterRef, infra engine.Infra) (engine.Target, error) {
	r, err := b.target(t.Provider, t.Location, t.Name)
	if err != nil || t.Provider != "aws" {
		return r, err
	}
	p, ok := r.Provider.(*awsprovider.Provider)
	if !ok {
		return r, fmt.Errorf("aws provider: unexpected %T", r.Provider)
	}
	if err := checkUpgradeFields(p, infra); err != nil {
		return engine.Target{}, err
	}
	return r, nil
}

// checkUpgradeFields sets the upgrade screen's EKS fields on p as the
// provider's Change, checked with its rules (no AWS call).
func checkUpgradeFields(p *awsprovider.Provider, infra engine.Infra) error {
	if infra.NodesGiven && infra.Nodes < 0 {
		return awsprovider.NotANodeCount()
	}
	c := awsprovider.Change{Nodes: infra.Nodes, InstanceType: infra.InstanceType, KubernetesVersion: infra.KubernetesVersion}
	return setUpgradeChange(p, c, infra.NodesGiven)
}

// CheckUpgrade checks the upgrade screen's EKS fields as they are
// typed, with the aws provider's own rules, as kiln upgrade aws checks its
// flags (no AWS call).
func (b *wizardOps) CheckUpgrade(t engine.ClusterRef, infra engine.Infra) error {
	if t.Provider != "aws" {
		return nil
	}
	if b.newProvider != nil {
		// Tests: a plain provider at the cluster's region.
		return checkUpgradeFields(&awsprovider.Provider{Region: t.Location}, infra)
	}
	_, err := b.upgradeTarget(t, infra)
	return err
}

// RotateKey runs kiln rotate-key for the wizard at the cluster's known
// location; the engine asks through the wizard's typed confirmation.
func (b *wizardOps) RotateKey(t engine.ClusterRef, req engine.RotateKeyRequest) tui.Op {
	return b.op(t, func(ctx context.Context, e *engine.Engine, r engine.Target) error {
		req.Target, req.Timeout = r, b.g.timeout
		return e.RotateKey(ctx, req)
	})
}

package engine

import (
	"context"

	"github.com/kilnctl/kiln/engine/event"
)

// InfraUpgrader is a provider whose infrastructure kiln upgrade can change
// (aws: the EKS control-plane version, the node group's size, instance
// type and Kubernetes version). What to change is the provider's own
// request (its flags); an upgrade plans it with the platform and applies
// it first, under the cluster lock.
type InfraUpgrader interface {
	// PlanInfrastructure lists, reading only, the infrastructure changes
	// the provider was asked for, in the order they are applied. A change
	// the provider refuses (a version jump its platform does not allow) is
	// an error naming why (failure.Input).
	PlanInfrastructure(ctx context.Context, name, location string) ([]PlanChange, error)
	// UpgradeInfrastructure makes those changes in order, each waited for
	// and shown as resource events on sink. It is idempotent: run again
	// after an interruption, it finishes what is left.
	UpgradeInfrastructure(ctx context.Context, name, location string, r *event.Reporter) error
}

// planInfrastructure adds the provider's infrastructure changes to the
// plan, before every in-cluster change.
func (u *upgrade) planInfrastructure(ctx context.Context, p *upgradePlan) error {
	iu, ok := u.req.Provider.(InfraUpgrader)
	if !ok {
		return nil
	}
	changes, err := iu.PlanInfrastructure(ctx, u.req.Name, u.loc.Name)
	if err != nil {
		return err
	}
	p.infra = changes
	p.changes = append(p.changes, changes...)
	return nil
}

// applyInfrastructure applies the plan's infrastructure changes (the
// infrastructure phase): the provider reads its state again and finishes
// whatever is left.
func (u *upgrade) applyInfrastructure(ctx context.Context, p *upgradePlan) error {
	if len(p.infra) == 0 {
		return skip("no infrastructure changes")
	}
	if err := u.req.Provider.(InfraUpgrader).UpgradeInfrastructure(ctx, u.req.Name, u.loc.Name, u.e.reporter()); err != nil {
		return err
	}
	u.e.checkpoint(ctx, "upgrade-after-infrastructure")
	return nil
}

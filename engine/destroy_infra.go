package engine

import (
	"context"

	"github.com/kilnctl/kiln/engine/failure"
)

// infraOnly reports a location where the provider found infrastructure
// of NAME (by its own means: aws tags) but no platform to remove.
func infraOnly(loc Location, name string) bool {
	switch {
	case loc.Cluster != name:
		return false
	case loc.State == nil:
		return loc.Infra == InfraPartial || loc.Infra == InfraPresent && loc.Err == nil
	default:
		return !loc.State.Installed && !loc.State.NamespaceExists
	}
}

// destroyInfraOnly removes the infrastructure of a cluster that has no
// platform (see infraOnly): there is nothing in a cluster to remove first. Token dirs are left as they are: a pending one
// is replaced by the next create.
func (e *Engine) destroyInfraOnly(ctx context.Context, req DestroyRequest, loc Location, d *destroyRun) error {
	if !req.Yes {
		ok := false
		if e.Confirm != nil {
			var err error
			q := DestroyQuestion{Provider: req.Provider.Name(), Name: req.Name, Location: loc.Name}
			if ok, err = e.Confirm.ConfirmDestroy(ctx, q); err != nil {
				return err
			}
		}
		if !ok {
			return inputErr(failure.Confirm, InputYes, req.Name, "destroying cluster %s (%s %s) removes the infrastructure a create left there; nothing was changed. Pass {input} to confirm", req.Name, locationNoun(req.Provider), loc.Name)
		}
	}
	d.current, d.changing = PhaseInfrastructure, true
	_ = e.phase(ctx, PhasePlatform, func(context.Context) error {
		return skip("no platform: %s %s holds only part of the infrastructure", locationNoun(req.Provider), loc.Name)
	})
	return e.phase(ctx, PhaseInfrastructure, func(ctx context.Context) error {
		skipped, err := req.Provider.DestroyInfrastructure(ctx, req.Name, loc.Name, e.reporter())
		if err == nil && skipped {
			return skip("kiln did not create %s %s; it stays", locationNoun(req.Provider), loc.Name)
		}
		return err
	})
}

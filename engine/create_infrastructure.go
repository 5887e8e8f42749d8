package engine

import "context"

func (r *run) infrastructure(ctx context.Context) error {
	loc, skipped, err := r.req.Provider.EnsureInfrastructure(ctx, r.req.Name, r.loc.Name, r.e.reporter())
	if err != nil {
		return err
	}
	st := r.loc.State
	r.loc.Client, r.loc.REST = loc.Client, loc.REST
	r.loc.State = st
	if skipped {
		return skip("%s %s already exists", locationNoun(r.req.Provider), r.loc.Name)
	}
	return nil
}

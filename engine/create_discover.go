package engine

import "context"

// discover inspects every location, then picks the target.
func (r *run) discover(ctx context.Context) error {
	f, err := r.e.discoverTarget(ctx, r.req.Target, true)
	if err != nil {
		return err
	}
	r.loc, r.candList, r.skipped, r.elsewhere = f.loc, f.cands, f.skipped, f.elsewhere
	return nil
}

func (r *run) cands() []candidate {
	return r.candList
}

package engine

import (
	"context"
	"fmt"
	"slices"

	"github.com/kilnctl/kiln/engine/platform"
)

// readiness confirms every platform object is ready and every tenant token
// verifies against kiln-auth.
func (r *run) readiness(ctx context.Context) error {
	cs := r.loc.Client
	st, err := platform.Read(ctx, cs)
	if err != nil {
		return err
	}
	if !slices.Contains(st.KeyIDs(), r.td.Manifest.KeyID) {
		return fmt.Errorf("kiln-auth does not trust key %s of token dir %s", r.td.Manifest.KeyID, r.td.Path)
	}
	if err := verifyTokens(r.td, st.Keys, st.Table, r.cfg.Spec.Tenants); err != nil {
		return err
	}
	return nil
}

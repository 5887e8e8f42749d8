package engine

import (
	"context"
	"time"

	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/platform"
)

// destroyInterrupted words a destroy that Ctrl-C or SIGTERM stopped: what
// was done and what is left, read back from the cluster (a fresh, bounded
// context), and the command that finishes it. Every step of destroy is
// idempotent and the rerun needs no token dir once the keys are gone, so
// running destroy again always finishes what this run began.
func (e *Engine) destroyInterrupted(ctx context.Context, req DestroyRequest, d *destroyRun) error {
	if !d.located {
		return failure.Unchanged(failure.Interrupted, "interrupted while looking for cluster %s: nothing was changed", req.Name)
	}
	if !d.changing {
		return failure.Unchanged(failure.Interrupted, "interrupted during the %s phase, before anything was removed: nothing was changed", d.current)
	}
	again := command(req.Target, d.loc.Name, "destroy")
	if d.loc.Client == nil {
		// No platform to read back (an infrastructure-only destroy).
		return failure.Interrupt("interrupted during the %s phase: cluster %s is partly removed; run `%s` again to finish it", d.current, req.Name, again)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	st, err := platform.Read(rctx, d.loc.Client)
	switch {
	case err != nil:
		return failure.Interrupt("interrupted during the %s phase: cluster %s may be partly removed (reading it back failed: %v); run `%s` again to finish it", d.current, req.Name, err, again)
	case st.PartlyRemoved():
		return failure.Interrupt("interrupted during the %s phase: cluster %s is partly removed: %s", d.current, req.Name, partlyRemoved(rctx, d.loc.Client, req.Target, d.loc.Name, st))
	case st.NamespaceExists:
		// The mark never landed: nothing was removed.
		return failure.Unchanged(failure.Interrupted, "interrupted during the %s phase, before anything was removed: nothing was changed", d.current)
	}
	left := "its keyring entry and token dir on this machine"
	if d.current == PhaseInfrastructure {
		left = "the infrastructure kiln created for it, if any, then " + left
	}
	return failure.Interrupt("interrupted during the %s phase: the platform of cluster %s is removed (no kiln-system in %s %s); left: %s. Run `%s` again to finish it", d.current, req.Name, locationNoun(req.Provider), d.loc.Name, left, again)
}

package cli

import (
	"context"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/tui"
)

// Upgrade runs kiln upgrade for the wizard at the cluster's known
// location: the engine plans, asks through the wizard's plan screen, then
// applies, as the command does on a terminal.
func (b *wizardBackend) Upgrade(ctx context.Context, t tui.Target, req tui.UpgradeRequest, sink engine.Sink, confirm engine.Confirmer) error {
	ctx = b.opContext(ctx)
	r, err := b.target(t.Provider, t.Location, t.Name)
	if err != nil {
		return err
	}
	return b.engine(sink, confirm).Upgrade(ctx, engine.UpgradeRequest{Target: r, ConfigPath: req.ConfigPath, Timeout: b.g.timeout,
		Restack: req.Restack, DeleteProjects: req.DeleteProjects})
}

// RotateKey runs kiln rotate-key for the wizard at the cluster's known
// location; the engine asks through the wizard's typed confirmation.
func (b *wizardBackend) RotateKey(ctx context.Context, t tui.Target, req tui.RotateRequest, sink engine.Sink, confirm engine.Confirmer) error {
	ctx = b.opContext(ctx)
	r, err := b.target(t.Provider, t.Location, t.Name)
	if err != nil {
		return err
	}
	return b.engine(sink, confirm).RotateKey(ctx, engine.RotateKeyRequest{Target: r, Timeout: b.g.timeout, KeepOld: req.KeepOld, Finish: req.Finish})
}

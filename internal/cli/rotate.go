package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnctl/kiln/engine"
)

func newRotateKeyCmd(g *globals) *cobra.Command {
	var keepOld time.Duration
	var finish bool
	cmd := &cobra.Command{
		Use:   "rotate-key PROVIDER NAME",
		Short: "Rotate the cluster's signing key: new key trusted, tokens re-signed, old key removed",
		Long: `rotate-key replaces the key that signs the tenant tokens, in two phases:

  1. a new key is generated and every tenant token signed with it (staged
     next to the token dir); kiln-auth is made to trust the old and the new
     key and read back; the token dir is swapped to the new key and tokens
     as one unit (the old key kept inside it until the end);
  2. the old key is removed from kiln-auth (read back), and from the token
     dir. With --keep-old DURATION both stay trusted that long (for
     consumers that cache tokens); rotate-key --finish ends it earlier,
     and any kiln upgrade, create --continue or rotate-key after that time
     removes it.

It asks first (headless: --yes, otherwise exit 3). Killed at any instant,
rotate-key run again finishes the rotation under way and never starts a
second one; at every instant the cluster trusts the key of the committed
token dir. Tokens signed with the old key stop verifying once it is gone
(kiln wait with an old copy of the token dir says so).

Exit codes: 0 rotated (or kept open with --keep-old, or nothing to finish);
1 failed (no token dir with a trusted key; another token dir's rotation is
under way); 2 bad input; 3 confirmation required; 4 locked; 130 interrupted.`,
		Example: `  kiln rotate-key kube dev1
  kiln rotate-key kube dev1 --yes --headless -o json
  kiln rotate-key kube dev1 --yes --keep-old 24h
  kiln rotate-key kube dev1 --finish --yes`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.runOp(args, false, func(e *engine.Engine, t engine.Target) error {
				return e.RotateKey(cmd.Context(), engine.RotateKeyRequest{Target: t, Yes: g.yes, Timeout: g.timeout, KeepOld: keepOld, Finish: finish})
			})
		},
	}
	cmd.Flags().DurationVar(&keepOld, "keep-old", 0, "keep the old key trusted this long after the swap (default: remove it at once)")
	cmd.Flags().BoolVar(&finish, "finish", false, "end a rotation kept open with --keep-old now: remove the old key")
	return cmd
}

func (c headlessConfirmer) ConfirmRotate(context.Context, engine.RotateQuestion) (bool, error) {
	return c.yes, nil
}

func (p promptConfirmer) ConfirmRotate(_ context.Context, q engine.RotateQuestion) (bool, error) {
	switch q.Step {
	case engine.RotateStart:
		fmt.Fprintf(p.out, "\nThis rotates the signing key of kiln cluster %s (%s %s), now %s (token dir %s):\n", q.Name, q.Provider, q.Location, q.KeyID, q.TokenDir)
		fmt.Fprintf(p.out, "  a new key is trusted alongside it, every tenant token is signed again with the new key,\n")
		if q.KeepOld > 0 {
			fmt.Fprintf(p.out, "  and the old key stays trusted for %s more; tokens signed with it then stop working.\n", q.KeepOld)
		} else {
			fmt.Fprintf(p.out, "  and the old key is removed: tokens signed with it (copies elsewhere) stop working.\n")
		}
	case engine.RotateResume:
		fmt.Fprintf(p.out, "\nA rotation of %s's key is under way (replacing %s): this finishes it.\n", q.Name, q.OldKeyID)
	case engine.RotateRetire:
		fmt.Fprintf(p.out, "\nThis removes the old key %s of %s from kiln-auth: tokens signed with it stop working.\n", q.OldKeyID, q.Name)
		if q.KeepOld > 0 {
			fmt.Fprintf(p.out, "(It stays trusted for %s more first.)\n", q.KeepOld)
		}
	}
	return p.ask("Rotate?"), nil
}

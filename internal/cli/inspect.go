package cli

import (
	"github.com/spf13/cobra"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/tui"
)

func newInspectCmd(g *globals) *cobra.Command {
	var readOnly bool
	cmd := &cobra.Command{
		Use:   "inspect PROVIDER NAME",
		Short: "Open the wizard's live inspector on one cluster (needs a terminal)",
		Long: `inspect opens the wizard's inspect screen for one cluster directly: its
platform objects, tenants, token dir and projects, kept live from watches
(a change shows within a second; an idle inspector makes no requests beyond
its open watches). / filters the projects, enter opens one, the mouse wheel
scrolls; esc or q on the inspect screen quits.

--read-only offers no action that changes the cluster (no start, suspend or
restack): for support sessions on customer clusters.

inspect needs a terminal on stdin and stdout. Without one (or with
--headless) it exits 2; kiln status PROVIDER NAME [--watch] is the headless
view of the same state.`,
		Example: `  kiln inspect kube dev1
  kiln inspect kube dev1 --context prod-eu --read-only
  kiln inspect aws dev1 --region eu-west-1 --read-only`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := g.provider(args[0])
			if err != nil {
				return err
			}
			if err := config.ValidateName(args[1]); err != nil {
				return failure.BadInput("NAME: %v", err)
			}
			if !g.interactive() {
				return failure.BadInput("kiln inspect needs a terminal on stdin and stdout (and no --headless); for a headless view run `%s`", engine.Command(engine.Target{Provider: p, Name: args[1], TokenDir: g.tokenDir}, p.Target(), []string{"status"}, "--watch"))
			}
			t := engine.ClusterRef{Provider: p.Name(), Name: args[1], Location: p.Target()}
			return g.runWizardWith(cmd.Context(), tui.Options{Inspect: &t, InspectOnly: true, ReadOnly: readOnly})
		},
	}
	cmd.Flags().BoolVar(&readOnly, "read-only", false, "offer no action that changes the cluster (support sessions)")
	return cmd
}

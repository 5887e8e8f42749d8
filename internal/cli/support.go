package cli

import (
	"github.com/spf13/cobra"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/internal/cli/ndjson"
)

func newSupportCmd(g *globals, info BuildInfo) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "support",
		Short: "Collect what a support engineer needs (support bundle)",
	}
	var req engine.SupportBundleRequest
	bundle := &cobra.Command{
		Use:   "bundle PROVIDER NAME",
		Short: "Write one .tar.gz with the cluster's versions, config, objects, events, pod statuses, logs and Leases",
		Long: `Writes one .tar.gz to attach to a support ticket: kiln's and the API server's
versions, this run's discovery, kiln-config, the ids of the trusted keys,
every platform and project object (spec and status), the Kubernetes Events
of their namespaces, pod statuses, the last 500 lines (at most 256 KiB) of
every container's log (and of its previous instance after a restart), the
Leases (holders and times) and index.txt saying what is where.

It never contains a token, a private key or a Secret's data: Secrets appear
as name, type and key names only, kiln-auth as its key ids. It only reads,
so it works from the read-only support role; what that role may not read is
listed in problems.txt in the bundle, not an error. The file is mode 0600.`,
		Example: "  kiln support bundle kube dev1\n  kiln support bundle kube dev1 --project default/blog --file blog.tar.gz\n  kiln support bundle aws prod --region eu-west-1 -o json",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := g.provider(args[0])
			if err != nil {
				return err
			}
			e, err := g.newEngine(false, false)
			if err != nil {
				return err
			}
			req.Target, req.KilnVersion, req.Encode = g.target(p, args[1]), info.Version, ndjson.Marshal
			_, err = e.SupportBundle(cmd.Context(), req)
			return done(err)
		},
	}
	bundle.Flags().StringVar(&req.Project, "project", "", "TENANT/PROJECT: only this project of the tenants (the platform is always included)")
	bundle.Flags().StringVar(&req.File, "file", "", "where to write the bundle (default kiln-support-NAME-<UTC time>.tar.gz in the current directory)")
	cmd.AddCommand(bundle)
	return cmd
}

package cli

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/failure"
)

func newListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list [PROVIDER]",
		Short: "List every kiln cluster kiln can see: every kubeconfig context and every AWS region",
		Long: `list searches, in parallel, every kubeconfig context (kube) and every
region (aws: EKS clusters tagged kiln.dev/cluster), each within
--discovery-timeout, and shows each kiln cluster with its location,
platform state, the kiln version that installed it, its project count and
the local token dir holding a key it trusts. Locations that cannot be
inspected are listed with the reason; they never fail the command.

Without PROVIDER, kube is searched, and aws too when AWS is set up on this
machine (--profile/--region/--regions, AWS_PROFILE, AWS_ACCESS_KEY_ID or
another credentials variable, or ~/.aws/config); an AWS that cannot be
searched is then one row saying why. Naming a PROVIDER makes its failure
the command's. -o json prints one cluster event per row, then a result.`,
		Example: `  kiln list
  kiln list kube --contexts kind-dev1,kind-dev2
  kiln list aws --regions eu-west-1,us-east-1 -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := engine.ListRequest{TokenDir: g.tokenDir}
			if len(args) == 1 {
				p, err := g.provider(args[0])
				if err != nil {
					return err
				}
				req.Providers = []engine.Provider{p}
			} else {
				if len(g.contexts) > 0 {
					return failure.BadInput("--contexts: name PROVIDER kube with it (kiln list kube --contexts ...)")
				}
				if g.context != "" {
					return failure.BadInput("--context: kiln list searches every context; narrow it with kiln list kube --contexts")
				}
				req.Providers = []engine.Provider{g.kubeProvider("")}
				if awsConfigured(g, os.Getenv) {
					ap, err := g.awsProvider()
					if err != nil {
						return err
					}
					req.Optional = []engine.Provider{ap}
				}
			}
			e, err := g.newEngine(true, false)
			if err != nil {
				return err
			}
			rows, err := e.List(cmd.Context(), req)
			if err != nil {
				return done(err)
			}
			if g.output == "text" {
				printClusters(g.stdout, rows)
			}
			return nil
		},
	}
}

// printClusters prints kiln list's table, then the locations that could
// not be inspected with their causes.
func printClusters(w io.Writer, rows []engine.ClusterSummary) {
	var found, failed []engine.ClusterSummary
	for _, r := range rows {
		if r.Name != "" {
			found = append(found, r)
		}
		if r.Err != "" {
			failed = append(failed, r)
		}
	}
	if len(found) == 0 {
		fmt.Fprintln(w, "no kiln clusters found")
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PROVIDER\tNAME\tLOCATION\tPLATFORM\tVERSION\tPROJECTS\tTOKEN DIR")
		for _, r := range found {
			projects := "-"
			if r.Platform == engine.PlatformInstalled && r.Projects >= 0 {
				projects = strconv.Itoa(r.Projects)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Provider, r.Name, r.Location, r.Platform, or(r.Version, "-"), projects, or(r.TokenDir, "none trusted"))
		}
		_ = tw.Flush()
	}
	if len(failed) > 0 {
		fmt.Fprintf(w, "\nnot inspected (%d):\n", len(failed))
		for _, r := range failed {
			fmt.Fprintf(w, "  %s %s: %s\n", r.Provider, r.Location, r.Err)
		}
	}
}

func or(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

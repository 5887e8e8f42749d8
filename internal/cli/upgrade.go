package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/event"
)

func newUpgradeCmd(g *globals) *cobra.Command {
	var dryRun, deleteProjects, restack bool
	var rotateTokens []string
	cmd := &cobra.Command{
		Use:   "upgrade PROVIDER NAME",
		Short: "Change an installed platform to a config, showing the plan first",
		Long: `upgrade brings an installed platform to the config given with -c (without
-c: the installed config, re-applied with this kiln's manifests, which is
how a platform picks up a new kiln version's gateway image, say).

It first computes a plan with server-side dry-runs and prints it: every
object to create, update (with the fields that change) or delete, tenants
added or removed (namespace and token), and the projects affected (a
domain change re-applies every running project's Ingress; projects on a
changed stack are listed). Then it asks: on a terminal it prompts,
headless it needs --yes (otherwise exit 3, nothing changed). --dry-run
prints the plan and writes nothing at all, not even the lock.

It applies under the cluster lock in dependency order, each step
verified: new tenants' tokens are signed with the key the cluster already
trusts and written into the token dir as one unit, then their namespaces;
removed tenants' namespaces are deleted and watched gone, then their
tokens (a tenant with projects only with --delete-projects, otherwise
exit 2 naming them); the gateway is rolled out and watched; project
Ingresses follow a new domain; projects on a changed stack are restacked
only with --restack. kiln-config is written last, so an interrupted
upgrade shows as one and the same command run again finishes it.

Tenant tokens are revocable one by one (docs/security.md): kiln-auth's
tenant table (tenants.json) lists the current token id of each tenant and
the platform id every token carries. New token ids are published first,
then the token dir is swapped as one unit, then the table keeps only its
tokens: a removed tenant's token is refused (401) once upgrade reports
success, and a tenant of that name added later gets a new token id. The
gateway rolls out with the new table. --rotate-token TENANT (repeatable)
issues that tenant's token again with a new token id, without rotating
the cluster key: the old token is refused from then on. A platform of an
earlier kiln (no table) is migrated: every token is issued again.

For aws, --nodes, --instance-type and --kubernetes-version change the
infrastructure first (unset: kept as it runs): the EKS control plane's
version, one minor version at a time (a jump or a downgrade is exit 2,
naming the next allowed step), then the node group's version, its
instance type (a replacement node group is created and ACTIVE before the
old one is deleted: EKS cannot change it in place) and its size, each
waited for; the plan lists them before the platform's changes.

For aws, --admin ARN and --viewer ARN (repeatable) set kiln's EKS access
entries of that kind to exactly the ARNs named (--admin none: no kiln
admin entry); left out, kiln's entries stay as they are. Entries kiln did
not create (tags kiln.dev/cluster, app.kubernetes.io/managed-by=kiln,
kiln.dev/access) are never touched. A cluster still in authentication
mode CONFIG_MAP is first moved to API_AND_CONFIG_MAP.

Exit codes: 0 applied, no changes, or dry run; 2 bad input (a removed
tenant has projects, a newer kiln wrote the platform, a bad config, a
Kubernetes version EKS cannot go to);
3 confirmation required; 4 locked; 5 timed out; 130 interrupted.`,
		Example: `  kiln upgrade kube dev1 -c kiln.yaml --dry-run
  kiln upgrade kube dev1 -c kiln.yaml                 # shows the plan, asks
  kiln upgrade kube dev1 -c kiln.yaml --yes -o json   # headless
  kiln upgrade kube dev1 -c kiln.yaml --yes --delete-projects --restack
  kiln upgrade kube dev1 --yes                        # re-apply with this kiln's manifests
  kiln upgrade kube dev1 --rotate-token staging --yes # new token for tenant staging
  kiln upgrade aws dev1 --nodes 3 --dry-run           # the node group 2 → 3 nodes, planned
  kiln upgrade aws dev1 --kubernetes-version 1.31 --yes
  kiln upgrade aws dev1 --instance-type m6i.large -c kiln.yaml --yes
  kiln upgrade aws dev1 --admin arn:aws:iam::123456789012:role/ci --viewer none --yes`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			g.aws.upgrading = true
			return g.runOp(args, false, func(e *engine.Engine, t engine.Target) error {
				return e.Upgrade(cmd.Context(), engine.UpgradeRequest{Target: t, ConfigPath: g.config, Yes: g.yes, Timeout: g.timeout,
					DryRun: dryRun, DeleteProjects: deleteProjects, Restack: restack, RotateTokens: rotateTokens})
			})
		},
	}
	g.aws.registerUpgrade(cmd.Flags())
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan and change nothing (not even the lock)")
	cmd.Flags().BoolVar(&deleteProjects, "delete-projects", false, "let a removed tenant go with the projects it still has")
	cmd.Flags().StringSliceVar(&rotateTokens, "rotate-token", nil, "issue TENANT's token again with a new token id; the old one is refused (repeatable; the cluster key stays)")
	cmd.Flags().BoolVar(&restack, "restack", false, "restack running projects whose stack changed (otherwise they are listed)")
	return cmd
}

// formatPlan renders one planned change: + create, ~ update (with its
// fields), - delete.
func formatPlan(e event.PlanEvent) string {
	mark := map[string]string{"create": "+", "update": "~", "delete": "-"}[e.Action]
	ref := strings.ToLower(e.Kind) + " " + e.Name
	if e.Namespace != "" {
		ref = strings.ToLower(e.Kind) + " " + e.Namespace + "/" + e.Name
	}
	line := fmt.Sprintf("  %s %s %s", mark, e.Action, ref)
	if len(e.Fields) > 0 {
		line += ": " + strings.Join(e.Fields, ", ")
	}
	return line + " " + dash(e.Message)
}

func (c headlessConfirmer) ConfirmUpgrade(context.Context, engine.UpgradeQuestion) (bool, error) {
	return c.yes, nil
}

func (p promptConfirmer) ConfirmUpgrade(_ context.Context, q engine.UpgradeQuestion) (bool, error) {
	fmt.Fprintf(p.out, "\nThe plan above changes kiln platform %s in %s %s (%d change(s)).\n", q.Name, q.Provider, q.Location, len(q.Changes))
	return p.ask("Apply it?"), nil
}

package cli

import (
	"github.com/spf13/cobra"

	"github.com/kilnctl/kiln/engine"
)

func newCreateCmd(g *globals) *cobra.Command {
	var cont bool
	cmd := &cobra.Command{
		Use:   "create PROVIDER NAME",
		Short: "Create a kiln cluster, or continue an installed one with --continue",
		Long: `create discovers existing clusters first (every kubeconfig context), then
decides: fresh (generate keys, install the platform), resume (an earlier
create stopped part-way), or continue (the platform is installed).

When the platform is already installed, create changes nothing and exits 3
unless --continue is given; continuing reuses the key the cluster already
trusts and never regenerates it. --continue on a cluster without the
platform is a plain create, so automation can always pass it.

On aws, the EKS cluster's authentication mode is API_AND_CONFIG_MAP with
the creating identity as bootstrap admin. --admin ARN (cluster admin:
AmazonEKSClusterAdminPolicy, scope cluster) and --viewer ARN (Kubernetes
group kiln:support, bound to the read-only ClusterRole kiln-support of
docs/rbac-support.yaml, never an access policy) are repeatable IAM role or
user ARNs that become access entries kiln tags as its own; given on a
rerun or with --continue, kiln's entries of that kind become exactly those
named (none: no kiln entry of that kind); left out, they stay. A bad ARN
is exit 2 naming the flag and the value.`,
		Example: `  kiln create kube dev1 --context kind-dev1
  kiln create kube dev1 --context kind-dev1 -c kiln.yaml --headless -o json
  kiln create kube dev1 --continue
  kiln create aws dev1 --region eu-west-1 --admin arn:aws:iam::123456789012:role/ci --viewer arn:aws:iam::123456789012:role/support`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.runOp(args, cont, func(e *engine.Engine, t engine.Target) error {
				return e.Create(cmd.Context(), engine.CreateRequest{Target: t, ConfigPath: g.config, Continue: cont, Timeout: g.timeout})
			})
		},
	}
	cmd.Flags().BoolVar(&cont, "continue", false, "continue an installed platform with the key material it already trusts")
	g.aws.registerCreate(cmd.Flags())
	return cmd
}

func newWaitCmd(g *globals) *cobra.Command {
	var probe bool
	cmd := &cobra.Command{
		Use:   "wait PROVIDER NAME",
		Short: "Wait until the platform is ready and every tenant token verifies",
		Long: `wait needs no config file: it finds the cluster, reads its tenants from
kiln-config, streams the readiness of every platform object and verifies
every token in the token dir against kiln-auth. Exit 0 when all is ready,
5 when --timeout passes, 1 naming a tenant whose token does not verify.

It then reports the front door (spec.gateway.expose): its address and the
DNS record to create. With expose loadBalancer it first waits for the
load-balancer address on Service kiln-system/kiln-gateway, which only a
load-balancer controller in the cluster publishes: without one it never
comes, and --timeout ends the wait with exit 5 naming it.

--probe adds a data-plane check on top of that (never instead of it): one
request per tenant with the tenant's token through the gateway, over a
port-forward to a ready gateway pod, reported per tenant as accepted or
why not (exit 1 if any was not). It is skipped, saying so, when the
gateway pod runs on a kwok fake node, where no container runs.`,
		Example: `  kiln wait kube dev1 --timeout 2m
  kiln wait kube dev1 -o json
  kiln wait kube dev1 --probe`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.runOp(args, false, func(e *engine.Engine, t engine.Target) error {
				return e.Wait(cmd.Context(), engine.WaitRequest{Target: t, Timeout: g.timeout, Probe: probe})
			})
		},
	}
	cmd.Flags().BoolVar(&probe, "probe", false, "also send one authenticated request per tenant through the gateway (port-forward) and report whether it was accepted")
	return cmd
}

func newDestroyCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "destroy PROVIDER NAME",
		Short: "Remove the platform (verified), then the infrastructure, and set the token dir aside",
		Long: `destroy asks for confirmation (headless: --yes, otherwise exit 3), removes
the platform objects in reverse order and verifies each is gone, removes
the keyring entry and moves the token dir aside (it is never deleted).`,
		Example: `  kiln destroy kube dev1
  kiln destroy kube dev1 --yes --headless`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.runOp(args, false, func(e *engine.Engine, t engine.Target) error {
				return e.Destroy(cmd.Context(), engine.DestroyRequest{Target: t, Yes: g.yes, Timeout: g.timeout})
			})
		},
	}
}

package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/internal/human"
)

func newProjectCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "project",
		Short: "Create, start, suspend, restack, delete, inspect and list projects",
		Long: `A project is a tenant's application instance running a stack (an image with
resources, named in the cluster config). Its objects live in the tenant's
namespace kiln-tenant-TENANT: ConfigMap kiln-project-P (desired spec and
state), Secret P-auth (the project token), Deployment, Service and Ingress P.

Provisioning is ordered and verified: Secret → Deployment (ready) → Service
(ready endpoints) → Ingress (backends ready); suspend removes Ingress →
Service → Deployment, each confirmed gone. One operation at a time per
project (Lease kiln-project-P; exit 4 names the holder).`,
	}
	single := func(op, short, example string, stack bool) *cobra.Command {
		var stackName string
		c := &cobra.Command{
			Use:     op + " PROVIDER NAME TENANT/PROJECT",
			Short:   short,
			Example: example,
			Args:    cobra.ExactArgs(3),
			RunE: func(cmd *cobra.Command, args []string) error {
				return g.runProject(cmd, engine.ProjectRequest{Op: op, Ref: args[2], Stack: stackName}, args)
			},
		}
		if stack {
			c.Flags().StringVar(&stackName, "stack", "", "stack to run (a name from the cluster config's spec.stacks; default: the first)")
		}
		return c
	}
	bulk := func(op, short, example string) *cobra.Command {
		var all bool
		var tenant string
		var concurrency int
		c := &cobra.Command{
			Use:     op + " PROVIDER NAME (TENANT/PROJECT | --all)",
			Short:   short,
			Example: example,
			Args:    cobra.RangeArgs(2, 3),
			RunE: func(cmd *cobra.Command, args []string) error {
				req := engine.ProjectRequest{Op: op, All: all, Tenant: tenant, Concurrency: concurrency}
				switch {
				case all && len(args) == 3:
					return failure.BadInput("--all: give either TENANT/PROJECT or --all, not both")
				case !all && len(args) == 2:
					return failure.BadInput("TENANT/PROJECT: missing (or pass --all); usage: %s", cmd.UseLine())
				case !all && tenant != "":
					return failure.BadInput("--tenant: only with --all")
				case len(args) == 3:
					req.Ref = args[2]
				}
				if concurrency < 1 {
					return failure.BadInput("--concurrency: must be at least 1, got %d", concurrency)
				}
				return g.runProject(cmd, req, args)
			},
		}
		c.Flags().BoolVar(&all, "all", false, "every project of the cluster (or of --tenant)")
		c.Flags().StringVar(&tenant, "tenant", "", "with --all: only this tenant's projects")
		c.Flags().IntVar(&concurrency, "concurrency", 4, "with --all: how many projects at once")
		return c
	}
	var listTenant string
	list := &cobra.Command{
		Use:     "list PROVIDER NAME",
		Short:   "List projects with their observed state, from live objects",
		Example: "  kiln project list kube dev1\n  kiln project list kube dev1 --tenant staging -o json",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			readHeavy()
			return g.runProject(cmd, engine.ProjectRequest{Op: engine.ProjectList, Tenant: listTenant}, args)
		},
	}
	list.Flags().StringVar(&listTenant, "tenant", "", "only this tenant's projects")
	cmd.AddCommand(
		single(engine.ProjectCreate, "Create a project and start it (Secret → Deployment → Service → Ingress, each verified)",
			"  kiln project create kube dev1 default/blog\n  kiln project create kube dev1 staging/api --stack api -o json", true),
		bulk(engine.ProjectStart, "Start a suspended project (or --all), each object verified before the next",
			"  kiln project start kube dev1 default/blog\n  kiln project start kube dev1 --all --tenant staging --concurrency 8"),
		bulk(engine.ProjectSuspend, "Suspend a project (or --all): Ingress, Service, Deployment removed, each verified gone",
			"  kiln project suspend kube dev1 default/blog\n  kiln project suspend kube dev1 --all"),
		single(engine.ProjectRestack, "Suspend a project and start it with another stack, under one lease",
			"  kiln project restack kube dev1 default/blog --stack web", true),
		single(engine.ProjectDelete, "Delete a project and everything it owns, each object verified gone",
			"  kiln project delete kube dev1 default/blog", false),
		single(engine.ProjectInspect, "Show a project's observed state, computed from its live objects",
			"  kiln project inspect kube dev1 default/blog\n  kiln project inspect kube dev1 default/blog -o json", false),
		single(engine.ProjectRotateToken, "Rotate the project token in two phases; a failed rollout keeps the old token",
			"  kiln project rotate-token kube dev1 default/blog --timeout 2m", false),
		list,
		newProjectLogsCmd(g),
	)
	return cmd
}

func (g *globals) runProject(cmd *cobra.Command, req engine.ProjectRequest, args []string) error {
	p, err := g.provider(args[0])
	if err != nil {
		return err
	}
	report := req.Op == engine.ProjectInspect || req.Op == engine.ProjectList
	e, err := g.newEngine(report, false)
	if err != nil {
		return err
	}
	req.Target, req.Timeout = g.target(p, args[1]), g.timeout
	out, err := e.Project(cmd.Context(), req)
	if err != nil {
		return done(err)
	}
	if report && g.output == "text" {
		if req.Op == engine.ProjectInspect && len(out) == 1 {
			printProject(g.stdout, &out[0])
		} else {
			printProjects(g.stdout, out)
		}
	}
	return nil
}

func printProject(w io.Writer, st *engine.ProjectStatus) {
	fmt.Fprintf(w, "Project   %s/%s (namespace %s)\n", st.Tenant, st.Project, st.Namespace)
	fmt.Fprintf(w, "State     %s (desired %s)\n", st.State, st.Desired)
	if len(st.Reasons) > 0 {
		fmt.Fprintf(w, "Reasons   %s\n", strings.Join(st.Reasons, "; "))
	}
	fmt.Fprintf(w, "Stack     %s\n", st.Stack)
	fmt.Fprintf(w, "Host      %s\n", st.Host)
	if st.TokenSyncReason != "" {
		fmt.Fprintf(w, "Token     %s (%s)\n", st.TokenSync, st.TokenSyncReason)
	} else {
		fmt.Fprintf(w, "Token     %s\n", st.TokenSync)
	}
	if st.Operation != "" {
		fmt.Fprintf(w, "Running   %s\n", st.Operation)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tSTATUS\tMESSAGE")
	for _, o := range st.Objects {
		name := o.Name
		if o.Namespace != st.Namespace {
			name = o.Namespace + "/" + o.Name // the route, in kiln-system
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", o.Kind, name, o.Status, o.Message)
	}
	_ = tw.Flush()
	printPods(w, st.Pods)
	printEvents(w, st.Events)
}

func printPods(w io.Writer, pods []engine.PodInfo) {
	fmt.Fprintln(w)
	if len(pods) == 0 {
		fmt.Fprintln(w, "Pods      none")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tPHASE\tREADY\tRESTARTS\tWAITING\tLAST TERMINATION")
	for _, p := range pods {
		last := "-"
		if p.LastTermination != "" {
			last = fmt.Sprintf("%s (exit %d)", p.LastTermination, p.LastExitCode)
		}
		waiting := p.Waiting
		if waiting == "" {
			waiting = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%t\t%d\t%s\t%s\n", p.Name, p.Phase, p.Ready, p.Restarts, waiting, last)
	}
	_ = tw.Flush()
}

func printEvents(w io.Writer, events []engine.EventInfo) {
	fmt.Fprintln(w)
	if len(events) == 0 {
		fmt.Fprintln(w, "Events    none")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGE\tTYPE\tREASON\tOBJECT\tCOUNT\tMESSAGE")
	for _, ev := range events {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", human.Age(time.Duration(ev.AgeS)*time.Second), ev.Type, ev.Reason, ev.Object, ev.Count, ev.Message)
	}
	_ = tw.Flush()
}

func printProjects(w io.Writer, list []engine.ProjectStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tPROJECT\tSTACK\tDESIRED\tSTATE\tREASONS")
	for _, st := range list {
		reasons := strings.Join(st.Reasons, "; ")
		if reasons == "" {
			reasons = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", st.Tenant, st.Project, st.Stack, st.Desired, st.State, reasons)
	}
	_ = tw.Flush()
}

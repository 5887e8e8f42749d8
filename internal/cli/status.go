package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kilnctl/kiln/engine"
)

func newStatusCmd(g *globals) *cobra.Command {
	var watch, repair bool
	cmd := &cobra.Command{
		Use:   "status PROVIDER NAME",
		Short: "Show the health of a cluster's platform, tenants and token dir, from live objects",
		Long: `status reads every platform object from the API server and reports its
status (kstatus, plus ready endpoints for Services), the tenants, the token
dir and whether the cluster trusts its key, the front door (how the gateway
is reached from outside, its address and the DNS record to create) and
whether the cluster's network plugin enforces kiln's NetworkPolicies
(enforced, not enforced or unknown, with the evidence). Nothing is cached:
every run derives state from the live objects. --watch keeps streaming
changes.`,
		Example: `  kiln status kube dev1
  kiln status kube dev1 -o json
  kiln status kube dev1 --watch`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			readHeavy()
			p, err := g.provider(args[0])
			if err != nil {
				return err
			}
			// Text mode prints a table; the event lines would repeat it, so
			// only warnings go to stderr until --watch streams changes.
			e, err := g.newEngine(true, false)
			if err != nil {
				return err
			}
			req := engine.StatusRequest{Target: g.target(p, args[1]), Watch: watch, Repair: repair, Timeout: g.timeout}
			if watch {
				// One operation: the snapshot, then changes as they happen,
				// until Ctrl-C (which ends --watch successfully).
				// The engine's snapshot event prints the table; the text
				// sink then streams every change (the engine's Sink is
				// never swapped).
				if ts, ok := frontend(e.Sink).(*textPrinter); ok {
					ts.snapshot = func(st *engine.ClusterStatus) {
						printStatus(g.stdout, st)
						fmt.Fprintln(g.stderr, "watching for changes (Ctrl-C to stop) ...")
					}
				}
				_, err := e.Status(cmd.Context(), req)
				return done(err)
			}
			st, err := e.Status(cmd.Context(), req)
			if err != nil {
				return done(err)
			}
			if g.output == "text" {
				printStatus(g.stdout, st)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "keep streaming status changes until interrupted")
	cmd.Flags().BoolVar(&repair, "repair", false, "first heal what is missing of projects whose desired state is running (never recreates healthy objects, never rotates tokens)")
	return cmd
}

func printStatus(w io.Writer, st *engine.ClusterStatus) {
	state := "ready"
	if st.PartlyRemoved != "" {
		state = "partly removed: " + st.PartlyRemoved
	} else if !st.Installed {
		state = "not installed (partial create: run `" + st.Command("create") + "` again)"
	} else if !st.Ready {
		state = "not ready"
	}
	fmt.Fprintf(w, "Cluster   %s (%s, %s %s)\n", st.Name, st.Provider, st.Nouns.Location, st.Location)
	fmt.Fprintf(w, "Platform  %s\n", state)
	fmt.Fprintf(w, "Versions  %s\n", st.Versions())
	fmt.Fprintf(w, "Tenants   %s\n", strings.Join(st.Tenants, ", "))
	fmt.Fprintf(w, "Keys      %s\n", strings.Join(st.KeyIDs, ", "))
	switch {
	case st.TokenDir == "":
		fmt.Fprintf(w, "Tokens    none: %s\n", st.TokenProblem)
	case st.TokenProblem != "":
		fmt.Fprintf(w, "Tokens    %s (key %s): %s\n", st.TokenDir, st.KeyID, st.TokenProblem)
	default:
		fmt.Fprintf(w, "Tokens    %s (key %s, trusted, every tenant token verifies)\n", st.TokenDir, st.KeyID)
	}
	if fd := st.FrontDoor; fd != nil {
		fmt.Fprintf(w, "Entry     %s\n", strings.ReplaceAll(frontDoorText(*fd), "\n", "\n          "))
	}
	if iso := st.Isolation; iso != nil {
		fmt.Fprintf(w, "Isolation network isolation: %s\n", iso.String())
	}
	if a := st.Access; a != nil {
		printAccess(w, a)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAMESPACE\tNAME\tSTATUS\tMESSAGE")
	for _, o := range st.Objects {
		ns := o.Namespace
		if ns == "" {
			ns = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", o.Kind, ns, o.Name, o.Status, o.Message)
	}
	_ = tw.Flush()
	if len(st.Projects) > 0 {
		fmt.Fprintln(w)
		printProjects(w, st.Projects)
	}
}

// printAccess lists the cluster's access entries: principal, kind, and
// whether kiln made it (only those kiln changes or removes).
func printAccess(w io.Writer, a *engine.Access) {
	head := "authentication mode " + a.Mode
	if a.Problem != "" {
		head += ": " + a.Problem
	} else {
		head += fmt.Sprintf(", %d access entr%s", len(a.Entries), map[bool]string{true: "y", false: "ies"}[len(a.Entries) == 1])
	}
	fmt.Fprintf(w, "Access    %s\n", head)
	for _, en := range a.Entries {
		by := "made by kiln"
		if !en.Kiln {
			by = "not kiln's, left alone"
		}
		detail := ""
		if len(en.Groups) > 0 {
			detail = ", groups " + strings.Join(en.Groups, ",")
		}
		fmt.Fprintf(w, "          %-6s %s (%s%s)\n", en.Kind, en.Principal, by, detail)
	}
}

// frontDoorText words the front door in lines: mode and address, the DNS
// record to create, where TLS terminates.
func frontDoorText(fd engine.FrontDoor) string {
	mode := fd.Mode
	if mode == "" {
		mode = "unset"
	}
	var b strings.Builder
	switch {
	case fd.Address != "":
		fmt.Fprintf(&b, "front door %s at %s (%s)", mode, fd.Address, fd.Message)
	default:
		fmt.Fprintf(&b, "front door %s: %s", mode, fd.Message)
	}
	if fd.DNS != "" {
		fmt.Fprintf(&b, "\nDNS record to create: %s", fd.DNS)
	}
	fmt.Fprintf(&b, "\nTLS: %s", fd.TLS)
	return b.String()
}

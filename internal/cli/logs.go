package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/failure"
)

func newProjectLogsCmd(g *globals) *cobra.Command {
	var req engine.ProjectLogsRequest
	c := &cobra.Command{
		Use:   "logs PROVIDER NAME TENANT/PROJECT",
		Short: "Print (or follow) the logs of every pod of a project, each line prefixed with its pod",
		Long: `Prints the logs of every container of every pod of the project, one pod
after the other, each line prefixed with [POD]. With -f it follows every pod at once and picks
up pods that start later (a rollout, a restart) until Ctrl-C, which ends it
with exit 0.

With -o json each line is a JSON object on stdout:
{"time":...,"type":"pod_log","pod":"...","container":"...","line":"..."},
followed by the result event.`,
		Example: "  kiln project logs kube dev1 default/blog\n  kiln project logs kube dev1 default/blog -f --tail 20\n  kiln project logs kube dev1 default/blog --previous",
		Args:    cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if req.Tail < -1 {
				return failure.BadInput("--tail: must be -1 (all) or more, got %d", req.Tail)
			}
			p, err := g.provider(args[0])
			if err != nil {
				return err
			}
			e, err := g.newEngine(true, false)
			if err != nil {
				return err
			}
			req.Target, req.Ref = g.target(p, args[1]), args[2]
			enc := json.NewEncoder(g.stdout)
			return done(e.ProjectLogs(cmd.Context(), req, func(l engine.PodLogLine) {
				if g.output == "json" {
					_ = enc.Encode(struct {
						Time      string `json:"time"`
						Type      string `json:"type"`
						Pod       string `json:"pod"`
						Container string `json:"container"`
						Line      string `json:"line"`
					}{time.Now().UTC().Format(time.RFC3339Nano), "pod_log", l.Pod, l.Container, l.Line})
					return
				}
				fmt.Fprintf(g.stdout, "[%s] %s\n", l.Pod, l.Line)
			}))
		},
	}
	c.Flags().BoolVarP(&req.Follow, "follow", "f", false, "follow: stream new lines and new pods until Ctrl-C (exit 0)")
	c.Flags().Int64Var(&req.Tail, "tail", -1, "lines of each container to start with (-1: all)")
	c.Flags().BoolVar(&req.Previous, "previous", false, "the previous (terminated) instance of each container: why it restarted")
	return c
}

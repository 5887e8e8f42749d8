package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/project"
	"github.com/kilnctl/kiln/internal/human"
)

// PodLogLine is one line of a project's pod log (see Engine.ProjectLogs).
type PodLogLine = project.LogLine

// ProjectLogsRequest reads the pod logs of project Ref on cluster Name.
type ProjectLogsRequest struct {
	Target
	// Ref is TENANT/PROJECT.
	Ref string
	// Follow streams new lines and pods that start later until ctx ends;
	// ending it is a success.
	Follow bool
	// Tail is how many lines of each container to start with; <0: all.
	Tail int64
	// Previous reads each container's previous (terminated) instance.
	Previous bool
}

// ProjectLogs calls out with every log line of every pod of the project
// (one pod after the other; with Follow, as lines come, from one goroutine
// at a time) and emits the result. Log lines are not events: the frontend
// prints them as it likes (the wizard's project screen keeps the last
// lines, the CLI prefixes each with its pod).
func (e *Engine) ProjectLogs(ctx context.Context, req ProjectLogsRequest, out func(PodLogLine)) error {
	ctx = e.traced(ctx)
	req.Target = e.hinted(req.Target)
	n := 0
	err := e.projectLogs(ctx, req, func(l PodLogLine) { n++; out(l) })
	msg := fmt.Sprintf("%d log line%s of project %s", n, human.Plural(n), req.Ref)
	if err == nil && req.Follow && ctx.Err() != nil {
		msg = "stopped following: " + msg
	}
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		err = failure.Interrupt("interrupted reading logs of project %s", req.Ref)
	}
	return e.finish(err, msg, "")
}

func (e *Engine) projectLogs(ctx context.Context, req ProjectLogsRequest, out func(PodLogLine)) error {
	if err := config.ValidateName(req.Name); err != nil {
		return err
	}
	if _, _, err := config.ValidateProjectRef(req.Ref); err != nil {
		return err
	}
	ops, err := e.projectOps(ctx, req.Target, 0)
	if err != nil {
		return err
	}
	r, err := ops.Parse(req.Ref)
	if err != nil {
		return err
	}
	return ops.Logs(ctx, r, project.LogOptions{Follow: req.Follow, Tail: req.Tail, Previous: req.Previous}, out)
}

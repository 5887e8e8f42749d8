package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/project"
	"github.com/kilnctl/kiln/engine/readiness"
	"github.com/kilnctl/kiln/internal/human"
)

// ProjectStatus is a project's observed state (see engine/project).
type ProjectStatus = project.Status

// Project operations.
const (
	ProjectCreate      = "create"
	ProjectStart       = "start"
	ProjectSuspend     = "suspend"
	ProjectRestack     = "restack"
	ProjectDelete      = "delete"
	ProjectInspect     = "inspect"
	ProjectRotateToken = "rotate-token"
	ProjectList        = "list"
)

// ProjectRequest is a project operation on cluster Request.Name.
type ProjectRequest struct {
	Target
	// Timeout bounds each operation's waits for readiness.
	Timeout time.Duration
	Op      string
	// Ref is TENANT/PROJECT (empty for list and --all).
	Ref string
	// Stack is --stack (create, restack).
	Stack string
	// Tenant narrows list and --all.
	Tenant string
	// All runs start or suspend on every project (of Tenant, if set).
	All         bool
	Concurrency int
}

// reporter is project.Reporter: the operation's event.Reporter (Resource,
// Logf) with the engine's phases and watcher.
type reporter struct {
	*event.Reporter
	e    *Engine
	w    *readiness.Watcher
	rest *rest.Config
}

func (r *reporter) Phase(ctx context.Context, name event.Phase, run func(context.Context) error) error {
	return r.e.phase(ctx, name, run)
}
func (r *reporter) Watcher() *readiness.Watcher { return r.w }

// projectOps locates the cluster and returns the project operations on it.
func (e *Engine) projectOps(ctx context.Context, req Target, timeout time.Duration) (*project.Ops, error) {
	ops, _, err := e.projectOpsAt(ctx, req, timeout)
	return ops, err
}

// projectOpsAt is projectOps with where it found the cluster, and the
// token dirs it may use (for the reachability probe after a start).
func (e *Engine) projectOpsAt(ctx context.Context, req Target, timeout time.Duration) (*project.Ops, located, error) {
	loc, cands, err := e.locate(ctx, req, false)
	if err != nil {
		return nil, located{}, err
	}
	if !loc.State.Installed || loc.State.Config == nil {
		return nil, located{}, failure.BadInput("cluster %s: platform not installed (no kiln-config); run `%s` first", req.Name, command(req, loc.Name, "create"))
	}
	return e.opsFor(loc, req, timeout), located{loc: loc, cands: cands}, nil
}

// located is where a cluster was found and where its token dir may be.
type located struct {
	loc   Location
	cands []candidate
}

// Client-side rate limits of a batch (start|suspend --all): the
// one-operation client's 50 QPS (burst 100) would make a batch of 100
// projects, about 20 requests each, wait on kiln's own limiter rather than
// on the cluster. The API server's priority and fairness still applies.
const (
	batchQPS   = 250
	batchBurst = 500
)

// batchClient gives ops a client of its own with the batch's rate limits
// (the same REST config otherwise: transport, retries, credentials).
func batchClient(ops *project.Ops) error {
	r, ok := ops.R.(*reporter)
	if !ok || r.rest == nil {
		return nil
	}
	rc := rest.CopyConfig(r.rest)
	rc.QPS, rc.Burst = batchQPS, batchBurst
	rc.RateLimiter = nil
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("batch client for cluster %s: %w", ops.Cluster, err)
	}
	ops.Client = cs
	r.w = r.e.watcher(cs)
	return nil
}

func (e *Engine) opsFor(loc Location, req Target, timeout time.Duration) *project.Ops {
	return &project.Ops{
		Client: loc.Client, Cluster: req.Name, Config: loc.State.Config, Timeout: timeout, Provider: req.Provider.Name(),
		Location: loc.Name, At: req.Provider.Nouns().Target, Actions: req.actions, Namer: e.Namer,
		R: &reporter{Reporter: e.reporter(), e: e, w: e.watcher(loc.Client), rest: loc.REST}, Now: e.Now, PageSize: e.PageSize,
	}
}

// Project runs one project operation and emits its result. inspect and
// list return the observed states (also emitted as project events).
func (e *Engine) Project(ctx context.Context, req ProjectRequest) ([]ProjectStatus, error) {
	ctx = e.traced(ctx)
	req.Target = e.hinted(req.Target)
	var ops *project.Ops
	out, msg, err := e.project(ctx, req, &ops)
	if err != nil && ctx.Err() != nil && ops != nil && !req.All && projectWrites(req.Op) {
		// A write in flight when the context was cancelled may have landed
		// (the API server applied it; the client saw "context canceled"):
		// say what the cluster holds now, read back, instead of the
		// cancelled call's error.
		err = e.readBack(ctx, ops, req)
	}
	if err != nil && ctx.Err() != nil && failure.Of(err) == failure.Failed {
		err = failure.Interrupt("interrupted: %v", err)
	}
	if errors.Is(err, context.Canceled) && failure.Of(err) != failure.Interrupted {
		err = failure.Interrupt("interrupted during project %s %s", req.Op, req.Ref)
	}
	cleanDeep(&out)
	return out, e.finish(err, msg, "")
}

// projectWrites reports whether op changes the project.
func projectWrites(op string) bool {
	switch op {
	case ProjectCreate, ProjectStart, ProjectSuspend, ProjectRestack, ProjectDelete, ProjectRotateToken:
		return true
	}
	return false
}

// readBack reads the project after a cancelled operation (a fresh, bounded
// context) and words what the cluster holds now.
func (e *Engine) readBack(ctx context.Context, ops *project.Ops, req ProjectRequest) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	r, err := ops.Parse(req.Ref)
	if err != nil {
		return failure.Interrupt("interrupted during project %s %s", req.Op, req.Ref)
	}
	st, err := ops.Inspect(rctx, r)
	if err != nil {
		return failure.Interrupt("interrupted during project %s %s; reading it back failed (%v), so what landed is unknown: inspect the project to see", req.Op, req.Ref, err)
	}
	return failure.Interrupt("interrupted during project %s %s; read back from the cluster: desired %s, stack %s, observed %s", req.Op, req.Ref, st.Desired, st.Stack, st.State)
}

func (e *Engine) project(ctx context.Context, req ProjectRequest, opsOut **project.Ops) ([]ProjectStatus, string, error) {
	if err := config.ValidateName(req.Name); err != nil {
		return nil, "", err
	}
	single := req.Op != ProjectList && !req.All
	if single {
		if _, _, err := config.ValidateProjectRef(req.Ref); err != nil {
			return nil, "", err
		}
	}
	if req.All && req.Op != ProjectStart && req.Op != ProjectSuspend {
		return nil, "", inputErr(failure.Input, InputAll, req.Name, "{input}: only for project start and suspend")
	}
	ops, at, err := e.projectOpsAt(ctx, req.Target, req.Timeout)
	if err != nil {
		return nil, "", err
	}
	if req.All {
		if err := batchClient(ops); err != nil {
			return nil, "", err
		}
	}
	*opsOut = ops
	if !single {
		if req.Op == ProjectList {
			list, err := ops.List(ctx, req.Tenant)
			if err != nil {
				return nil, "", err
			}
			for i := range list {
				e.emit(&list[i])
			}
			return list, fmt.Sprintf("%d project%s in cluster %s", len(list), human.Plural(len(list)), req.Name), nil
		}
		okList, failed, err := ops.Bulk(ctx, req.Op, req.Tenant, req.Concurrency)
		if err != nil {
			return nil, "", fmt.Errorf("%s %s: %d succeeded, %d failed (%s): %w", req.Op, e.inputName(InputAll), len(okList), len(failed), strings.Join(failed, ", "), err)
		}
		return nil, fmt.Sprintf("%s %s: %d project%s", req.Op, e.inputName(InputAll), len(okList), human.Plural(len(okList))), nil
	}
	r, err := ops.Parse(req.Ref)
	if err != nil {
		return nil, "", err
	}
	switch req.Op {
	case ProjectInspect:
		st, err := ops.Inspect(ctx, r)
		if err != nil {
			return nil, "", err
		}
		for _, o := range st.Objects {
			e.resource(o.Kind, o.Namespace, o.Name, o.Status, o.Message)
		}
		e.emit(st)
		return []ProjectStatus{*st}, describeProject(st), nil
	case ProjectCreate:
		err = ops.Create(ctx, r, req.Stack)
	case ProjectStart:
		err = ops.Start(ctx, r)
	case ProjectSuspend:
		err = ops.Suspend(ctx, r)
	case ProjectRestack:
		err = ops.Restack(ctx, r, req.Stack)
	case ProjectDelete:
		err = ops.Delete(ctx, r)
	case ProjectRotateToken:
		err = ops.RotateToken(ctx, r)
	default:
		return nil, "", failure.BadInput("project operation %q unknown", req.Op)
	}
	if err != nil {
		return nil, "", err
	}
	msg := map[string]string{
		ProjectCreate: "created and running", ProjectStart: "running", ProjectSuspend: "suspended",
		ProjectRestack: "running with stack", ProjectDelete: "deleted", ProjectRotateToken: "token rotated; the Deployment runs with the new token",
	}[req.Op]
	if req.Op == ProjectRestack {
		msg += " " + req.Stack
	}
	if req.Op == ProjectCreate || req.Op == ProjectStart || req.Op == ProjectRestack {
		msg += " at " + ops.Host(r)
		// The API says it is ready; the probe says whether it answers
		// through the gateway, layered on top, never failing the start.
		td, _, err := findTrusted(at.cands, req.Provider.Name(), req.Name, at.loc.State.Keys)
		if err != nil {
			td = nil
		}
		e.reach(ctx, at.loc, req.Name, ops.Config.Spec.Domain, td, []project.Ref{r})
	}
	return nil, fmt.Sprintf("project %s %s", r, msg), nil
}

func describeProject(st *ProjectStatus) string {
	msg := fmt.Sprintf("project %s/%s: %s (desired %s, stack %s)", st.Tenant, st.Project, st.State, st.Desired, st.Stack)
	if len(st.Reasons) > 0 {
		msg += ": " + strings.Join(st.Reasons, "; ")
	}
	return msg
}

// repairProjects heals what is missing of projects whose desired state is
// running (kiln status --repair).
func (e *Engine) repairProjects(ctx context.Context, ops *project.Ops) error {
	return e.phase(ctx, PhaseRepair, func(ctx context.Context) error {
		repaired, err := ops.Repair(ctx)
		if len(repaired) > 0 {
			e.logf(LevelInfo, "repaired: %s", strings.Join(repaired, ", "))
		} else if err == nil {
			return skip("every project whose desired state is running has all its objects")
		}
		return err
	})
}

// EventInfo is one Kubernetes Event of a project's object or pod
// (ProjectStatus.Events); PodInfo one pod's status (ProjectStatus.Pods).
type (
	EventInfo = project.EventInfo
	PodInfo   = project.PodInfo
)

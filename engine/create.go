package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/lock"
	"github.com/kilnctl/kiln/engine/readiness"
)

// Decisions of the create decision table (DESIGN.md §7).
const (
	DecisionFresh    = "fresh"
	DecisionResume   = "resume"
	DecisionContinue = "continue"
)

// Target names the kiln cluster an operation is about and where its token
// dir is: what every cluster operation needs. Each operation's request
// type embeds it and adds only its own options.
type Target struct {
	Provider Provider
	Name     string
	// TokenDir is the token dir the user named ("" to look it up: the
	// keyring, then the default path).
	TokenDir string
	// actions words the hints of this request (Engine.Actions; nil: the
	// kiln command).
	actions Actions
}

// CreateRequest is what Create needs.
type CreateRequest struct {
	Target
	// ConfigPath is the cluster config file ("" for the defaults, or for
	// the installed config on continue).
	ConfigPath string
	// Continue answers the continue question in advance: continue an
	// installed platform with the key the cluster trusts.
	Continue bool
	// Timeout bounds the waits for readiness (failure.Timeout when it passes).
	Timeout time.Duration
}

// run is the state of one create.
type run struct {
	e        *Engine
	req      CreateRequest
	userCfg  *config.ClusterConfig
	cfg      *config.ClusterConfig
	loc      Location
	decision string
	candList []candidate
	skipped  []string // locations left out of discovery by the user
	// elsewhere are the other locations where NAME was found.
	elsewhere []string
	// asked is what the user asked, with the continue question answered.
	asked   Asked
	td      *creds.TokenDir
	lock    *lock.Lock
	lockCtx context.Context
	// dirLocks are the token dirs this run holds (flock), from the
	// credentials phase until commit.
	dirLocks map[string]*creds.DirLock
	authKeys map[string]string // kiln-auth to apply (fresh/resume)
	// authTable is the tenant table kiln-auth gets (fresh/resume) or
	// holds (continue); the gateway's pod template records its digest.
	authTable *creds.TenantTable
	w         *readiness.Watcher
	current   event.Phase // the phase running now, for the interrupt message
	mutated   bool        // whether anything was written yet
}

// step runs one phase of create and records which one it is.
func (r *run) step(ctx context.Context, name event.Phase, fn func(context.Context) error) error {
	r.current = name
	return r.e.phase(ctx, name, fn)
}

// Create discovers, decides, and creates or continues a kiln cluster.
func (e *Engine) Create(ctx context.Context, req CreateRequest) error {
	ctx = e.traced(ctx)
	req.Target = e.hinted(req.Target)
	r := &run{e: e, req: req}
	err := r.create(ctx)
	r.unlockDirs()
	if r.lock != nil {
		err = r.lock.Explain(err) // a lost lock exits 4, not as an interrupt
		// Release even when ctx was cancelled: a fresh context, bounded.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if rerr := r.lock.Release(rctx); rerr != nil {
			e.logf(LevelWarn, "%v", rerr)
		}
		cancel()
	}
	tokenDir := ""
	if r.td != nil {
		tokenDir = r.td.Path
	}
	var classified *failure.Error
	if err != nil && ctx.Err() != nil && !errors.As(err, &classified) {
		// Ctrl-C: the engine stopped at the next safe point. Say what was
		// left and how to finish; nothing done so far is lost. Only a run
		// that wrote something says the cluster is partly set up.
		if r.mutated {
			args := []string{FlagName(InputContinue)}
			if req.ConfigPath != "" {
				args = append(args, "-c", req.ConfigPath)
			}
			err = inputErr(failure.Interrupted, InputContinue, req.Name, "interrupted during the %s phase: the cluster is partly set up; every phase is idempotent, so creating %s again with {input} finishes it with the same key (`%s`)",
				r.current, req.Name, command(req.Target, r.loc.Name, "create", args...))
		} else {
			err = failure.Unchanged(failure.Interrupted, "interrupted during the %s phase: nothing was changed", r.current)
		}
	}
	msg := fmt.Sprintf("cluster %s is ready (%s %s)", req.Name, req.Provider.Name(), r.loc.Name)
	return e.finish(err, msg, tokenDir)
}

// create runs the phases in order. Each lives in a file named for it:
// create_discover.go, create_plan.go (the table itself is Decide, in
// decide.go), create_lock.go, create_credentials.go,
// create_infrastructure.go, create_platform.go, create_readiness.go.
func (r *run) create(ctx context.Context) error {
	req := r.req
	if err := config.ValidateName(req.Name); err != nil {
		return err
	}
	if req.ConfigPath != "" {
		cfg, err := config.Load(req.ConfigPath, req.Name)
		if err != nil {
			return err
		}
		r.userCfg = cfg
	}
	if err := r.step(ctx, PhaseDiscover, r.discover); err != nil {
		return err
	}
	if err := r.step(ctx, PhasePlan, r.plan); err != nil {
		return err
	}
	// From here on the operation mutates; ctx is replaced by the lock's
	// context once the lock is held, so losing the lock stops the work.
	if err := r.step(ctx, PhaseLock, r.lockPhase); err != nil {
		return err
	}
	opCtx := ctx
	if r.lockCtx != nil {
		opCtx = r.lockCtx
	}
	if err := r.step(opCtx, PhaseCredentials, r.credentials); err != nil {
		return err
	}
	if err := r.step(opCtx, PhaseInfrastructure, r.infrastructure); err != nil {
		return err
	}
	if r.lockCtx != nil {
		opCtx = r.lockCtx
	}
	if err := r.step(opCtx, PhasePlatform, r.platform); err != nil {
		return err
	}
	return r.step(opCtx, PhaseReadiness, r.readiness)
}

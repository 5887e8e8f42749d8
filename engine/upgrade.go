package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kilnctl/kiln/engine/event"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/lock"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/readiness"
	"github.com/kilnctl/kiln/internal/human"
)

// UpgradeRequest is kiln upgrade: bring an installed platform to a config
// (DESIGN.md §12).
type UpgradeRequest struct {
	Target
	// ConfigPath is the config to bring the platform to ("" re-applies the
	// installed config with this kiln's manifests).
	ConfigPath string
	// Yes applies without asking (headless).
	Yes bool
	// Timeout bounds each wait.
	Timeout time.Duration
	// DryRun plans only: nothing is written, not even the Lease.
	DryRun bool
	// DeleteProjects lets a removed tenant that still has projects go,
	// with its projects.
	DeleteProjects bool
	// RotateTokens are tenants whose token is issued again with a new
	// token id (kiln upgrade --rotate-token TENANT): the old token is
	// refused once the new one is in the token dir. The cluster key stays.
	RotateTokens []string
	// Restack restacks running projects whose stack changed; without it
	// they are listed as needing a restack.
	Restack bool
}

// UpgradeConfirmer is a Confirmer that can confirm an upgrade plan. A
// Confirmer without it (or none) answers no: failure.Confirm, nothing changed.
type UpgradeConfirmer interface {
	ConfirmUpgrade(ctx context.Context, q UpgradeQuestion) (bool, error)
}

// UpgradeQuestion is the plan an upgrade asks to apply.
type UpgradeQuestion struct {
	Provider, Name, Location string
	Changes                  []PlanChange
}

// PlanChange is one change of an upgrade plan, emitted as a plan event.
// Kind is a Kubernetes kind, or Token (a tenant token in the token dir)
// or Project (a project to restack).
type PlanChange struct {
	Action    string   `json:"action"` // create, update or delete
	Kind      string   `json:"kind"`
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Fields    []string `json:"fields"`
	Message   string   `json:"message"`
}

// Kinds of plan changes that are not Kubernetes objects.
const (
	KindToken   = "Token"
	KindProject = "Project"
)

func (c PlanChange) key() string { return c.Action + " " + c.Kind + " " + c.Namespace + "/" + c.Name }

// upgrade is the state of one kiln upgrade.
type upgrade struct {
	e       *Engine
	req     UpgradeRequest
	userCfg *config.ClusterConfig
	loc     Location
	td      *creds.TokenDir
	w       *readiness.Watcher
	lock    *lock.Lock
	current event.Phase
	mutated bool
}

// Upgrade plans the change of an installed platform to the requested
// config, shows the plan as plan events, asks (UpgradeConfirmer; Yes
// skips the question), then applies it under the cluster lock in
// dependency order, each step verified, writing kiln-config last. Every
// step is idempotent: an interrupted upgrade run again converges.
func (e *Engine) Upgrade(ctx context.Context, req UpgradeRequest) error {
	ctx = e.traced(ctx)
	req.Target = e.hinted(req.Target)
	u := &upgrade{e: e, req: req}
	msg, err := u.run(ctx)
	if u.lock != nil {
		err = u.lock.Explain(err)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if rerr := u.lock.Release(rctx); rerr != nil {
			e.logf(LevelWarn, "%v", rerr)
		}
		cancel()
	}
	var classified *failure.Error
	if err != nil && ctx.Err() != nil && !errors.As(err, &classified) {
		if u.mutated {
			err = failure.Interrupt("interrupted during the %s phase: the upgrade is partly applied (kiln-config still holds the previous config); run `%s` again to finish it", u.current, u.command())
		} else {
			err = failure.Unchanged(failure.Interrupted, "interrupted during the %s phase: nothing was changed", u.current)
		}
	}
	tokenDir := ""
	if u.td != nil {
		tokenDir = u.td.Path
	}
	return e.finish(err, msg, tokenDir)
}

func (u *upgrade) step(ctx context.Context, name event.Phase, fn func(context.Context) error) error {
	u.current = name
	return u.e.phase(ctx, name, fn)
}

func (u *upgrade) run(ctx context.Context) (string, error) {
	e, req := u.e, u.req
	if err := config.ValidateName(req.Name); err != nil {
		return "", err
	}
	if req.ConfigPath != "" {
		cfg, err := config.Load(req.ConfigPath, req.Name)
		if err != nil {
			return "", err
		}
		u.userCfg = cfg
	}
	u.current = PhaseDiscover
	loc, cands, err := e.locate(ctx, req.Target, false)
	if err != nil {
		return "", err
	}
	u.loc = loc
	if !loc.State.Installed || loc.State.Config == nil {
		return "", failure.BadInput("cluster %s: platform not installed in %s %s (no kiln-config); run `%s` first", req.Name, locationNoun(req.Provider), loc.Name, command(req.Target, loc.Name, "create"))
	}
	if err := e.checkVersion(loc.State, req.Name); err != nil {
		return "", err
	}
	td, _, err := findTrusted(cands, req.Provider.Name(), req.Name, loc.State.Keys)
	if err != nil {
		return "", err
	}
	if td == nil {
		return "", inputErr(failure.Failed, InputTokenDir, req.Name, "kiln platform %s is installed, but no token dir holds a key it trusts (trusted: %v; looked in %s). Pass {input} with the directory created when the cluster was made",
			req.Name, loc.State.KeyIDs(), describeCandidates(cands))
	}
	u.td = td
	var p *upgradePlan
	err = u.step(ctx, PhasePlan, func(ctx context.Context) error {
		var err error
		if p, err = u.plan(ctx); err != nil {
			return err
		}
		for _, c := range p.changes {
			e.emit(event.PlanEvent{Action: c.Action, Kind: c.Kind, Namespace: c.Namespace, Name: c.Name, Fields: c.Fields, Message: c.Message})
		}
		for _, n := range p.notes {
			e.logf(LevelWarn, "%s", n)
		}
		return p.refusal(u)
	})
	if err != nil {
		return "", err
	}
	if req.DryRun {
		if len(p.changes) == 0 {
			return fmt.Sprintf("no changes: platform %s already matches; nothing was changed (dry run)", req.Name), nil
		}
		return fmt.Sprintf("dry run: %d change%s planned for platform %s; nothing was changed", len(p.changes), human.Plural(len(p.changes)), req.Name), nil
	}
	if len(p.changes) > 0 && !req.Yes {
		q := UpgradeQuestion{Provider: req.Provider.Name(), Name: req.Name, Location: loc.Name, Changes: p.changes}
		ok := false
		if c, can := e.Confirm.(UpgradeConfirmer); can {
			if ok, err = c.ConfirmUpgrade(ctx, q); err != nil {
				return "", err
			}
		}
		if !ok {
			return "", inputErr(failure.Confirm, InputYes, req.Name, "upgrading platform %s needs confirmation (%d change%s planned above); nothing was changed. Pass {input} to apply it",
				req.Name, len(p.changes), human.Plural(len(p.changes)))
		}
	}
	return u.apply(ctx, p)
}

// checkVersion refuses to change a platform a newer kiln last wrote.
func (e *Engine) checkVersion(st *platform.State, name string) error {
	if platform.Newer(st.Version, st.Schema, e.version()) {
		return failure.BadInput("platform %s was last installed or upgraded by kiln %s (platform schema %d); this kiln is %s (schema %d) and does not change a newer platform: use kiln %s or newer",
			name, st.Version, st.Schema, e.version(), platform.SchemaVersion, st.Version)
	}
	return nil
}

// apply takes the cluster lock, plans again under it (the plan the user
// saw must still be the plan) and applies the plan.
func (u *upgrade) apply(ctx context.Context, shown *upgradePlan) (string, error) {
	e, req := u.e, u.req
	cs := u.loc.Client
	var p *upgradePlan
	var lctx context.Context
	// The lock is taken in the first phase that changes something: the
	// infrastructure's when the plan has infrastructure changes.
	first := PhasePlatform
	if len(shown.infra) > 0 {
		first = PhaseInfrastructure
	}
	err := u.step(ctx, first, func(ctx context.Context) error {
		l, c, err := e.lockCluster(ctx, cs, "upgrade", req.Name, true)

		if err != nil {
			return err
		}
		u.lock, lctx = l, c
		e.logf(LevelInfo, "holding lock %s/%s as %s", platform.Namespace, platform.LockName, l.Holder())
		u.e.checkpoint(ctx, "upgrade-after-lock")
		// A key kept trusted by rotate-key --keep-old goes once its time
		// is up, with the next operation that holds the lock.
		if err := e.retireExpiredKey(lctx, cs, req.Name, req.Timeout); err != nil {
			return err
		}
		if p, err = u.plan(lctx); err != nil {
			return err
		}
		if err := p.refusal(u); err != nil {
			return err
		}
		if extra := p.beyond(shown); len(extra) > 0 {
			return fmt.Errorf("the platform changed since the plan was made (%s); nothing was changed. Run `%s` again to see the new plan", extra[0], u.command())
		}
		if len(p.changes) == 0 {
			return skip("no changes")
		}
		u.mutated = true
		if first == PhaseInfrastructure {
			return u.applyInfrastructure(lctx, p)
		}
		return u.applyPlatform(lctx, p)
	})
	if err != nil {
		return "", err
	}
	if len(p.changes) == 0 {
		return fmt.Sprintf("no changes: platform %s already matches; nothing was changed", req.Name), nil
	}
	if first == PhaseInfrastructure {
		if err := u.step(lctx, PhasePlatform, func(ctx context.Context) error { return u.applyPlatform(ctx, p) }); err != nil {
			return "", err
		}
	}
	if err := u.step(lctx, PhaseProjects, func(ctx context.Context) error { return u.applyProjects(ctx, p) }); err != nil {
		return "", err
	}
	if err := u.step(lctx, PhaseConfig, func(ctx context.Context) error { return u.applyConfig(ctx, p) }); err != nil {
		return "", err
	}
	msg := fmt.Sprintf("platform %s upgraded: %d change%s applied", req.Name, len(p.changes), human.Plural(len(p.changes)))
	if len(p.needRestack) > 0 {
		msg += fmt.Sprintf("; %d project%s still run%s a previous version of its stack (`%s`, or kiln project restack of each)", len(p.needRestack), human.Plural(len(p.needRestack)), map[bool]string{true: "s", false: ""}[len(p.needRestack) == 1], u.command(FlagName(InputRestack)))
	}
	return msg, nil
}

// command is this upgrade as the user runs it again: the same config file
// (a rerun without it would plan back to the installed config), the
// location it found the cluster in, and extra flags.
func (u *upgrade) command(extra ...string) string {
	var args []string
	if u.req.ConfigPath != "" {
		args = append(args, "-c", u.req.ConfigPath)
	}
	if u.req.DeleteProjects {
		args = append(args, FlagName(InputDeleteProjects))
	}
	if u.req.Restack {
		args = append(args, FlagName(InputRestack))
	}
	return command(u.req.Target, u.loc.Name, "upgrade", append(args, extra...)...)
}

package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/lock"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/readiness"
	"github.com/kilnctl/kiln/internal/exit"
)

// Decisions of the create decision table (DESIGN.md §7).
const (
	DecisionFresh    = "fresh"
	DecisionResume   = "resume"
	DecisionContinue = "continue"
)

// Request is what every cluster operation needs.
type Request struct {
	Provider Provider
	Name     string
	// ConfigPath is -c/--config ("" for the defaults, or for the installed
	// config on continue).
	ConfigPath string
	// Continue is --continue: continue an installed platform.
	Continue bool
	// Yes is --yes: confirm destroy.
	Yes bool
	// TokenDir is --token-dir.
	TokenDir string
	// Timeout bounds the waits for readiness (exit 5 when it passes).
	Timeout time.Duration
	// Repair is status --repair: heal what is missing of projects whose
	// desired state is running.
	Repair bool
	// Snapshot, for status --watch, receives the complete status once
	// before changes stream (text mode prints its table then).
	Snapshot func(*ClusterStatus)
}

// run is the state of one create.
type run struct {
	e        *Engine
	req      Request
	userCfg  *config.ClusterConfig
	cfg      *config.ClusterConfig
	loc      Location
	decision string
	candList []candidate
	skipped  []string // locations left out of discovery by the user
	td       *creds.TokenDir
	lock     *lock.Lock
	lockCtx  context.Context
	// dirLocks are the token dirs this run holds (flock), from the
	// credentials phase until commit.
	dirLocks map[string]*creds.DirLock
	authKeys map[string]string // kiln-auth to apply (fresh/resume)
	w        *readiness.Watcher
	current  string // the phase running now, for the interrupt message
	mutated  bool   // whether anything was written yet
}

// step runs one phase of create and records which one it is.
func (r *run) step(ctx context.Context, name string, fn func(context.Context) error) error {
	r.current = name
	return r.e.phase(ctx, name, fn)
}

// Create discovers, decides, and creates or continues a kiln cluster.
func (e *Engine) Create(ctx context.Context, req Request) error {
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
	var classified *exit.Error
	if err != nil && ctx.Err() != nil && !errors.As(err, &classified) {
		// Ctrl-C: the engine stopped at the next safe point. Say what was
		// left and how to finish; nothing done so far is lost.
		left := "nothing was changed"
		if r.mutated {
			left = fmt.Sprintf("the cluster is partly set up; every phase is idempotent, so `kiln create %s %s --continue` finishes it with the same key", req.Provider.Name(), req.Name)
		}
		err = exit.Interrupt("interrupted during the %s phase: %s", r.current, left)
	}
	msg := fmt.Sprintf("cluster %s is ready (%s %s)", req.Name, req.Provider.Name(), r.loc.Name)
	return e.finish(err, msg, tokenDir)
}

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
	if err := r.step(ctx, "discover", r.discover); err != nil {
		return err
	}
	if err := r.step(ctx, "plan", r.plan); err != nil {
		return err
	}
	// From here on the operation mutates; ctx is replaced by the lock's
	// context once the lock is held, so losing the lock stops the work.
	if err := r.step(ctx, "credentials", r.credentials); err != nil {
		return err
	}
	opCtx := ctx
	if r.lockCtx != nil {
		opCtx = r.lockCtx
	}
	if err := r.step(opCtx, "infrastructure", r.infrastructure); err != nil {
		return err
	}
	if r.lockCtx != nil {
		opCtx = r.lockCtx
	}
	if err := r.step(opCtx, "platform", r.platform); err != nil {
		return err
	}
	return r.step(opCtx, "readiness", r.readiness)
}

// discover inspects every location, then picks the target and refuses a
// NAME that lives elsewhere.
func (r *run) discover(ctx context.Context) error {
	f, err := r.e.discoverTarget(ctx, r.req, true)
	if err != nil {
		return err
	}
	r.loc, r.candList, r.skipped = f.loc, f.cands, f.skipped
	return nil
}

// plan applies the decision table to what discovery found.
func (r *run) plan(ctx context.Context) error {
	d, reason, err := r.decide(ctx, r.loc.State)
	if err != nil {
		return err
	}
	r.decision = d
	r.e.emit(Event{Type: TypeDecision, Decision: d, Reason: reason + uniqueness(r.req.Provider, r.req.Name, r.skipped)})
	return nil
}

// decide maps the platform state to fresh / resume / continue and checks
// what continuing requires. It asks for confirmation when needed.
func (r *run) decide(ctx context.Context, st *platform.State) (string, string, error) {
	p, name := r.req.Provider, r.req.Name
	switch {
	case st != nil && st.Installed:
		if r.req.Continue {
			// fall through to the checks below
		} else {
			q := ContinueQuestion{Provider: p.Name(), Name: name, Location: r.loc.Name, TrustedKeyIDs: st.KeyIDs()}
			if td, _, err := findTrusted(r.cands(), p.Name(), name, st.Keys); err == nil && td != nil {
				q.TokenDir = td.Path
			}
			ok := false
			if r.e.Confirm != nil {
				var err error
				ok, err = r.e.Confirm.ConfirmContinue(ctx, q)
				if err != nil {
					return "", "", err
				}
			}
			if !ok {
				return "", "", exit.Confirm("kiln platform %s is already installed in %s %s (trusted keys: %s); nothing was changed. Run again with --continue to continue it with the key material it already trusts",
					name, locationNoun(p), r.loc.Name, strings.Join(st.KeyIDs(), ", "))
			}
		}
		if r.userCfg != nil {
			installed := st.Config
			if diff := config.Diff(installed, r.userCfg); len(diff) > 0 {
				return "", "", exit.Usage("--config %s differs from the installed kiln-config of %s; kiln never ignores a config silently. Differences:\n  %s",
					r.req.ConfigPath, name, strings.Join(diff, "\n  "))
			}
		}
		r.cfg = st.Config
		td, found, err := findTrusted(r.cands(), p.Name(), name, st.Keys)
		if err != nil {
			return "", "", err
		}
		if td == nil {
			var have []string
			for _, f := range found {
				have = append(have, fmt.Sprintf("%s has key %s", f.Path, f.Manifest.KeyID))
			}
			msg := fmt.Sprintf("kiln platform %s is installed in %s %s, but no token dir holds a key it trusts (trusted: %s). Looked in: %s",
				name, locationNoun(p), r.loc.Name, strings.Join(st.KeyIDs(), ", "), describeCandidates(r.cands()))
			if len(have) > 0 {
				msg += "; found: " + strings.Join(have, "; ")
			}
			return "", "", errors.New(msg + ". Pass --token-dir with the directory created when the cluster was made")
		}
		r.td = td
		return DecisionContinue, fmt.Sprintf("platform installed in %s %s; continuing with trusted key %s from %s", locationNoun(p), r.loc.Name, td.Manifest.KeyID, td.Path), nil
	}
	// Before anything is written: every token dir candidate that exists
	// must be usable and belong to this cluster (exit 2 otherwise, and
	// nothing on disk or in the cluster is touched).
	var keys map[string]string
	if st != nil {
		keys = st.Keys
	}
	if _, _, err := findTrusted(r.cands(), p.Name(), name, keys); err != nil {
		return "", "", err
	}
	switch {
	case st != nil && (st.NamespaceExists || len(st.Keys) > 0):
		r.setConfig()
		return DecisionResume, fmt.Sprintf("%s exists in %s %s but kiln-config does not: an earlier create stopped part-way; resuming", platform.Namespace, locationNoun(p), r.loc.Name), nil
	default:
		r.setConfig()
		if r.loc.Infra == InfraAbsent {
			return DecisionFresh, "no cluster found; creating infrastructure and platform", nil
		}
		return DecisionFresh, fmt.Sprintf("no kiln platform in %s %s", locationNoun(p), r.loc.Name), nil
	}
}

func (r *run) setConfig() {
	if r.userCfg != nil {
		r.cfg = r.userCfg
	} else {
		r.cfg = config.Default(r.req.Name)
	}
}

func (r *run) cands() []candidate {
	return r.candList
}

// acquire takes the cluster lock (creating kiln-system first: the Lease
// lives there), then re-reads the platform under the lock and re-decides:
// another run may have finished while this one planned.
func (r *run) acquire(ctx context.Context, cs kubernetes.Interface) error {
	if r.lock != nil {
		return nil
	}
	r.mutated = true
	if err := r.ensure(ctx, cs, r.watcher(cs), platform.NamespaceObject(r.req.Name)); err != nil {
		return err
	}
	checkpoint(ctx, "after-namespace")
	l, lctx, err := lock.Acquire(ctx, cs, lock.Options{
		Namespace: platform.Namespace, Name: platform.LockName, Operation: "create " + r.req.Name,
		Labels: map[string]string{platform.LabelManagedBy: "kiln", platform.LabelCluster: r.req.Name},
		Logf:   func(f string, a ...any) { r.e.logf(LevelInfo, f, a...) },
	})
	if err != nil {
		return err
	}
	r.lock, r.lockCtx = l, lctx
	r.e.logf(LevelInfo, "holding lock %s/%s as %s", platform.Namespace, platform.LockName, l.Holder())
	checkpoint(ctx, "after-lock")
	st, err := platform.Read(lctx, cs)
	if err != nil {
		return err
	}
	before := r.decision
	d, reason, err := r.decide(lctx, st)
	if err != nil {
		return err
	}
	r.loc.State = st
	if d != before && !(before == DecisionFresh && d == DecisionResume) {
		r.decision = d
		r.e.emit(Event{Type: TypeDecision, Decision: d, Reason: "changed while waiting for the lock: " + reason})
	}
	return nil
}

// credentials reuses the key the cluster trusts, or generates one when the
// platform is not installed, and writes the token dir as pending.
func (r *run) credentials(ctx context.Context) error {
	e, p, name := r.e, r.req.Provider, r.req.Name
	// The token dir lock comes first: a second create of NAME on this host
	// stops here (exit 4) before it writes anything, locally or remotely.
	if err := r.lockDir(r.cands()[0].Path); err != nil {
		return err
	}
	if r.loc.Client != nil {
		if err := r.acquire(ctx, r.loc.Client); err != nil {
			return err
		}
		ctx = r.lockCtx
	}
	if r.td != nil {
		if err := r.lockDir(r.td.Path); err != nil {
			return err
		}
	}
	if r.decision == DecisionContinue {
		if missing := missingTenants(r.td, r.cfg.Spec.Tenants); len(missing) > 0 {
			// Tenants added to kiln-config since the token dir was written:
			// sign their tokens with the key the cluster already trusts.
			td, err := creds.AddTenants(r.td.Path, missing, e.now())
			if err != nil {
				return err
			}
			r.td = td
			e.logf(LevelInfo, "signed tokens for new tenants %s with trusted key %s", strings.Join(missing, ", "), td.Manifest.KeyID)
		}
		if r.td.Manifest.State == creds.StatePending {
			// The cluster already trusts this key (kiln-auth has it and
			// kiln-config exists): the earlier run died before committing.
			if err := creds.Commit(r.td.Path, r.loc.State.Keys); err != nil {
				return err
			}
			r.td.Manifest.State = creds.StateCommitted
			e.logf(LevelInfo, "promoted pending token dir %s: the cluster trusts its key %s", r.td.Path, r.td.Manifest.KeyID)
		}
		if err := r.remember(); err != nil {
			return err
		}
		return skip("reusing trusted key %s from %s", r.td.Manifest.KeyID, r.td.Path)
	}
	trusted := map[string]string{}
	if r.loc.State != nil {
		trusted = r.loc.State.Keys
	}
	td, found, err := findTrusted(r.cands(), p.Name(), name, trusted)
	if err != nil {
		return err
	}
	if td != nil {
		// Resume: the cluster received this key before the run stopped.
		if err := r.lockDir(td.Path); err != nil {
			return err
		}
		r.td = td
		r.authKeys = map[string]string{td.Manifest.KeyID: trusted[td.Manifest.KeyID]}
		if missing := missingTenants(td, r.cfg.Spec.Tenants); len(missing) > 0 {
			if r.td, err = creds.AddTenants(td.Path, missing, e.now()); err != nil {
				return err
			}
		}
		e.logf(LevelInfo, "reusing key %s from %s: the cluster already has it", td.Manifest.KeyID, td.Path)
		return r.remember()
	}
	if len(trusted) > 0 {
		e.logf(LevelWarn, "kiln-auth holds keys %s that no local token dir has; the platform was never installed with them, so they will be replaced",
			strings.Join(r.loc.State.KeyIDs(), ", "))
	}
	dir := r.cands()[0].Path
	if !r.trustKnown() {
		// Nobody can say which keys the cluster trusts yet (no cluster, or
		// not reachable, or EKS not ACTIVE): a directory at dir may hold
		// the key it already trusts, so it is kept and its key used. The
		// platform phase reads kiln-auth under the cluster lock and commits
		// only a key the cluster trusts.
		for _, f := range found {
			if f.Path != dir {
				continue
			}
			r.td = f
			if missing := missingTenants(f, r.cfg.Spec.Tenants); len(missing) > 0 {
				if r.td, err = creds.AddTenants(f.Path, missing, e.now()); err != nil {
					return err
				}
			}
			pemBytes, err := creds.PublicKeyPEM(r.td.PublicKey())
			if err != nil {
				return err
			}
			r.authKeys = map[string]string{r.td.Manifest.KeyID: string(pemBytes)}
			e.logf(LevelInfo, "keeping %s token dir %s and its key %s: which keys the cluster trusts is unknown until it is reachable, so no token dir is replaced",
				f.Manifest.State, f.Path, f.Manifest.KeyID)
			return r.remember()
		}
	}
	for _, f := range found {
		if f.Path != dir {
			continue
		}
		if f.Manifest.State == creds.StateCommitted {
			aside, err := creds.MoveAside(f.Path, e.now())
			if err != nil {
				return err
			}
			e.logf(LevelWarn, "token dir %s held committed key %s that this cluster does not trust; moved it to %s", f.Path, f.Manifest.KeyID, aside)
		} else {
			e.logf(LevelInfo, "replacing pending token dir %s: the cluster never received its key %s", f.Path, f.Manifest.KeyID)
		}
	}
	key, err := creds.GenerateKey()
	if err != nil {
		return err
	}
	td, err = creds.NewTokenDir(name, p.Name(), r.loc.Name, key, r.cfg.Spec.Tenants, e.now())
	if err != nil {
		return err
	}
	if err := creds.Write(dir, td); err != nil {
		return err
	}
	td.Path = dir
	r.td = td
	pemBytes, err := creds.PublicKeyPEM(td.PublicKey())
	if err != nil {
		return err
	}
	r.authKeys = map[string]string{td.Manifest.KeyID: string(pemBytes)}
	e.logf(LevelInfo, "generated key %s; token dir %s written (pending)", td.Manifest.KeyID, dir)
	checkpoint(ctx, "after-token-dir-pending")
	return r.remember()
}

// lockDir takes the file lock of token dir path (once per run): exit 4
// naming the holder when another process has it.
func (r *run) lockDir(path string) error {
	if _, ok := r.dirLocks[path]; ok {
		return nil
	}
	l, err := creds.LockDir(path, lock.Identity("create "+r.req.Name))
	if err != nil {
		return err
	}
	if r.dirLocks == nil {
		r.dirLocks = map[string]*creds.DirLock{}
	}
	r.dirLocks[path] = l
	return nil
}

func (r *run) unlockDirs() {
	for p, l := range r.dirLocks {
		if err := l.Unlock(); err != nil {
			r.e.logf(LevelWarn, "%v", err)
		}
		delete(r.dirLocks, p)
	}
}

// trustKnown reports whether this run knows which keys the cluster trusts:
// its kiln-auth was read under the cluster lock. Before that (no cluster
// yet, unreachable, EKS not ACTIVE) an empty set means "unknown", not "none".
func (r *run) trustKnown() bool {
	return r.lock != nil && r.loc.State != nil
}

func missingTenants(td *creds.TokenDir, tenants []string) []string {
	var out []string
	for _, t := range tenants {
		if !td.Manifest.HasTenant(t) {
			out = append(out, t)
		}
	}
	return out
}

// remember records the token dir in the keyring (path, key id, location:
// no secret material).
func (r *run) remember() error {
	if r.e.Keyring == nil {
		return nil
	}
	err := r.e.Keyring.Put(creds.Entry{
		Provider: r.req.Provider.Name(), Name: r.req.Name,
		TokenDir: r.td.Path, KeyID: r.td.Manifest.KeyID, Location: r.loc.Name,
	})
	if err != nil {
		r.e.logf(LevelWarn, "keyring: could not remember token dir %s: %v (kiln will still find it at that path)", r.td.Path, err)
	}
	return nil
}

func (r *run) infrastructure(ctx context.Context) error {
	loc, skipped, err := r.req.Provider.EnsureInfrastructure(ctx, r.req.Name, r.loc.Name, r.e.Sink)
	if err != nil {
		return err
	}
	st := r.loc.State
	r.loc.Client, r.loc.REST = loc.Client, loc.REST
	r.loc.State = st
	if skipped {
		return skip("%s %s already exists", locationNoun(r.req.Provider), r.loc.Name)
	}
	return nil
}

// platform applies the platform objects in dependency order, each verified
// before its dependents: Namespace → kiln-auth → kiln-config → token dir
// committed → tenant namespaces → gateway.
func (r *run) platform(ctx context.Context) error {
	cs := r.loc.Client
	if r.lock == nil {
		// Providers whose cluster did not exist before the infrastructure
		// phase take the lock here.
		if err := r.acquire(ctx, cs); err != nil {
			return err
		}
		ctx = r.lockCtx
		if err := r.lockDir(r.td.Path); err != nil {
			return err
		}
	}
	name := r.req.Name
	w := r.watcher(cs)
	trusted := map[string]string{}
	if r.loc.State != nil {
		trusted = r.loc.State.Keys
	}
	if r.decision != DecisionContinue {
		auth, err := platform.AuthObject(name, r.authKeys)
		if err != nil {
			return err
		}
		if err := r.ensure(ctx, cs, w, auth); err != nil {
			return err
		}
		if err := r.verifyAuth(ctx, cs); err != nil {
			return err
		}
		checkpoint(ctx, "after-auth")
		cfgObj, err := platform.ConfigObject(name, r.cfg)
		if err != nil {
			return err
		}
		if err := r.ensure(ctx, cs, w, cfgObj); err != nil {
			return err
		}
		st, err := platform.Read(ctx, cs)
		if err != nil {
			return err
		}
		if !st.Installed || len(config.Diff(st.Config, r.cfg)) > 0 {
			return fmt.Errorf("read back %s/%s: it does not hold the config kiln applied", platform.Namespace, platform.ConfigMapName)
		}
		trusted = st.Keys
		checkpoint(ctx, "after-config")
	}
	if r.td.Manifest.State == creds.StatePending {
		// Commit checks the key on disk against kiln-auth as just read.
		if err := creds.Commit(r.td.Path, trusted); err != nil {
			return err
		}
		r.td.Manifest.State = creds.StateCommitted
		r.e.logf(LevelInfo, "token dir %s committed: the cluster trusts key %s", r.td.Path, r.td.Manifest.KeyID)
	}
	r.unlockDirs()
	checkpoint(ctx, "after-commit")
	tenants := platform.TenantObjects(name, r.cfg.Spec.Tenants)
	if err := r.ensureAll(ctx, cs, w, tenants); err != nil {
		return err
	}
	checkpoint(ctx, "after-tenants")
	for _, obj := range platform.GatewayObjects(name, r.cfg) {
		if err := r.ensure(ctx, cs, w, obj); err != nil {
			return err
		}
		checkpoint(ctx, "after-"+strings.ToLower(obj.Ref.Kind))
	}
	return nil
}

// verifyAuth reads kiln-auth back and checks it trusts the token dir's key.
func (r *run) verifyAuth(ctx context.Context, cs kubernetes.Interface) error {
	st, err := platform.Read(ctx, cs)
	if err != nil {
		return err
	}
	if _, ok := st.Keys[r.td.Manifest.KeyID]; !ok {
		return fmt.Errorf("read back %s/%s: key %s is not there", platform.Namespace, platform.AuthName, r.td.Manifest.KeyID)
	}
	return nil
}

func (r *run) watcher(cs kubernetes.Interface) *readiness.Watcher {
	if r.w == nil {
		r.w = r.e.watcher(cs)
	}
	return r.w
}

// ensure applies one object and waits until it is ready.
func (r *run) ensure(ctx context.Context, cs kubernetes.Interface, w *readiness.Watcher, obj platform.Object) error {
	return r.ensureAll(ctx, cs, w, []platform.Object{obj})
}

// ensureAll applies independent objects, then waits until all are ready.
func (r *run) ensureAll(ctx context.Context, cs kubernetes.Interface, w *readiness.Watcher, objs []platform.Object) error {
	var refs []readiness.Ref
	for _, obj := range objs {
		if _, err := platform.Ensure(ctx, cs, obj); err != nil {
			return err
		}
		refs = append(refs, obj.Ref)
	}
	wctx, cancel := withTimeout(ctx, r.req.Timeout)
	defer cancel()
	_, err := w.Until(wctx, refs, readiness.Ready)
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// readiness confirms every platform object is ready and every tenant token
// verifies against kiln-auth.
func (r *run) readiness(ctx context.Context) error {
	cs := r.loc.Client
	st, err := platform.Read(ctx, cs)
	if err != nil {
		return err
	}
	if !slices.Contains(st.KeyIDs(), r.td.Manifest.KeyID) {
		return fmt.Errorf("kiln-auth does not trust key %s of token dir %s", r.td.Manifest.KeyID, r.td.Path)
	}
	if err := verifyTokens(r.td, st.Keys, r.cfg.Spec.Tenants); err != nil {
		return err
	}
	return nil
}

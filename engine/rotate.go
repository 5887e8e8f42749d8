package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/lock"
	"github.com/kilnctl/kiln/engine/platform"
)

// RotateKeyRequest is kiln rotate-key: replace the cluster's signing key
// (DESIGN.md §12).
type RotateKeyRequest struct {
	Target
	// Yes rotates without asking (headless).
	Yes bool
	// Timeout bounds each wait.
	Timeout time.Duration
	// KeepOld keeps the old key trusted alongside the new one for this
	// long after the swap (for consumers that cache tokens); zero removes
	// it at once.
	KeepOld time.Duration
	// Finish ends a rotation kept open by KeepOld now.
	Finish bool
}

// RotateConfirmer is a Confirmer that can confirm a key rotation. A
// Confirmer without it (or none) answers no: failure.Confirm, nothing changed.
type RotateConfirmer interface {
	ConfirmRotate(ctx context.Context, q RotateQuestion) (bool, error)
}

// RotateQuestion says what rotate-key is about to do.
type RotateQuestion struct {
	Provider, Name, Location string
	// KeyID is the key in use now; TokenDir holds it.
	KeyID, TokenDir string
	// Step is what happens: RotateStart, RotateResume or RotateRetire.
	Step string
	// OldKeyID is the key a rotation under way replaces (resume, retire).
	OldKeyID string
	KeepOld  time.Duration
}

// Steps of a rotation a RotateQuestion asks about.
const (
	RotateStart  = "start"  // generate a new key and rotate to it
	RotateResume = "resume" // finish the rotation an interrupted run began
	RotateRetire = "retire" // remove the rotated-out key from kiln-auth
)

// rotation is the state of one kiln rotate-key.
type rotation struct {
	e      *Engine
	req    RotateKeyRequest
	loc    Location
	cands  []candidate
	st     *platform.State
	td     *creds.TokenDir
	staged *creds.TokenDir // the next token dir, before the swap
	lock   *lock.Lock
	// start: this run begins a new rotation (the question asked so).
	start bool
	// outcome words the result.
	outcome string
}

// RotateKey rotates the cluster's signing key in two phases: a new key is
// trusted alongside the old one (read back), every tenant token is signed
// again with it and the token dir swapped as one unit (the old key kept
// in it until the end), then the old key is removed from kiln-auth, at
// once or after KeepOld. Every step is recorded (staged dir, kiln-auth
// annotations, previous key), so a run interrupted at any instant and run
// again finishes the rotation under way and never starts a second one; at
// every instant the cluster trusts the key of the committed token dir.
func (e *Engine) RotateKey(ctx context.Context, req RotateKeyRequest) error {
	ctx = e.traced(ctx)
	req.Target = e.hinted(req.Target)
	r := &rotation{e: e, req: req}
	err := r.run(ctx)
	if r.lock != nil {
		err = r.lock.Explain(err)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if rerr := r.lock.Release(rctx); rerr != nil {
			e.logf(LevelWarn, "%v", rerr)
		}
		cancel()
	}
	var classified *failure.Error
	if err != nil && ctx.Err() != nil && !errors.As(err, &classified) {
		err = r.interrupted(ctx)
	}
	dir := ""
	if r.td != nil {
		dir = r.td.Path
	}
	return e.finish(err, r.outcome, dir)
}

func (r *rotation) run(ctx context.Context) error {
	e, req := r.e, r.req
	if err := config.ValidateName(req.Name); err != nil {
		return err
	}
	if req.KeepOld < 0 {
		return inputErr(failure.Input, InputKeepOld, req.Name, "{input}: must not be negative, got %s", req.KeepOld)
	}
	if req.Finish && req.KeepOld > 0 {
		return inputErr(failure.Input, InputKeepOld, req.Name, "{input} and %s: give one or the other (finish ends a rotation whose old key was kept)", e.inputName(InputFinish))
	}
	loc, cands, err := e.locate(ctx, req.Target, false)
	if err != nil {
		return err
	}
	r.loc, r.cands = loc, cands
	if !loc.State.Installed {
		return failure.BadInput("cluster %s: platform not installed (no kiln-config); run `%s` first", req.Name, command(req.Target, loc.Name, "create"))
	}
	if err := e.checkVersion(loc.State, req.Name); err != nil {
		return err
	}
	var q *RotateQuestion
	act := false
	err = e.phase(ctx, PhasePlan, func(ctx context.Context) error {
		if err := r.read(ctx); err != nil {
			return err
		}
		q, act = r.question()
		return nil
	})
	if err != nil || !act {
		return err
	}
	if q != nil && !req.Yes {
		ok := false
		if c, can := e.Confirm.(RotateConfirmer); can {
			if ok, err = c.ConfirmRotate(ctx, *q); err != nil {
				return err
			}
		}
		if !ok {
			return inputErr(failure.Confirm, InputYes, req.Name, "rotating the signing key of %s needs confirmation; nothing was changed. Pass {input} to rotate it", req.Name)
		}
	}
	l, lctx, err := e.lockCluster(ctx, loc.Client, "rotate-key", req.Name, false)
	if err != nil {
		return err
	}
	r.lock = l
	r.e.checkpoint(ctx, "rotate-after-lock")
	dl, err := creds.LockDir(r.td.Path, lock.Identity("rotate-key "+req.Name))
	if err != nil {
		return err
	}
	defer dl.Unlock()
	// Under both locks, read everything again: another run may have moved
	// the rotation on meanwhile.
	if err := r.read(lctx); err != nil {
		return err
	}
	if err := e.phase(lctx, PhaseCredentials, r.swap); err != nil {
		return err
	}
	return e.phase(lctx, PhaseRetire, r.retire)
}

// read loads the rotation's state: kiln-auth (trusted keys and the
// rotation record), the token dir holding a trusted key, and a staged
// rotation next to it.
func (r *rotation) read(ctx context.Context) error {
	st, err := platform.Read(ctx, r.loc.Client)
	if err != nil {
		return err
	}
	r.st = st
	td, _, err := findTrusted(r.cands, r.req.Provider.Name(), r.req.Name, st.Keys)
	if err != nil {
		return err
	}
	if td == nil {
		return inputErr(failure.Failed, InputTokenDir, r.req.Name, "no token dir holds a key cluster %s trusts (trusted: %s; looked in %s); a rotation needs the key in use. Pass {input} with the directory that holds it",
			r.req.Name, strings.Join(st.KeyIDs(), ", "), describeCandidates(r.cands))
	}
	r.td = td
	if r.staged, err = creds.LoadRotation(td.Path); err != nil {
		return err
	}
	cur := td.Manifest.KeyID
	ours := r.staged != nil && r.staged.Manifest.KeyID != cur // staged by this dir's rotation
	if st.RotationOldKey == cur && !ours {
		return fmt.Errorf("token dir %s holds key %s, which a rotation begun with another token dir is replacing; nothing was changed. Run rotate-key with the token dir that holds the new key (%s)",
			td.Path, cur, strings.Join(r.others(), ", "))
	}
	for _, id := range r.others() {
		if id != st.RotationOldKey && (r.staged == nil || id != r.staged.Manifest.KeyID) {
			return fmt.Errorf("kiln-auth of %s trusts key %s besides %s (held by %s) and no rotation of this token dir put it there; nothing was changed. Find the token dir that holds it, or remove it from kiln-auth by hand",
				r.req.Name, id, cur, td.Path)
		}
	}
	return nil
}

// others are the trusted keys other than the token dir's, sorted.
func (r *rotation) others() []string {
	var out []string
	for id := range r.st.Keys {
		if id != r.td.Manifest.KeyID {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// question is what this run will do, as a question (nil when it only
// tidies up locally), and whether it has anything to do at all (when not,
// outcome says why).
func (r *rotation) question() (*RotateQuestion, bool) {
	q := &RotateQuestion{Provider: r.req.Provider.Name(), Name: r.req.Name, Location: r.loc.Name,
		KeyID: r.td.Manifest.KeyID, TokenDir: r.td.Path, KeepOld: r.req.KeepOld}
	old := r.others()
	switch {
	case r.staged != nil && r.staged.Manifest.KeyID != r.td.Manifest.KeyID:
		q.Step, q.OldKeyID = RotateResume, r.td.Manifest.KeyID
	case len(old) == 1 && r.retireNow():
		q.Step, q.OldKeyID = RotateRetire, old[0]
	case len(old) == 1:
		r.outcome = fmt.Sprintf("rotation of %s under way: key %s in use, old key %s stays trusted until %s (`%s` removes it now)",
			r.req.Name, r.td.Manifest.KeyID, old[0], r.expiry().Format(time.RFC3339), r.finishCommand())
		if r.st.OldKeyExpires.IsZero() {
			q.Step, q.OldKeyID = RotateRetire, old[0] // records the deadline
			return q, true
		}
		return nil, false
	case r.staged != nil || r.td.Previous != nil:
		return nil, true // only local tidying left: no question
	case r.req.Finish:
		r.outcome = fmt.Sprintf("no rotation of %s under way; nothing to finish (key %s in use)", r.req.Name, r.td.Manifest.KeyID)
		return nil, false
	default:
		q.Step = RotateStart
		r.start = true
	}
	return q, true
}

// expiry is when the old key stops being trusted: recorded on kiln-auth,
// or now + KeepOld for a run that records it.
func (r *rotation) expiry() time.Time {
	if !r.st.OldKeyExpires.IsZero() {
		return r.st.OldKeyExpires
	}
	return r.e.now().Add(r.req.KeepOld)
}

// retireNow says whether the old key goes in this run: --finish, no
// --keep-old and no recorded deadline, or a recorded deadline that passed.
func (r *rotation) retireNow() bool {
	if r.req.Finish {
		return true
	}
	if exp := r.st.OldKeyExpires; !exp.IsZero() {
		return !r.e.now().Before(exp)
	}
	return r.req.KeepOld == 0
}

// finishCommand is the command that ends a rotation kept open now.
func (r *rotation) finishCommand() string {
	return command(r.req.Target, r.loc.Name, "rotate-key", FlagName(InputFinish))
}

// removers names the commands that remove an old key kept past its time
// ("kiln upgrade, create --continue or rotate-key"), as the frontend's
// actions when it has its own (the wizard's keys).
func (r *rotation) removers() string {
	cont := FlagName(InputContinue)
	if a := r.req.Target.actions; a != nil {
		return a([]string{"upgrade"}, nil) + ", " + a([]string{"create"}, []string{cont}) + " or " + a([]string{"rotate-key"}, nil)
	}
	return "kiln upgrade, create " + cont + " or rotate-key"
}

// interrupted words a rotation that Ctrl-C or SIGTERM stopped: nothing
// changed before it held the lock; after, what kiln-auth trusts and the
// token dir holds, read back (a fresh, bounded context), and the command
// that finishes the rotation under way.
func (r *rotation) interrupted(ctx context.Context) error {
	if r.lock == nil || r.loc.Client == nil {
		return failure.Unchanged(failure.Interrupted, "interrupted before the rotation began: nothing was changed")
	}
	again := command(r.req.Target, r.loc.Name, "rotate-key")
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	st, err := platform.Read(rctx, r.loc.Client)
	if err != nil {
		return failure.Interrupt("interrupted; reading kiln-auth back failed (%v), so what landed is unknown. Run `%s` again to finish the rotation under way (it never starts a second one)", err, again)
	}
	held := ""
	if r.td != nil {
		if td, err := creds.Load(r.td.Path); err == nil {
			held = fmt.Sprintf("; token dir %s holds key %s", td.Path, td.Manifest.KeyID)
		}
	}
	return failure.Interrupt("interrupted; read back: kiln-auth trusts %s%s. Every instant of a rotation leaves a key the cluster trusts in the token dir; run `%s` again to finish the rotation under way (it never starts a second one)",
		strings.Join(st.KeyIDs(), ", "), held, again)
}

// Over 400 lines on purpose: acquiring, judging expiry on the contender's
// own clock and taking over a dead holder are one protocol (DESIGN.md §13);
// split across files its invariants would be harder to check. Renewal is in
// renew.go, identities in identity.go.

// Package lock serializes kiln operations with coordination.k8s.io Leases:
// one operation at a time per cluster (kiln-system/kiln-lock) and per
// project (kiln-project-P in the tenant namespace).
//
// The rules (DESIGN.md §13):
//
//   - A Lease is taken with a create or a resourceVersion-preconditioned
//     update, so two contenders can never both believe they hold it.
//   - The holder renews it every third of its duration, each renewal with a
//     deadline, and stops its work (cancels the operation's context with a
//     cause that exits 4) when it has not renewed for ⅔ of the duration on
//     its own monotonic clock, whatever a hung request is doing.
//   - A contender never compares the holder's timestamps with its own
//     clock to decide that a lease expired: it takes a held lease over only
//     after watching it stay unchanged for the lease's duration on its own
//     monotonic clock, or at once when the holder is provably a dead process
//     of this same boot (see deadHolder).
//   - A held lease whose timestamps are plausible (renewed within its
//     duration of the contender's clock) is refused at once with failure.Locked:
//     kiln refuses rather than queues. Only a lease that looks stale (or
//     renewed in the future: a clock is off) is watched before deciding.
//   - Exclusive holders (platform-changing cluster operations) and the
//     leases listed in Options.Excludes keep each other out: see Exclusion.
package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/kubeapi"
)

// DefaultDuration is how long a lease stays valid without renewal.
const DefaultDuration = 15 * time.Second

// AnnotationExclusive marks a lease held by a platform-changing operation
// ("true"): project operations on the cluster refuse while it is held.
const AnnotationExclusive = "kiln.dev/lock-exclusive"

// Options name the lease and its holder.
type Options struct {
	Namespace, Name string
	// Operation is what the holder does ("create", "destroy", "project start").
	Operation string
	// Labels are set on the lease object.
	Labels   map[string]string
	Duration time.Duration
	// Exclusive marks the holder as changing the platform: exclusions that
	// ask for ExclusiveOnly see it.
	Exclusive bool
	// Excludes are leases that must not be held by a live operation while
	// this one is; see Exclusion.
	Excludes []Exclusion
	// Logf reports progress (waiting on a stale lease, taking one over).
	Logf func(format string, args ...any)
	// Now is the wall clock written into the lease and used only to judge
	// whether its timestamps look plausible (tests inject a skewed one).
	// Expiry and the holder's own deadline use the monotonic clock.
	Now func() time.Time
	// Gated says that every write of the operation goes through
	// engine/kubeapi's Transport (every client kiln's providers build
	// does): then a holder that cannot renew for ⅔ of the duration holds
	// its operation's writes back instead of ending the operation, and
	// lets them go again once a renewal preconditioned on the lease's
	// resourceVersion succeeds (proving nobody took it meanwhile). It ends
	// the operation only when a renewal shows another holder, or the lease
	// gone. Without Gated the operation is ended at ⅔ of the duration.
	Gated bool
	// Seen, when set, is the lease as a recent read (a batch's one LIST)
	// found it: *Seen nil means absent. The first attempt writes from it
	// instead of reading the lease again when it was free or absent (a copy
	// showing a holder is read again); a stale copy costs nothing but that
	// read, because the create or resourceVersion-preconditioned
	// update it leads to fails and the next attempt reads.
	Seen **coordinationv1.Lease
}

// Exclusion names leases that exclude the operation. Having taken its own
// lease, Acquire reads them; if a live operation holds one, it gives its own
// lease back and fails with failure.Locked naming that holder. Because both sides
// write their own lease before reading the other's, at least one of two
// racing operations sees the other.
type Exclusion struct {
	// Namespace and Name name one lease; or Selector (a label selector)
	// names every lease matching it in all namespaces.
	Namespace, Name string
	Selector        string
	// ExclusiveOnly: only holders that took their lease as Exclusive count.
	ExclusiveOnly bool
	// Advice ends the Locked failure's message: why this is refused and what to do.
	Advice string
}

// Lock is a held Lease.
type Lock struct {
	cs     kubernetes.Interface
	opts   Options
	holder string
	mu     sync.Mutex
	lease  *coordinationv1.Lease
	lost   error
	// paused is closed when writes may go again; nil while they may.
	paused   chan struct{}
	pausedAt time.Time
	// enforced: a request of the operation has passed kubeapi's Transport
	// with this gate (a write waited on it, or a read was seen), so its
	// client holds writes back (a client without kubeapi's Transport
	// would not: then the operation is ended, as without Gated).
	enforced bool
	stop     context.CancelFunc
	cancelOp context.CancelCauseFunc
	done     chan struct{}
	released bool
}

func (o *Options) logf(format string, args ...any) {
	if o.Logf != nil {
		o.Logf(format, args...)
	}
}

// Acquire takes the lease or fails with a failure.Locked error naming the
// holder and since when. The returned context is cancelled if the lease is
// lost (context.Cause is then a failure.Locked error saying to whom); use it
// for the operation, and pass the operation's error through Explain.
func Acquire(ctx context.Context, cs kubernetes.Interface, opts Options) (*Lock, context.Context, error) {
	if opts.Duration <= 0 {
		opts.Duration = DefaultDuration
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	l := &Lock{cs: cs, opts: opts, holder: Identity(opts.Operation), done: make(chan struct{})}
	sent, err := l.take(ctx)
	if err != nil {
		return nil, nil, err
	}
	// Renew from now on: checking the exclusions may watch another lease
	// for its whole duration.
	opCtx, cancel := context.WithCancelCause(ctx)
	if opts.Gated {
		opCtx = kubeapi.WithGate(opCtx, l)
	}
	kctx, stop := context.WithCancel(context.Background())
	l.stop, l.cancelOp = stop, cancel
	go l.keep(kctx, sent)
	if err := l.checkExclusions(opCtx); err != nil {
		err = l.Explain(err)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.Duration)
		defer cancel()
		if rerr := l.Release(rctx); rerr != nil {
			opts.logf("%v", rerr)
		}
		return nil, nil, err
	}
	return l, opCtx, nil
}

func (l *Lock) leases() leaseClient { return l.cs.CoordinationV1().Leases(l.opts.Namespace) }

type leaseClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// take writes the lease for this holder. It returns when the earliest of
// its writes was sent: the write that won was applied after that, so the
// holder's ⅔-duration deadline counts from there.
func (l *Lock) take(ctx context.Context) (time.Time, error) {
	o := &l.opts
	var first time.Time
	wrote := func() {
		if first.IsZero() {
			first = time.Now()
		}
	}
	for attempt := 0; attempt < 8; attempt++ {
		var cur *coordinationv1.Lease
		var err error
		switch {
		case attempt == 0 && o.Seen != nil && *o.Seen != nil && holderOf(*o.Seen) == "":
			// Only a free copy is trusted: one showing a holder is read
			// again, so a batch never refuses on what a LIST saw earlier.
			cur = (*o.Seen).DeepCopy()
		case attempt == 0 && o.Seen != nil:
			err = apierrors.NewNotFound(coordinationv1.Resource("leases"), o.Name)
		default:
			cur, err = l.leases().Get(ctx, o.Name, metav1.GetOptions{})
		}
		switch {
		case apierrors.IsNotFound(err):
			now := l.stamp(nil)
			lease := &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace, Labels: o.Labels},
				Spec:       l.spec(now, 0),
			}
			l.annotate(&lease.ObjectMeta)
			wrote()
			created, err := l.leases().Create(ctx, lease, metav1.CreateOptions{FieldManager: "kiln"})
			if apierrors.IsAlreadyExists(err) {
				continue // someone was faster, or our own retried create landed: look again
			}
			if err != nil {
				return time.Time{}, fmt.Errorf("create lease %s/%s: %w", o.Namespace, o.Name, err)
			}
			l.lease = created
			return first, nil
		case err != nil:
			return time.Time{}, fmt.Errorf("get lease %s/%s: %w", o.Namespace, o.Name, err)
		}
		h := holderOf(cur)
		switch {
		case h == l.holder:
			// Our create or takeover was applied but its answer was lost.
			l.lease = cur
			return first, nil
		case h == "":
			// Released: free at once.
		case deadHolder(h):
			o.logf("lease %s/%s: holder %s is a process of this machine that has exited; taking the lease over", o.Namespace, o.Name, Who(h))
		case plausible(cur, o.Now(), o.Duration):
			return time.Time{}, lockedError(cur)
		default:
			d := leaseDuration(cur, o.Duration)
			o.logf("lease %s/%s is held by %s, last renewed %s: waiting up to %s to see whether it is still renewed",
				o.Namespace, o.Name, Who(h), renewedAt(cur), d)
			changed, err := observe(ctx, l.leases(), cur, d)
			if err != nil {
				return time.Time{}, err
			}
			if changed != nil {
				if holderOf(changed) == "" {
					continue // released while we watched
				}
				return time.Time{}, lockedError(changed)
			}
			o.logf("lease %s/%s was not renewed for %s: taking it over from %s", o.Namespace, o.Name, d, Who(h))
		}
		upd := cur.DeepCopy()
		upd.Spec = l.spec(l.stamp(nil), ptr.Deref(cur.Spec.LeaseTransitions, 0)+1)
		if upd.Labels == nil && len(o.Labels) > 0 {
			upd.Labels = map[string]string{}
		}
		for k, v := range o.Labels {
			upd.Labels[k] = v
		}
		l.annotate(&upd.ObjectMeta)
		wrote()
		updated, err := l.leases().Update(ctx, upd, metav1.UpdateOptions{FieldManager: "kiln"})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			continue // changed under us (perhaps by our own lost update): look again
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("take over lease %s/%s: %w", o.Namespace, o.Name, err)
		}
		l.lease = updated
		return first, nil
	}
	return time.Time{}, failure.Lock("lease %s/%s is contended; try again", o.Namespace, o.Name)
}

func (l *Lock) annotate(m *metav1.ObjectMeta) {
	if l.opts.Exclusive {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[AnnotationExclusive] = "true"
		return
	}
	delete(m.Annotations, AnnotationExclusive)
}

// stamp is the time to write as renewTime: the wall clock, but always after
// prev, so that every renewal changes the object (an update that changes
// nothing keeps its resourceVersion, and a watching contender would take
// an unchanged lease for a dead one).
func (l *Lock) stamp(prev *metav1.MicroTime) metav1.MicroTime {
	t := l.opts.Now().Truncate(time.Microsecond)
	if prev != nil && !t.After(prev.Time) {
		t = prev.Add(time.Microsecond)
	}
	return metav1.NewMicroTime(t)
}

func (l *Lock) spec(now metav1.MicroTime, transitions int32) coordinationv1.LeaseSpec {
	// Whole seconds, rounded up: a sub-second Duration truncated to 0 would
	// make the lease look expired to every other contender at once.
	secs := int32((l.opts.Duration + time.Second - 1) / time.Second)
	acquire := now
	return coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To(l.holder),
		LeaseDurationSeconds: ptr.To(secs),
		AcquireTime:          &acquire,
		RenewTime:            &now,
		LeaseTransitions:     ptr.To(transitions),
	}
}

func holderOf(l *coordinationv1.Lease) string { return ptr.Deref(l.Spec.HolderIdentity, "") }

// leaseDuration is the lease's own duration, or fallback when it has none.
func leaseDuration(l *coordinationv1.Lease, fallback time.Duration) time.Duration {
	if s := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); s > 0 {
		return time.Duration(s) * time.Second
	}
	return fallback
}

func renewedAt(l *coordinationv1.Lease) string {
	if t := l.Spec.RenewTime; t != nil {
		return t.UTC().Format(time.RFC3339)
	}
	return "never"
}

// plausible reports whether a held lease's renewTime lies within its
// duration of now, either way: what a live holder with a roughly right
// clock looks like. It is only ever used to refuse at once; an implausible
// lease (stale, or renewed in the future) is watched, never trusted.
func plausible(l *coordinationv1.Lease, now time.Time, fallback time.Duration) bool {
	t := l.Spec.RenewTime
	if t == nil {
		t = l.Spec.AcquireTime
	}
	if t == nil {
		return false
	}
	d := leaseDuration(l, fallback)
	return now.Before(t.Add(d)) && t.Time.Before(now.Add(d))
}

// observe watches a held lease (cur, just read) for up to d on the monotonic
// clock. It returns the lease as soon as it changes, or nil when it stayed
// unchanged from cur's read until a read begun d later: only then is it
// expired. NotFound counts as a change (to an empty, free lease).
func observe(ctx context.Context, leases leaseClient, cur *coordinationv1.Lease, d time.Duration) (*coordinationv1.Lease, error) {
	seen := time.Now()
	every := min(max(d/10, 50*time.Millisecond), time.Second)
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-t.C:
		}
		sent := time.Now()
		got, err := leases.Get(ctx, cur.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: cur.Namespace, Name: cur.Name}}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("watch lease %s/%s: %w", cur.Namespace, cur.Name, err)
		}
		if got.ResourceVersion != cur.ResourceVersion {
			return got, nil
		}
		if sent.Sub(seen) >= d {
			return nil, nil
		}
		t.Reset(every)
	}
}

func lockedError(l *coordinationv1.Lease) error {
	return failure.Held(Who(holderOf(l)), acquired(l), "%s/%s is locked by %s since %s; wait for it to finish. If it is no longer running, run again: "+
		"kiln takes a lease over once it has seen it unrenewed for its duration (%ds), or at once if its holder was a kiln process of this machine that has exited",
		l.Namespace, l.Name, Who(holderOf(l)), since(l), ptr.Deref(l.Spec.LeaseDurationSeconds, 0))
}

// acquired is when l's holder took it (zero when unknown).
func acquired(l *coordinationv1.Lease) time.Time {
	if t := l.Spec.AcquireTime; t != nil {
		return t.UTC()
	}
	return time.Time{}
}

func since(l *coordinationv1.Lease) string {
	if t := l.Spec.AcquireTime; t != nil {
		return t.UTC().Format(time.RFC3339)
	}
	return "an unknown time"
}

// Holder is this lock's holder identity.
func (l *Lock) Holder() string { return l.holder }

// Lost is the reason the lease was lost (a failure.Locked error), or nil.
func (l *Lock) Lost() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// Explain turns the error of an operation that ran under this lock into
// the lost-lock error when the lease was lost: the operation then stopped
// because of that (usually with a bare "context canceled"), and the run
// must end with failure.Locked saying so, not as an interrupt.
func (l *Lock) Explain(err error) error {
	lost := l.Lost()
	if err == nil || lost == nil || errors.Is(err, lost) {
		return err
	}
	// Still the holder that took the lease over, when known.
	held := &failure.Error{}
	errors.As(lost, &held)
	return failure.Held(held.Holder, held.Since, "%w (the operation stopped: %v)", lost, err)
}

func (l *Lock) current() *coordinationv1.Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lease
}

func (l *Lock) setLease(lease *coordinationv1.Lease) {
	l.mu.Lock()
	l.lease = lease
	l.mu.Unlock()
}

// StopRenewing ends renewal without releasing (used before the lease's
// namespace is deleted with it). A renewal in flight is abandoned; its
// write, if it lands, is preconditioned like every other.
func (l *Lock) StopRenewing() {
	l.stop()
	<-l.done
	l.mu.Lock()
	paused := l.paused != nil && l.lost == nil
	l.mu.Unlock()
	if paused {
		// Not known to be ours any more, and no renewal will tell.
		l.lose(failure.Lock("lost lock %s/%s: renewal stopped while it was not confirmed for %s, so this run stopped; run again",
			l.opts.Namespace, l.opts.Name, time.Since(l.pausedAt).Round(time.Second)))
	}
}

// Enforce implements kubeapi.Enforcer: a request of the operation went
// through kubeapi's Transport, so its writes wait on this gate. A lease
// that cannot be renewed before the operation's first write then holds
// that write back instead of ending the run.
func (l *Lock) Enforce() {
	l.mu.Lock()
	l.enforced = true
	l.mu.Unlock()
}

// WaitWrite implements kubeapi.Gate for Gated locks: it returns at once
// while the lease is known to be ours, waits while renewals are not
// getting through, and fails with the loss once the lease is lost.
func (l *Lock) WaitWrite(ctx context.Context) error {
	for {
		l.mu.Lock()
		l.enforced = true
		lost, paused := l.lost, l.paused
		l.mu.Unlock()
		switch {
		case lost != nil:
			return lost
		case paused == nil:
			return nil
		}
		select {
		case <-paused:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// pause holds the operation's writes back (see Options.Gated). It
// returns false, having done nothing, when no write of the operation has
// been seen to wait on the gate: its client may not hold writes back.
func (l *Lock) pause(why string) bool {
	l.mu.Lock()
	if !l.enforced {
		l.mu.Unlock()
		return false
	}
	first := l.paused == nil && l.lost == nil
	if first {
		l.paused, l.pausedAt = make(chan struct{}), time.Now()
	}
	l.mu.Unlock()
	if first {
		l.opts.logf("lease %s/%s not renewed for %s (⅔ of its %s duration; last error: %s): holding every write back until a renewal shows the lease is still this run's (nobody can take it while the API server does not answer)",
			l.opts.Namespace, l.opts.Name, l.opts.Duration*2/3, l.opts.Duration, why)
	}
	return true
}

// unpause lets the operation's writes go again.
func (l *Lock) unpause() {
	l.mu.Lock()
	ch, at := l.paused, l.pausedAt
	l.paused = nil
	l.mu.Unlock()
	if ch != nil {
		close(ch)
		l.opts.logf("lease %s/%s renewed again, still this run's: writes resume (held back for %s)", l.opts.Namespace, l.opts.Name, time.Since(at).Round(100*time.Millisecond))
	}
}

// Release gives the lease up: it clears the holder (guarded by
// resourceVersion, so a lease someone else took over is left alone) and
// cancels the operation context, since work must not go on unlocked.
func (l *Lock) Release(ctx context.Context) error {
	l.StopRenewing()
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return nil
	}
	l.released = true
	l.mu.Unlock()
	l.cancelOp(fmt.Errorf("released lease %s/%s", l.opts.Namespace, l.opts.Name))
	for attempt := 0; ; attempt++ {
		upd := l.current().DeepCopy()
		upd.Spec.HolderIdentity = nil
		upd.Spec.RenewTime = nil
		upd.Spec.AcquireTime = nil
		delete(upd.Annotations, AnnotationExclusive)
		_, err := l.leases().Update(ctx, upd, metav1.UpdateOptions{FieldManager: "kiln"})
		if apierrors.IsConflict(err) && attempt == 0 && l.stillOurs(ctx) {
			continue // our last write landed unseen: clear from there
		}
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("release lease %s/%s: %w", l.opts.Namespace, l.opts.Name, err)
		}
		return nil
	}
}

// Gone records that the Lease went with its namespace, which the holder
// saw deleted and confirmed gone: the lock is released, and Release sends
// nothing.
func (l *Lock) Gone() {
	l.StopRenewing()
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return
	}
	l.released = true
	l.mu.Unlock()
	l.cancelOp(fmt.Errorf("lease %s/%s gone with its namespace", l.opts.Namespace, l.opts.Name))
}

// stillOurs re-reads the lease after a conflict and adopts it when it still
// names this holder: a write whose answer never arrived was applied.
func (l *Lock) stillOurs(ctx context.Context) bool {
	cur, err := l.leases().Get(ctx, l.opts.Name, metav1.GetOptions{})
	if err != nil || holderOf(cur) != l.holder {
		return false
	}
	l.setLease(cur)
	return true
}

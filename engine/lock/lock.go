// Package lock serializes kiln operations with coordination.k8s.io Leases:
// one operation at a time per cluster (kiln-system/kiln-lock) and per
// project (kiln-project-P in the tenant namespace).
//
// A Lease is taken with a create or a resourceVersion-preconditioned update,
// so two contenders can never both believe they hold it. It is renewed while
// the operation runs; when renewal fails the operation's context is
// cancelled, so work never continues without the lock.
package lock

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kilnctl/kiln/internal/exit"
)

// DefaultDuration is how long a lease stays valid without renewal. A holder
// that dies leaves it to expire; a holder on this host whose process is gone
// is taken over at once.
const DefaultDuration = 15 * time.Second

// Options name the lease and its holder.
type Options struct {
	Namespace, Name string
	// Operation is what the holder does ("create", "destroy", "project start").
	Operation string
	// Labels are set on the lease object.
	Labels   map[string]string
	Duration time.Duration
	// Now is the clock (tests).
	Now func() time.Time
}

// Lock is a held Lease.
type Lock struct {
	cs       kubernetes.Interface
	opts     Options
	holder   string
	lease    *coordinationv1.Lease
	mu       sync.Mutex
	stop     context.CancelFunc
	cancelOp context.CancelCauseFunc
	done     chan struct{}
	released bool
}

// Identity is this process's holder identity: operation, user, host and pid,
// so a lock message says who holds it and a dead local holder is detectable.
func Identity(operation string) string {
	host, _ := os.Hostname()
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return fmt.Sprintf("kiln %s by %s@%s pid %d", operation, name, host, os.Getpid())
}

// Acquire takes the lease or fails with an exit.Locked error naming the
// holder and since when. The returned context is cancelled if the lease is
// lost; use it for the operation.
func Acquire(ctx context.Context, cs kubernetes.Interface, opts Options) (*Lock, context.Context, error) {
	if opts.Duration <= 0 {
		opts.Duration = DefaultDuration
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	l := &Lock{cs: cs, opts: opts, holder: Identity(opts.Operation), done: make(chan struct{})}
	leases := cs.CoordinationV1().Leases(opts.Namespace)
	for attempt := 0; attempt < 5; attempt++ {
		now := metav1.NewMicroTime(opts.Now())
		cur, err := leases.Get(ctx, opts.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			lease := &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: opts.Name, Namespace: opts.Namespace, Labels: opts.Labels},
				Spec:       l.spec(now, now, 0),
			}
			created, err := leases.Create(ctx, lease, metav1.CreateOptions{FieldManager: "kiln"})
			if apierrors.IsAlreadyExists(err) {
				continue // someone was faster: look again
			}
			if err != nil {
				return nil, nil, fmt.Errorf("create lease %s/%s: %w", opts.Namespace, opts.Name, err)
			}
			l.lease = created
		case err != nil:
			return nil, nil, fmt.Errorf("get lease %s/%s: %w", opts.Namespace, opts.Name, err)
		default:
			if held(cur, opts.Now()) && !deadLocalHolder(cur) {
				return nil, nil, lockedError(cur)
			}
			// Free, expired, or its holder on this host is dead: take it
			// over, guarded by the resourceVersion we read.
			trans := int32(0)
			if cur.Spec.LeaseTransitions != nil {
				trans = *cur.Spec.LeaseTransitions + 1
			}
			upd := cur.DeepCopy()
			upd.Spec = l.spec(now, now, trans)
			updated, err := leases.Update(ctx, upd, metav1.UpdateOptions{FieldManager: "kiln"})
			if apierrors.IsConflict(err) {
				continue
			}
			if err != nil {
				return nil, nil, fmt.Errorf("take over lease %s/%s: %w", opts.Namespace, opts.Name, err)
			}
			l.lease = updated
		}
		opCtx, cancel := context.WithCancelCause(ctx)
		rctx, stop := context.WithCancel(context.Background())
		l.stop, l.cancelOp = stop, cancel
		go l.renew(rctx, cancel)
		return l, opCtx, nil
	}
	return nil, nil, exit.Lock("lease %s/%s is contended; try again", opts.Namespace, opts.Name)
}

func (l *Lock) spec(acquire, renew metav1.MicroTime, transitions int32) coordinationv1.LeaseSpec {
	// Whole seconds, rounded up: a sub-second Duration truncated to 0 would
	// make the lease look expired to every other contender at once.
	secs := int32((l.opts.Duration + time.Second - 1) / time.Second)
	return coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To(l.holder),
		LeaseDurationSeconds: ptr.To(secs),
		AcquireTime:          &acquire,
		RenewTime:            &renew,
		LeaseTransitions:     ptr.To(transitions),
	}
}

// held reports whether the lease has a holder whose renewal has not expired.
func held(l *coordinationv1.Lease, now time.Time) bool {
	s := l.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return false
	}
	return now.Before(s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second))
}

// deadLocalHolder reports whether the holder ran on this host under a pid
// that no longer exists (a killed kiln), so waiting for expiry is pointless.
func deadLocalHolder(l *coordinationv1.Lease) bool {
	if l.Spec.HolderIdentity == nil {
		return false
	}
	h := *l.Spec.HolderIdentity
	host, _ := os.Hostname()
	at := strings.LastIndex(h, "@")
	pidAt := strings.LastIndex(h, " pid ")
	if at < 0 || pidAt < at || h[at+1:pidAt] != host {
		return false
	}
	pid, err := strconv.Atoi(h[pidAt+len(" pid "):])
	if err != nil || pid <= 0 {
		return false
	}
	if pid == os.Getpid() {
		return false
	}
	return !processAlive(pid)
}

func lockedError(l *coordinationv1.Lease) error {
	since := "an unknown time"
	if t := l.Spec.AcquireTime; t != nil {
		since = t.UTC().Format(time.RFC3339)
	}
	return exit.Lock("%s/%s is locked by %s since %s; wait for it to finish (the lease expires %ds after its holder stops renewing it)",
		l.Namespace, l.Name, *l.Spec.HolderIdentity, since, ptr.Deref(l.Spec.LeaseDurationSeconds, 0))
}

// renew keeps the lease fresh at a third of its duration. If the lease is
// lost (someone else took it, or it was deleted), the operation is cancelled.
func (l *Lock) renew(ctx context.Context, cancelOp context.CancelCauseFunc) {
	defer close(l.done)
	t := time.NewTicker(l.opts.Duration / 3)
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.mu.Lock()
		upd := l.lease.DeepCopy()
		now := metav1.NewMicroTime(l.opts.Now())
		upd.Spec.RenewTime = &now
		res, err := l.cs.CoordinationV1().Leases(l.opts.Namespace).Update(ctx, upd, metav1.UpdateOptions{FieldManager: "kiln"})
		if err == nil {
			l.lease = res
			failures = 0
		}
		l.mu.Unlock()
		if err == nil || ctx.Err() != nil {
			continue
		}
		if apierrors.IsConflict(err) && l.stillOurs(ctx) {
			continue // an earlier renewal landed although its response was lost
		}
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			cancelOp(fmt.Errorf("lost lease %s/%s: %w", l.opts.Namespace, l.opts.Name, err))
			return
		}
		// Transient API errors: keep trying until the lease would expire.
		failures++
		if time.Duration(failures)*l.opts.Duration/3 >= l.opts.Duration {
			cancelOp(fmt.Errorf("could not renew lease %s/%s: %w", l.opts.Namespace, l.opts.Name, err))
			return
		}
	}
}

// stillOurs re-reads the lease after a conflict. An update whose response
// never arrived (a client timeout, or a renewal cut off by StopRenewing) may
// still have been applied, leaving l.lease one resourceVersion behind. If
// the holder and acquire time are still ours, the lease is adopted as
// current and stillOurs reports true.
func (l *Lock) stillOurs(ctx context.Context) bool {
	cur, err := l.cs.CoordinationV1().Leases(l.opts.Namespace).Get(ctx, l.opts.Name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	mine := l.lease.Spec.AcquireTime
	s := cur.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity != l.holder || s.AcquireTime == nil || mine == nil || !s.AcquireTime.Equal(mine) {
		return false
	}
	l.mu.Lock()
	l.lease = cur
	l.mu.Unlock()
	return true
}

// Holder is this lock's holder identity.
func (l *Lock) Holder() string { return l.holder }

// StopRenewing ends renewal without releasing (used before the lease's
// namespace is deleted with it).
func (l *Lock) StopRenewing() {
	l.stop()
	<-l.done
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
		upd := l.lease.DeepCopy()
		upd.Spec.HolderIdentity = nil
		upd.Spec.RenewTime = nil
		upd.Spec.AcquireTime = nil
		_, err := l.cs.CoordinationV1().Leases(l.opts.Namespace).Update(ctx, upd, metav1.UpdateOptions{FieldManager: "kiln"})
		if apierrors.IsConflict(err) && attempt == 0 && l.stillOurs(ctx) {
			continue // our last renewal landed unseen: clear from there
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

package lock

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilnctl/kiln/engine/failure"
)

// renewal is the outcome of one renewal attempt.
type renewal struct {
	lease *coordinationv1.Lease // renewed; sent is when the update was sent
	sent  time.Time
	adopt *coordinationv1.Lease // an earlier write of ours landed unseen
	lost  error                 // someone else has the lease, or it is gone
	err   error                 // transient: try again
}

// keep renews the lease every third of its duration until stopped. Each
// attempt has a deadline; independently of any attempt (one may hang
// despite its deadline), a watchdog on the monotonic clock cancels the
// operation when no renewal has succeeded for ⅔ of the duration since the
// last successful one was sent. A contender waits a full duration of
// unchanged lease on its own clock before taking over, so the holder has
// stopped by then with a third of the duration to spare.
func (l *Lock) keep(ctx context.Context, lastOK time.Time) {
	defer close(l.done)
	d := l.opts.Duration
	grace := d * 2 / 3
	watchdog := time.NewTimer(time.Until(lastOK.Add(grace)))
	defer watchdog.Stop()
	next := time.NewTimer(d / 3)
	defer next.Stop()
	results := make(chan renewal, 1)
	var cancelAttempt context.CancelFunc = func() {}
	defer func() { cancelAttempt() }()
	inflight := false
	var lastErr error
	var stamp metav1.MicroTime
	for {
		select {
		case <-ctx.Done():
			return
		case <-watchdog.C:
			why := "no answer"
			if lastErr != nil {
				why = lastErr.Error()
			}
			if l.opts.Gated && l.pause(why) {
				continue // renewals go on; the next one that lands decides
			}
			l.lose(failure.Lock("lost lock %s/%s: could not renew it for %s (⅔ of its %s duration; last error: %s), so this run stopped before another operation could take it over; check the connection to the cluster, then run again",
				l.opts.Namespace, l.opts.Name, grace, d, why))
			return
		case <-next.C:
			if inflight {
				continue
			}
			inflight = true
			limit := min(d/3, time.Until(lastOK.Add(grace)))
			if limit <= 0 {
				limit = d / 3 // past the grace, writes are held: try a whole third
			}
			actx, cancel := context.WithTimeout(ctx, max(limit, time.Millisecond))
			cancelAttempt = cancel
			cur := l.current()
			// Every attempt writes a renewTime of its own, so an attempt
			// whose answer was lost is recognised by it (see renewOnce).
			stamp = l.stamp(later(cur.Spec.RenewTime, &stamp))
			go func() { results <- l.renewOnce(actx, cur, stamp) }()
		case r := <-results:
			inflight = false
			cancelAttempt()
			switch {
			case r.lease != nil:
				l.setLease(r.lease)
				lastOK, lastErr = r.sent, nil
				watchdog.Reset(time.Until(lastOK.Add(grace)))
				next.Reset(d / 3)
				// Preconditioned on the resourceVersion last seen, the
				// renewal proves nobody held the lease in between.
				l.unpause()
			case r.adopt != nil:
				l.setLease(r.adopt)
				next.Reset(0)
			case r.lost != nil:
				l.lose(r.lost)
				return
			default:
				lastErr = r.err
				next.Reset(max(d/15, 10*time.Millisecond))
			}
		}
	}
}

func (l *Lock) lose(cause error) {
	l.mu.Lock()
	l.lost = cause
	if l.paused != nil {
		close(l.paused) // waiting writes wake and see the loss
		l.paused = nil
	}
	l.mu.Unlock()
	l.cancelOp(cause)
	l.opts.logf("%v", cause)
}

// renewOnce sends one renewal of cur (the lease as last written).
func (l *Lock) renewOnce(ctx context.Context, cur *coordinationv1.Lease, stamp metav1.MicroTime) renewal {
	o := &l.opts
	upd := cur.DeepCopy()
	upd.Spec.RenewTime = &stamp
	sent := time.Now()
	res, err := l.leases().Update(ctx, upd, metav1.UpdateOptions{FieldManager: "kiln"})
	switch {
	case err == nil:
		return renewal{lease: res, sent: sent}
	case apierrors.IsNotFound(err):
		return renewal{lost: failure.Lock("lost lock %s/%s: the lease was deleted while this run held it, so this run stopped; check what deleted it, then run again", o.Namespace, o.Name)}
	case !apierrors.IsConflict(err):
		return renewal{err: err}
	}
	// A conflict: either another holder wrote, or an earlier write of ours
	// (answer lost, request retried) landed.
	got, err := l.leases().Get(ctx, o.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return renewal{lost: failure.Lock("lost lock %s/%s: the lease was deleted while this run held it, so this run stopped; check what deleted it, then run again", o.Namespace, o.Name)}
	case err != nil:
		return renewal{err: err}
	}
	h := holderOf(got)
	switch h {
	case l.holder:
		if got.Spec.RenewTime != nil && got.Spec.RenewTime.Equal(&stamp) {
			// This very attempt landed (a retried request): a renewal.
			return renewal{lease: got, sent: sent}
		}
		return renewal{adopt: got}
	case "":
		return renewal{lost: failure.Lock("lost lock %s/%s: it was released by someone else while this run held it, so this run stopped; run again", o.Namespace, o.Name)}
	}
	return renewal{lost: failure.Held(Who(h), acquired(got), "lost lock %s/%s to %s (holding it since %s), so this run stopped; check what that operation does, then run again", o.Namespace, o.Name, Who(h), since(got))}
}

func later(a, b *metav1.MicroTime) *metav1.MicroTime {
	if a == nil || b != nil && b.After(a.Time) {
		return b
	}
	return a
}

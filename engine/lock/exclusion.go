package lock

import (
	"context"
	"fmt"
	"sort"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilnctl/kiln/engine/failure"
)

// checkExclusions reads the leases of opts.Excludes (this lock being held)
// and fails with failure.Locked naming the first live holder. A holder is live
// unless provably dead (deadHolder) or, when its timestamps look stale,
// watched unchanged for its lease's duration.
func (l *Lock) checkExclusions(ctx context.Context) error {
	for _, ex := range l.opts.Excludes {
		leases, err := l.excluded(ctx, ex)
		if err != nil {
			return err
		}
		for _, cur := range leases {
			h := holderOf(&cur)
			if h == "" || cur.Namespace == l.opts.Namespace && cur.Name == l.opts.Name {
				continue
			}
			if ex.ExclusiveOnly && cur.Annotations[AnnotationExclusive] != "true" {
				continue
			}
			if deadHolder(h) {
				l.opts.logf("lease %s/%s: holder %s is a process of this machine that has exited; ignoring it", cur.Namespace, cur.Name, Who(h))
				continue
			}
			live := &cur
			if !plausible(&cur, l.opts.Now(), l.opts.Duration) {
				d := leaseDuration(&cur, l.opts.Duration)
				l.opts.logf("lease %s/%s is held by %s, last renewed %s: waiting up to %s to see whether it is still renewed",
					cur.Namespace, cur.Name, Who(h), renewedAt(&cur), d)
				changed, err := observe(ctx, l.cs.CoordinationV1().Leases(cur.Namespace), &cur, d)
				if err != nil {
					return err
				}
				if changed == nil || holderOf(changed) == "" {
					continue // expired, or released while we watched
				}
				if ex.ExclusiveOnly && changed.Annotations[AnnotationExclusive] != "true" {
					continue
				}
				live = changed
			}
			return failure.Held(Who(holderOf(live)), acquired(live), "%s/%s is locked by %s since %s; %s", live.Namespace, live.Name, Who(holderOf(live)), since(live), ex.Advice)
		}
	}
	return nil
}

// excluded lists the leases an exclusion names, in a stable order.
func (l *Lock) excluded(ctx context.Context, ex Exclusion) ([]coordinationv1.Lease, error) {
	if ex.Name != "" {
		cur, err := l.cs.CoordinationV1().Leases(ex.Namespace).Get(ctx, ex.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("get lease %s/%s: %w", ex.Namespace, ex.Name, err)
		}
		return []coordinationv1.Lease{*cur}, nil
	}
	list, err := l.cs.CoordinationV1().Leases(ex.Namespace).List(ctx, metav1.ListOptions{LabelSelector: ex.Selector})
	if err != nil {
		return nil, fmt.Errorf("list leases %s: %w", ex.Selector, err)
	}
	items := list.Items
	sort.Slice(items, func(i, j int) bool {
		if items[i].Namespace != items[j].Namespace {
			return items[i].Namespace < items[j].Namespace
		}
		return items[i].Name < items[j].Name
	})
	return items, nil
}

package project

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/input"
	"github.com/kilnctl/kiln/engine/lock"
	"github.com/kilnctl/kiln/engine/readiness"
)

// DefaultProgressEvery is how often Bulk reports its summary line unless
// Ops.ProgressEvery says otherwise.
const DefaultProgressEvery = 3 * time.Second

// Bulk runs op (start or suspend) on every project, of tenant if given,
// and returns the projects it did and those that failed (a failure does not
// stop the others), and the failures joined in TENANT/PROJECT order (the
// exit code is the first one's). Every project keeps what a single operation
// guarantees — its own Lease, the ordered steps each confirmed from the
// live objects — while the batch shares what can be shared:
//
//   - one read of the projects (List) and one LIST of the Leases per
//     tenant namespace, from which each lease is taken without reading it
//     again (lock.Options.Seen);
//   - one informer per tenant namespace and kind (readiness.Shared),
//     and one per kind on kiln-system (the routes, by label; the
//     gateway), telling every project's waits when to look, instead of a
//     list and watches per object; an object the informers show missing
//     is applied without a read;
//   - pipelined steps: concurrency bounds the projects whose writes are
//     under way — lease, spec, Secret, and the Deployment's apply (start)
//     or deletion request (suspend). A project frees its slot there and
//     goes on outside it, still in order, each step verified: its
//     Deployment rolls out (or goes) while the next projects write, then
//     its Service and route follow. The rollouts, which the cluster's
//     controllers pace, overlap as they would were every project applied
//     at once.
//
// Resource events stream as each object changes; a log line every
// Ops.ProgressEvery counts the projects done, in progress and failed, and a
// last one gives the time spent per step.
func (o *Ops) Bulk(ctx context.Context, op, tenant string, concurrency int) (ok, failed []string, err error) {
	if op != "start" && op != "suspend" {
		return nil, nil, input.New(failure.Input, input.All, op, "{input}: only for start and suspend, not %s", op)
	}
	if concurrency <= 0 {
		concurrency = defaultBulkLimit
	}
	began := time.Now()
	list, err := o.List(ctx, tenant)
	if err != nil {
		return nil, nil, err
	}
	seen, err := o.seenLeases(ctx, list)
	if err != nil {
		return nil, nil, err
	}
	shared := readiness.NewShared(o.Client)
	// One Ingress informer on kiln-system for every route of the batch,
	// holding this cluster's routes only.
	shared.IngressSelector = o.selector("")
	defer shared.Close()
	base := o.R.Watcher()
	br := &bulkReporter{Reporter: o.R, steps: map[string]*stepTime{},
		w: &readiness.Watcher{Client: o.Client, OnChange: base.OnChange, Shared: shared}}
	bo := *o
	bo.R = br

	done := map[string]string{"start": StateRunning, "suspend": StateSuspended}[op]
	var mu sync.Mutex
	var running int
	errs := map[string]error{}
	summary := func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("%s %s: %d/%d %s, %d in progress, %d failed", op, o.inputName(input.All), len(ok), len(list), done, running, len(failed))
	}
	every := o.ProgressEvery
	if every <= 0 {
		every = DefaultProgressEvery
	}
	tick := time.NewTicker(every)
	stopTick := make(chan struct{})
	var tickers sync.WaitGroup
	tickers.Go(func() {
		for {
			select {
			case <-stopTick:
				return
			case <-tick.C:
				o.R.Logf(event.LevelInfo, "%s", summary())
			}
		}
	})

	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	for _, st := range list {
		r := Ref{Tenant: st.Tenant, Project: st.Project}
		queued := time.Now()
		sem <- struct{}{}
		br.add("queued", time.Since(queued))
		mu.Lock()
		running++
		mu.Unlock()
		wg.Go(func() {
			var once sync.Once
			release := func() { once.Do(func() { <-sem }) }
			defer release()
			s := seen[r]
			var err error
			if op == "start" {
				err = bo.lockedSeen(ctx, r, "start", &s, func(ctx context.Context, l *lock.Lock) error {
					spec, err := bo.setState(ctx, r, "start", l.Holder(), DesiredRunning)
					if err != nil {
						return err
					}
					return bo.provisionThen(ctx, r, spec, release)
				})
			} else {
				err = bo.lockedSeen(ctx, r, "suspend", &s, func(ctx context.Context, l *lock.Lock) error {
					if _, err := bo.setState(ctx, r, "suspend", l.Holder(), DesiredSuspended); err != nil {
						return err
					}
					return bo.deprovisionThen(ctx, r, release)
				})
			}
			mu.Lock()
			defer mu.Unlock()
			running--
			if err != nil {
				o.R.Logf(event.LevelError, "%s %s: %v", op, r, err)
				failed = append(failed, r.String())
				errs[r.String()] = fmt.Errorf("%s: %w", r, err)
				return
			}
			ok = append(ok, r.String())
		})
	}
	wg.Wait()
	tick.Stop()
	close(stopTick)
	tickers.Wait()
	o.R.Logf(event.LevelInfo, "%s", summary())
	o.R.Logf(event.LevelInfo, "%s %s: %d projects in %s; %s", op, o.inputName(input.All), len(list), time.Since(began).Round(time.Millisecond), br.breakdown())
	sort.Strings(ok)
	sort.Strings(failed)
	// In TENANT/PROJECT order, so the exit code (that of the first failed
	// project) does not depend on which finished first.
	joined := make([]error, 0, len(failed))
	for _, f := range failed {
		joined = append(joined, errs[f])
	}
	return ok, failed, errors.Join(joined...)
}

// seenLeases lists the project Leases of the batch's tenant namespaces,
// one LIST each: every project of list gets its Lease, or nil when it has
// none yet.
func (o *Ops) seenLeases(ctx context.Context, list []Status) (map[Ref]*coordinationv1.Lease, error) {
	out := make(map[Ref]*coordinationv1.Lease, len(list))
	byNS := map[string]map[string]*coordinationv1.Lease{}
	for _, st := range list {
		ns := st.Namespace
		if ns == "" {
			ns = Ref{Tenant: st.Tenant}.Namespace()
		}
		have, done := byNS[ns]
		if !done {
			l, err := o.Client.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelProject})
			if err != nil {
				return nil, fmt.Errorf("list leases in %s: %w", ns, err)
			}
			have = map[string]*coordinationv1.Lease{}
			for i := range l.Items {
				have[l.Items[i].Name] = &l.Items[i]
			}
			byNS[ns] = have
		}
		out[Ref{Tenant: st.Tenant, Project: st.Project}] = have[LeaseName(st.Project)]
	}
	return out, nil
}

// bulkReporter is a batch's Reporter: the caller's, with the batch's
// shared watcher, adding up the time spent in each step.
type bulkReporter struct {
	Reporter
	w *readiness.Watcher

	mu    sync.Mutex
	steps map[string]*stepTime
	order []string
}

type stepTime struct {
	n   int
	sum time.Duration
	max time.Duration
}

func (b *bulkReporter) Watcher() *readiness.Watcher { return b.w }

func (b *bulkReporter) Phase(ctx context.Context, name event.Phase, run func(context.Context) error) error {
	start := time.Now()
	err := b.Reporter.Phase(ctx, name, run)
	b.add(string(name), time.Since(start))
	return err
}

func (b *bulkReporter) add(name string, d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.steps[name]
	if !ok {
		s = &stepTime{}
		b.steps[name] = s
		b.order = append(b.order, name)
	}
	s.n++
	s.sum += d
	s.max = max(s.max, d)
}

// breakdown words the time per step: mean and max per project.
func (b *bulkReporter) breakdown() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var parts []string
	for _, name := range b.order {
		s := b.steps[name]
		mean := s.sum / time.Duration(s.n)
		parts = append(parts, fmt.Sprintf("%s mean %s max %s", name, mean.Round(time.Millisecond), s.max.Round(time.Millisecond)))
	}
	return "per step: " + strings.Join(parts, ", ")
}

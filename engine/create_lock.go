package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/kilnctl/kiln/engine/event"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/client-go/kubernetes"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/lock"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/project"
)

// lockPhase is the lock phase: the token dir's file lock first (a second
// create of NAME on this host stops here, failure.Locked, before it writes
// anything, locally or remotely), then the cluster Lease where the cluster
// already exists. A provider whose cluster the infrastructure phase creates
// (aws, fresh) has nowhere to hold the Lease yet: its infrastructure is
// guarded by the provider's own claim, and the Lease is taken as the
// platform phase starts.
func (r *run) lockPhase(ctx context.Context) error {
	if err := r.lockDir(r.cands()[0].Path); err != nil {
		return err
	}
	if r.loc.Client != nil {
		if err := r.acquire(ctx, r.loc.Client); err != nil {
			return err
		}
	}
	if r.td != nil {
		if err := r.lockDir(r.td.Path); err != nil {
			return err
		}
	}
	if r.lock == nil {
		r.e.logf(LevelInfo, "the cluster Lease is taken once the infrastructure phase has created the cluster")
	}
	return nil
}

// lockCluster takes cluster NAME's Lease for operation op ("create",
// "destroy", …). An exclusive operation — one that changes the platform
// under running projects (destroy, upgrade) — also refuses while any
// project operation holds its own Lease: kiln refuses rather than queues.
func (e *Engine) lockCluster(ctx context.Context, cs kubernetes.Interface, op, name string, exclusive bool) (*lock.Lock, context.Context, error) {
	opts := lock.Options{
		Namespace: platform.Namespace, Name: platform.LockName, Operation: op + " " + name,
		Labels: map[string]string{platform.LabelManagedBy: "kiln", platform.LabelCluster: name},
		Logf:   func(f string, a ...any) { e.logf(LevelInfo, f, a...) },
		// The providers' clients carry kubeapi's Transport: an API server
		// restart holds writes back instead of ending the run.
		Gated: true,
	}
	if exclusive {
		opts.Exclusive = true
		// The project Leases of each of the cluster's tenant namespaces
		// (kiln's roles may read Leases only in kiln's namespaces).
		nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: platform.LabelManagedBy + "=kiln," + platform.LabelCluster + "=" + name})
		if err != nil {
			return nil, nil, fmt.Errorf("list namespaces of cluster %s: %w", name, err)
		}
		for _, ns := range nss.Items {
			if !strings.HasPrefix(ns.Name, platform.TenantNamespace("")) {
				continue
			}
			opts.Excludes = append(opts.Excludes, lock.Exclusion{
				Namespace: ns.Name,
				Selector:  platform.LabelCluster + "=" + name + "," + project.LabelProject,
				Advice:    fmt.Sprintf("%s refuses while a project operation runs on the cluster; nothing was changed. Wait for it to finish, then run %s again", op, op),
			})
		}
	}
	return lock.Acquire(ctx, cs, opts)
}

// acquire takes the cluster lock (creating kiln-system first: the Lease
// lives there), then re-reads the platform under the lock and re-decides:
// another run may have finished while this one planned. An answer the user
// gave in plan stands when nothing it was about has changed.
func (r *run) acquire(ctx context.Context, cs kubernetes.Interface) error {
	if r.lock != nil {
		return nil
	}
	// r.mutated is set by ensure when the Namespace is written, and once
	// the lock is held and the decision stands: the phases after this one
	// write. A cancel before (while waiting for the lock, or at a question
	// asked again) changed nothing but the Lease, which is released.
	if err := r.ensure(ctx, cs, r.watcher(cs), platform.NamespaceObject(r.req.Name)); err != nil {
		return err
	}
	r.e.checkpoint(ctx, "after-namespace")
	l, lctx, err := r.e.lockCluster(ctx, cs, "create", r.req.Name, false)
	if err != nil {
		return err
	}
	r.lock, r.lockCtx = l, lctx
	r.e.logf(LevelInfo, "holding lock %s/%s as %s", platform.Namespace, platform.LockName, l.Holder())
	r.e.checkpoint(ctx, "after-lease")
	// A key kept trusted by rotate-key --keep-old goes once its time is up,
	// with the next operation that holds the lock.
	if err := r.e.retireExpiredKey(lctx, cs, r.req.Name, r.req.Timeout); err != nil {
		return err
	}
	st, err := platform.Read(lctx, cs)
	if err != nil {
		return err
	}
	before := r.decision
	out, err := r.decide(lctx, st)
	if err != nil {
		return err
	}
	r.loc.State = st
	if d := out.Decision; d != before && !(before == DecisionFresh && d == DecisionResume) {
		r.decision = d
		r.e.emit(event.DecisionEvent{Decision: d, Reason: "changed while waiting for the lock: " + out.Reason})
	}
	r.mutated = true
	return nil
}

// lockDir takes the file lock of token dir path (once per run): failure.Locked
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

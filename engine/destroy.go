package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/lock"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/project"
	"github.com/kilnctl/kiln/engine/readiness"
)

// DestroyRequest is what Destroy needs.
type DestroyRequest struct {
	Target
	// Yes confirms the destroy in advance (headless).
	Yes bool
	// Timeout bounds the waits for objects to be gone.
	Timeout time.Duration
}

// Destroy removes the platform in reverse order, verifying each object is
// gone, then the infrastructure, then forgets the keyring entry and moves
// the token dir aside (never deletes it).
func (e *Engine) Destroy(ctx context.Context, req DestroyRequest) error {
	ctx = e.traced(ctx)
	req.Target = e.hinted(req.Target)
	d := &destroyRun{current: PhaseDiscover}
	aside, err := e.destroy(ctx, req, d)
	if err != nil && ctx.Err() != nil {
		switch failure.Of(err) {
		case failure.Failed, failure.Interrupted:
			// Ctrl-C or SIGTERM: say what the cluster holds now, read back,
			// and how to finish, instead of the cancelled call's error.
			err = e.destroyInterrupted(ctx, req, d)
		}
	}
	msg := fmt.Sprintf("cluster %s destroyed", req.Name)
	if aside != "" {
		msg += "; token dir moved to " + aside
	}
	return e.finish(err, msg, aside)
}

// destroyRun is how far one destroy got: what its interruption reports.
type destroyRun struct {
	// current is the phase under way.
	current event.Phase
	// loc is where the cluster was found (located says it was).
	loc     Location
	located bool
	// changing is set once the destroy may have changed something.
	changing bool
}

func (e *Engine) destroy(ctx context.Context, req DestroyRequest, d *destroyRun) (string, error) {
	loc, cands, err := e.locate(ctx, req.Target, true)
	var gone *removedError
	if errors.As(err, &gone) {
		d.loc, d.located, d.current, d.changing = gone.Location, true, PhaseCredentials, true
		return e.destroyRemembered(ctx, req, gone.Location, cands)
	}
	if err != nil {
		return "", err
	}
	d.loc, d.located, d.current = loc, true, PhasePlatform
	if infraOnly(loc, req.Name) {
		return "", e.destroyInfraOnly(ctx, req, loc, d)
	}
	cfg := config.Default(req.Name)
	if loc.State.Config != nil {
		cfg = loc.State.Config
	}
	td, _, _ := findTrusted(cands, req.Provider.Name(), req.Name, destroyTrusted(loc.State))
	if !req.Yes {
		q := DestroyQuestion{Provider: req.Provider.Name(), Name: req.Name, Location: loc.Name, Tenants: cfg.Spec.Tenants}
		if td != nil {
			q.TokenDir = td.Path
		}
		if inv, err := project.TakeInventory(ctx, loc.Client, req.Name, cfg.Spec.Tenants); err == nil {
			q.Projects = inv.Summary(5)
		} else {
			e.logf(LevelWarn, "counting the projects destroy would remove: %v", err)
		}
		ok := false
		if e.Confirm != nil {
			if ok, err = e.Confirm.ConfirmDestroy(ctx, q); err != nil {
				return "", err
			}
		}
		if !ok {
			what := ""
			if q.Projects != "" {
				what = " with its " + q.Projects
			}
			return "", inputErr(failure.Confirm, InputYes, req.Name, "destroying cluster %s (%s %s) removes its platform and every tenant namespace%s; nothing was changed. Pass {input} to confirm", req.Name, locationNoun(req.Provider), loc.Name, what)
		}
	}
	cs := loc.Client
	d.changing = true
	if loc.State.Terminating {
		// An earlier destroy deleted kiln-system and stopped before it was
		// gone. Nothing can be created in a terminating namespace — no Lease,
		// no install — so no lock is needed to finish: confirm it gone.
		err = e.phase(ctx, PhasePlatform, func(ctx context.Context) error {
			e.logf(LevelInfo, "namespace %s is already being deleted (an earlier destroy); waiting for it and the tenant namespaces to be gone", platform.Namespace)
			tenants, err := strayTenants(ctx, cs, req.Name, nil)
			if err != nil {
				return err
			}
			// Tenant namespaces first, then kiln-system (held by the
			// destroy finalizer until they are gone).
			return e.finishNamespaces(ctx, cs, e.watcher(cs), req.Timeout, tenants, true)
		})
		if err != nil {
			return "", err
		}
		return e.destroyRest(ctx, req, loc, td, d)
	}
	// destroy changes the platform: project operations refuse while it
	// holds the cluster lease, and it refuses while one runs (it does not
	// wait: kiln refuses rather than queues).
	l, lctx, err := e.lockCluster(ctx, cs, "destroy", req.Name, true)
	if err != nil {
		return "", err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = l.Release(rctx) // the lease is usually gone with its namespace
	}()
	err = e.phase(lctx, PhasePlatform, func(ctx context.Context) error {
		if loc.State.PartlyRemoved() {
			e.logf(LevelInfo, "an earlier destroy of %s began at %s and did not finish; finishing it", req.Name, loc.State.DestroyStarted.Format(time.RFC3339))
		}
		// Mark kiln-system first: once kiln-auth is gone, a rerun still
		// knows which token dir belongs to the platform it finishes.
		ns, err := markDestroying(ctx, cs, loc.State, e.now())
		if err != nil {
			return err
		}
		e.checkpoint(ctx, "destroy-marked")
		return e.removePlatform(ctx, cs, req, cfg, l, ns)
	})
	if err != nil {
		err = l.Explain(err)
		return "", err
	}
	l.Gone() // kiln-system, the Lease's namespace, is confirmed gone
	return e.destroyRest(ctx, req, loc, td, d)
}

// destroyRest removes the infrastructure, forgets the keyring entry and
// moves the token dir aside, once the platform is gone.
func (e *Engine) destroyRest(ctx context.Context, req DestroyRequest, loc Location, td *creds.TokenDir, d *destroyRun) (string, error) {
	d.current = PhaseInfrastructure
	err := e.phase(ctx, PhaseInfrastructure, func(ctx context.Context) error {
		skipped, err := req.Provider.DestroyInfrastructure(ctx, req.Name, loc.Name, e.reporter())
		if err == nil && skipped {
			return skip("kiln did not create %s %s; it stays", locationNoun(req.Provider), loc.Name)
		}
		return err
	})
	if err != nil {
		return "", err
	}
	e.checkpoint(ctx, "after-infrastructure-delete")
	d.current = PhaseCredentials
	return e.forgetCluster(ctx, req, td)
}

// destroyRemembered finishes a destroy whose cluster is already gone from
// loc, the location kiln remembered for it (an earlier destroy stopped
// after the platform was removed): it forgets the keyring entry and moves
// aside the token dir of that cluster at loc. Nothing in a cluster is
// changed, so no confirmation is asked.
func (e *Engine) destroyRemembered(ctx context.Context, req DestroyRequest, loc Location, cands []candidate) (string, error) {
	var td *creds.TokenDir
	for _, c := range cands {
		d, err := loadCandidate(c, req.Provider.Name(), req.Name)
		if err != nil {
			e.logf(LevelWarn, "token dir %s (%s): %v; left as it is", c.Path, c.Source, err)
			continue
		}
		if d != nil && d.Manifest.Location == loc.Name {
			td = d
			break
		}
	}
	_ = e.phase(ctx, PhasePlatform, func(context.Context) error {
		return skip("already removed: no kiln cluster %s in %s %s", req.Name, locationNoun(req.Provider), loc.Name)
	})
	return e.forgetCluster(ctx, req, td)
}

// forgetCluster is destroy's last step: it forgets the keyring entry and
// moves td (when found) aside.
func (e *Engine) forgetCluster(ctx context.Context, req DestroyRequest, td *creds.TokenDir) (string, error) {
	var aside string
	err := e.phase(ctx, PhaseCredentials, func(ctx context.Context) error {
		if e.Keyring != nil {
			if err := e.Keyring.Delete(req.Provider.Name(), req.Name); err != nil {
				e.logf(LevelWarn, "keyring: %v", err)
			}
		}
		e.checkpoint(ctx, "after-keyring-forget")
		if td == nil {
			return skip("no token dir with a trusted key found")
		}
		// Not while a create on this host holds the directory.
		dl, err := creds.LockDir(td.Path, lock.Identity("destroy "+req.Name))
		if err != nil {
			return err
		}
		defer dl.Unlock()
		aside, err = creds.MoveAside(td.Path, e.now())
		if err != nil {
			return err
		}
		e.logf(LevelInfo, "token dir %s moved to %s (kept, not deleted)", td.Path, aside)
		return nil
	})
	return aside, err
}

// DestroyFinalizer holds kiln-system in Terminating, once destroy has
// deleted it, until every tenant namespace is confirmed gone (see
// removePlatform).
const DestroyFinalizer = "kiln.dev/destroy"

// removePlatform deletes the platform, confirming every object gone, with
// everything that can go in parallel going in parallel:
//
//  1. at once (in parallel requests): every tenant namespace and the
//     gateway's objects; then kiln-config (the "installed" marker)
//     confirmed gone, then kiln-auth: the marker never exists without the
//     key it was installed with. The two ConfigMaps own nothing, so they
//     are deleted with background propagation: the API server removes
//     each in its DELETE instead of leaving it to a garbage collector
//     round. The Lease, in kiln-system, is renewed throughout.
//  2. kiln-system itself, with finalizer kiln.dev/destroy put on it first.
//     From its deletion on, the terminating namespace refuses every new
//     object in it — a Lease, a kiln-config — so no other run can take the
//     lock or install, and destroy needs no renewal; the finalizer keeps it
//     terminating (its other contents go meanwhile) until
//  3. every tenant namespace and gateway object is confirmed gone; then
//     destroy removes its finalizer and confirms kiln-system gone.
//
// So the lock's protection lasts until the last tenant namespace is gone,
// and the namespaces terminate side by side, as kubectl delete of all of
// them would. A namespace's deletion takes at least the namespace
// controller's 5 s grace from its DELETE, so the sooner kiln-system's
// DELETE follows the tenants', the sooner destroy ends: nothing before it
// waits for more than its own requests.
//
// ns is kiln-system as the destroy mark left it (nil: read it).
func (e *Engine) removePlatform(ctx context.Context, cs kubernetes.Interface, req DestroyRequest, cfg *config.ClusterConfig, l *lock.Lock, ns *corev1.Namespace) error {
	refs := platformRefs(req.Name, cfg)
	// Also remove tenant namespaces of tenants the config no longer lists
	// but that this cluster created.
	extra, err := strayTenants(ctx, cs, req.Name, cfg.Spec.Tenants)
	if err != nil {
		return err
	}
	var tenants, gateway []readiness.Ref
	for i := len(refs) - 1; i >= 1; i-- {
		ref := refs[i]
		switch {
		case ref.Kind == readiness.KindNamespace:
			tenants = append(tenants, ref)
		case ref.Name == platform.ConfigMapName || ref.Name == platform.AuthName:
		default:
			gateway = append(gateway, ref)
		}
	}
	tenants = append(tenants, extra...)
	w := e.watcher(cs)
	if err := deleteAll(ctx, cs, append(append([]readiness.Ref{}, tenants...), gateway...)); err != nil {
		return err
	}
	e.checkpoint(ctx, "after-tenants-delete")
	for _, name := range []string{platform.ConfigMapName, platform.AuthName} {
		ref := readiness.Ref{Kind: readiness.KindConfigMap, Namespace: platform.Namespace, Name: name}
		if err := platform.DeleteOwnerless(ctx, cs, ref); err != nil {
			return err
		}
		if err := e.waitGone(ctx, w, req.Timeout, ref); err != nil {
			return err
		}
		e.checkpoint(ctx, "after-"+name+"-delete")
	}
	held, err := holdNamespace(ctx, cs, platform.Namespace, true, ns)
	if err != nil {
		return err
	}
	e.checkpoint(ctx, "before-namespace-delete")
	l.StopRenewing()
	del := platform.Delete
	if held != nil && held.DeletionTimestamp == nil {
		del = platform.DeleteLive // just written, not terminating: no read first
	}
	if err := del(ctx, cs, refs[0]); err != nil {
		return err
	}
	e.checkpoint(ctx, "after-namespace-delete")
	// Deleted above, in this run: confirm them gone without asking again.
	return e.finishNamespaces(ctx, cs, w, req.Timeout, append(tenants, gateway...), false)
}

// finishNamespaces confirms refs gone (the tenant namespaces), deleting
// them first when del is set (an earlier run deleted them; deleting again
// is a no-op), then lets kiln-system go and confirms it gone.
func (e *Engine) finishNamespaces(ctx context.Context, cs kubernetes.Interface, w *readiness.Watcher, timeout time.Duration, refs []readiness.Ref, del bool) error {
	if del {
		if err := deleteAll(ctx, cs, refs); err != nil {
			return err
		}
	}
	if err := e.waitGone(ctx, w, timeout, refs...); err != nil {
		return err
	}
	if _, err := holdNamespace(ctx, cs, platform.Namespace, false, nil); err != nil {
		return err
	}
	return e.deleteAndWait(ctx, cs, w, timeout, platform.NamespaceObject("").Ref)
}

// holdNamespace adds (hold) or removes DestroyFinalizer on namespace ns,
// with resourceVersion-preconditioned updates, starting from seen when
// set. A namespace already gone needs neither.
func holdNamespace(ctx context.Context, cs kubernetes.Interface, ns string, hold bool, seen *corev1.Namespace) (*corev1.Namespace, error) {
	what := fmt.Sprintf("%s finalizer %s", map[bool]string{true: "add", false: "remove"}[hold], DestroyFinalizer)
	return updateNamespace(ctx, cs, ns, what, seen, func(cur *corev1.Namespace) bool {
		if slices.Contains(cur.Finalizers, DestroyFinalizer) == hold {
			return false
		}
		if hold {
			cur.Finalizers = append(cur.Finalizers, DestroyFinalizer)
		} else {
			cur.Finalizers = slices.DeleteFunc(cur.Finalizers, func(f string) bool { return f == DestroyFinalizer })
		}
		return true
	})
}

// markDestroying records on kiln-system that a destroy began and which
// keys the platform trusted then (kept from an earlier destroy's mark
// when kiln-auth is already gone). It returns kiln-system as marked (nil
// when it is gone).
func markDestroying(ctx context.Context, cs kubernetes.Interface, st *platform.State, now time.Time) (*corev1.Namespace, error) {
	ids := st.KeyIDs()
	if len(ids) == 0 {
		ids = st.DestroyKeyIDs
	}
	return updateNamespace(ctx, cs, platform.Namespace, "mark destroy", nil, func(cur *corev1.Namespace) bool {
		if _, ok := cur.Annotations[platform.AnnotationDestroyKeyIDs]; ok {
			return false // the first destroy's mark stands
		}
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[platform.AnnotationDestroyKeyIDs] = strings.Join(ids, ",")
		cur.Annotations[platform.AnnotationDestroyStarted] = now.UTC().Format(time.RFC3339)
		return true
	})
}

// updateNamespace applies change to namespace ns with
// resourceVersion-preconditioned updates (re-read on a conflict); change
// returns false when there is nothing to do. The first attempt starts
// from seen when set (the namespace as this run last wrote it) instead of
// a read; a stale one costs a conflict and a read. A namespace already
// gone needs nothing. It returns the namespace as written or, with
// nothing to do, as read (nil when gone).
func updateNamespace(ctx context.Context, cs kubernetes.Interface, ns, what string, seen *corev1.Namespace, change func(*corev1.Namespace) bool) (*corev1.Namespace, error) {
	for attempt := 0; ; attempt++ {
		var cur *corev1.Namespace
		var err error
		if attempt == 0 && seen != nil {
			cur = seen.DeepCopy()
		} else {
			cur, err = cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		}
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("get namespace %s: %w", ns, err)
		}
		if !change(cur) {
			return cur, nil
		}
		out, err := cs.CoreV1().Namespaces().Update(ctx, cur, metav1.UpdateOptions{FieldManager: platform.FieldManager})
		switch {
		case err == nil:
			return out, nil
		case apierrors.IsNotFound(err):
			return nil, nil
		case apierrors.IsConflict(err) && attempt < 5:
			continue
		}
		return nil, fmt.Errorf("namespace %s: %s: %w", ns, what, err)
	}
}

// destroyTrusted are the keys whose token dir destroy moves aside: those
// kiln-auth trusts, or, once an interrupted destroy removed kiln-auth,
// those kiln-system's destroy mark recorded.
func destroyTrusted(st *platform.State) map[string]string {
	if st == nil {
		return nil
	}
	if len(st.Keys) > 0 || st.DestroyKeyIDs == nil {
		return st.Keys
	}
	out := make(map[string]string, len(st.DestroyKeyIDs))
	for _, id := range st.DestroyKeyIDs {
		out[id] = ""
	}
	return out
}

// deleteAndWait deletes refs together and confirms every one gone with w.
func (e *Engine) deleteAndWait(ctx context.Context, cs kubernetes.Interface, w *readiness.Watcher, timeout time.Duration, refs ...readiness.Ref) error {
	if err := deleteAll(ctx, cs, refs); err != nil {
		return err
	}
	return e.waitGone(ctx, w, timeout, refs...)
}

// waitGone confirms every one of refs gone with w, within timeout.
func (e *Engine) waitGone(ctx context.Context, w *readiness.Watcher, timeout time.Duration, refs ...readiness.Ref) error {
	if len(refs) == 0 {
		return nil
	}
	wctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	_, err := w.Until(wctx, refs, readiness.Gone)
	return err
}

// deleteAll asks for the deletion of every one of refs at once (no
// DELETE waits for another's answer) and returns the first failure in
// refs' order.
func deleteAll(ctx context.Context, cs kubernetes.Interface, refs []readiness.Ref) error {
	if len(refs) == 1 {
		return platform.Delete(ctx, cs, refs[0])
	}
	errs := make([]error, len(refs))
	var wg sync.WaitGroup
	for i, ref := range refs {
		wg.Go(func() { errs[i] = platform.Delete(ctx, cs, ref) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// strayTenants finds tenant namespaces labelled for this cluster that the
// config does not list (a tenant removed by hand from kiln-config).
func strayTenants(ctx context.Context, cs kubernetes.Interface, name string, tenants []string) ([]readiness.Ref, error) {
	list, err := cs.CoreV1().Namespaces().List(ctx, listByCluster(name))
	if err != nil {
		return nil, fmt.Errorf("list namespaces of cluster %s: %w", name, err)
	}
	known := map[string]bool{platform.Namespace: true}
	for _, t := range tenants {
		known[platform.TenantNamespace(t)] = true
	}
	var out []readiness.Ref
	for _, ns := range list.Items {
		if !known[ns.Name] {
			out = append(out, readiness.Ref{Kind: readiness.KindNamespace, Name: ns.Name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

package engine

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/project"
	"github.com/kilnctl/kiln/engine/readiness"
)

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
		// The front door is decided once, here, where the cluster exists
		// (an aws cluster only since the infrastructure phase), and
		// recorded in kiln-config as the effective value.
		cfg, err := r.e.resolveExpose(ctx, r.req.Provider, cs, r.cfg)
		if err != nil {
			return err
		}
		r.cfg = cfg
		auth, err := platform.AuthObject(name, r.authKeys, r.authTable)
		if err != nil {
			return err
		}
		if err := r.ensure(ctx, cs, w, auth); err != nil {
			return err
		}
		if err := r.verifyAuth(ctx, cs); err != nil {
			return err
		}
		r.e.checkpoint(ctx, "after-auth")
		cfgObj, err := platform.ConfigObject(name, r.cfg)
		if err != nil {
			return err
		}
		cfgObj = platform.Stamp(cfgObj, r.e.version())
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
		r.e.checkpoint(ctx, "after-config")
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
	r.e.checkpoint(ctx, "after-commit")
	tenants := platform.TenantObjects(name, r.cfg.Spec.Tenants)
	if err := r.ensureAll(ctx, cs, w, tenants); err != nil {
		return err
	}
	r.e.checkpoint(ctx, "after-tenants")
	// NetworkPolicies before the gateway: its pods never run unfenced.
	if err := r.ensureAll(ctx, cs, w, platform.PolicyObjects(name, r.cfg)); err != nil {
		return err
	}
	for _, ref := range platform.StaleTenantPolicies(r.cfg) {
		// Read first: on a converged platform the stale policy is absent,
		// and a re-run should send no write but its Lease's.
		_, err := cs.NetworkingV1().NetworkPolicies(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", ref, err)
		}
		if err := platform.Delete(ctx, cs, ref); err != nil {
			return err
		}
	}
	table := r.authTable
	if table == nil && r.loc.State != nil {
		table = r.loc.State.Table // continue without a sync: the table kiln-auth holds
	}
	for _, obj := range platform.WithTenantTable(platform.GatewayObjects(name, r.cfg, r.e.Version), table) {
		if err := r.ensure(ctx, cs, w, obj); err != nil {
			return err
		}
		r.e.checkpoint(ctx, "after-"+strings.ToLower(obj.Ref.Kind))
	}
	if r.decision == DecisionContinue {
		// A platform the previous kiln made routes its projects straight
		// from tenant-namespace Ingresses: move them behind the gateway,
		// each new route ready before the old one goes.
		ops := &project.Ops{Client: cs, Cluster: name, Config: r.cfg, Timeout: r.req.Timeout,
			R: &reporter{e: r.e, w: w}, Now: r.e.Now, PlatformHeld: true}
		n, err := ops.MoveRoutes(ctx)
		if err != nil {
			return err
		}
		if n > 0 {
			r.mutated = true
			r.e.checkpoint(ctx, "after-routes")
		}
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
	if !st.Table.Equal(r.authTable) {
		return fmt.Errorf("read back %s/%s: its %s is not the tenant table kiln applied", platform.Namespace, platform.AuthName, platform.AuthTenantsKey)
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
		wrote, err := platform.Ensure(ctx, cs, obj)
		if wrote {
			r.mutated = true
		}
		if err != nil {
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

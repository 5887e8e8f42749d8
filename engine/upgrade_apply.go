package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/lock"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/readiness"
)

// applyPlatform applies the platform part of the plan in dependency order,
// each step verified before the next: kiln-system, tenant tokens (signed
// with the key the cluster trusts, the token dir rewritten as one unit),
// tenant namespaces, removed tenants (namespace watched gone, then its
// token), the gateway (rolled out and watched).
func (u *upgrade) applyPlatform(ctx context.Context, p *upgradePlan) error {
	e := u.e
	if p.system != nil {
		if err := u.ensure(ctx, *p.system); err != nil {
			return err
		}
	}
	if p.tokens.table || len(p.addTokens) > 0 || len(p.dropTokens) > 0 || u.td.Manifest.State == creds.StatePending {
		// Not while a create on this host holds the directory.
		dl, err := creds.LockDir(u.td.Path, lock.Identity("upgrade "+u.req.Name))
		if err != nil {
			return err
		}
		defer dl.Unlock()
	}
	if u.td.Manifest.State == creds.StatePending {
		// Its key is trusted (kiln-auth has it, kiln-config exists): an
		// earlier create died before committing.
		if err := creds.Commit(u.td.Path, u.loc.State.Keys); err != nil {
			return err
		}
		u.td.Manifest.State = creds.StateCommitted
		e.logf(LevelInfo, "promoted pending token dir %s: the cluster trusts its key %s", u.td.Path, u.td.Manifest.KeyID)
	}
	if p.tokens.table {
		// The tenant table first, then the token dir, then the table
		// holding only its tokens (syncTenantTokens): removed tenants'
		// tokens are refused from here on.
		td, table, err := e.syncTenantTokens(ctx, u.loc.Client, u.req.Name, u.req.Timeout, u.td.Path, p.cfg.Spec.Tenants, u.req.RotateTokens, p.st)
		if err != nil {
			return err
		}
		u.td = td
		if len(p.addTokens) > 0 {
			e.logf(LevelInfo, "signed tokens for tenants %s with trusted key %s into %s", strings.Join(p.addTokens, ", "), td.Manifest.KeyID, td.Path)
		}
		u.e.checkpoint(ctx, "upgrade-after-tokens")
		if !table.Equal(p.st.Table) {
			// Roll the gateway with the new table's digest, so no pod
			// keeps an older table than kiln-auth's once it rolled out.
			p.gateway = platform.WithTenantTable(platform.GatewayObjects(u.req.Name, p.cfg, e.Version), table)
		}
	}
	if len(p.addTenants) > 0 {
		if err := u.ensure(ctx, p.addTenants...); err != nil {
			return err
		}
		u.e.checkpoint(ctx, "upgrade-after-tenants")
	}
	if len(p.strayRoutes) > 0 {
		// A removed tenant's routes first: nothing routes to a project
		// while its namespace goes.
		for _, ref := range p.strayRoutes {
			if err := platform.Delete(ctx, u.loc.Client, ref); err != nil {
				return err
			}
		}
		wctx, cancel := withTimeout(ctx, u.req.Timeout)
		_, err := u.watcher().Until(wctx, p.strayRoutes, readiness.Gone)
		cancel()
		if err != nil {
			return err
		}
	}
	if len(p.removeTenants) > 0 {
		for _, ref := range p.removeTenants {
			if err := platform.Delete(ctx, u.loc.Client, ref); err != nil {
				return err
			}
		}
		wctx, cancel := withTimeout(ctx, u.req.Timeout)
		_, err := u.watcher().Until(wctx, p.removeTenants, readiness.Gone)
		cancel()
		if err != nil {
			return err
		}
		u.e.checkpoint(ctx, "upgrade-after-tenants-removed")
	}
	if len(p.dropTokens) > 0 {
		td, err := creds.RemoveTenants(u.td.Path, p.dropTokens)
		if err != nil {
			return err
		}
		u.td = td
		e.logf(LevelInfo, "removed the tokens of tenants %s from %s", strings.Join(p.dropTokens, ", "), td.Path)
		u.e.checkpoint(ctx, "upgrade-after-tokens-removed")
	}
	if len(p.policies) > 0 {
		if err := u.ensure(ctx, p.policies...); err != nil {
			return err
		}
		u.e.checkpoint(ctx, "upgrade-after-policies")
	}
	if len(p.stalePolicies) > 0 {
		for _, ref := range p.stalePolicies {
			if err := platform.Delete(ctx, u.loc.Client, ref); err != nil {
				return err
			}
		}
		wctx, cancel := withTimeout(ctx, u.req.Timeout)
		_, err := u.watcher().Until(wctx, p.stalePolicies, readiness.Gone)
		cancel()
		if err != nil {
			return err
		}
	}
	for _, obj := range p.gateway {
		if err := u.ensure(ctx, obj); err != nil {
			return err
		}
		u.e.checkpoint(ctx, "upgrade-after-"+strings.ToLower(obj.Ref.Kind))
	}
	return nil
}

// applyProjects applies the routes the plan compared (each new route
// ready before the old Ingress it replaces is deleted), then restacks the
// projects on a changed stack (Restack).
func (u *upgrade) applyProjects(ctx context.Context, p *upgradePlan) error {
	if len(p.routes) == 0 && len(p.restack) == 0 {
		return skip("no project changes")
	}
	if len(p.routes) > 0 {
		if err := p.ops.ApplyRoutes(ctx, p.routes); err != nil {
			return err
		}
		u.e.checkpoint(ctx, "upgrade-after-ingresses")
	}
	for _, s := range p.restack {
		if err := p.ops.Restack(ctx, s.Ref, s.Spec.Stack.Name); err != nil {
			return fmt.Errorf("restack project %s: %w", s.Ref, err)
		}
		u.e.checkpoint(ctx, "upgrade-after-restack")
	}
	return nil
}

// applyConfig writes kiln-config, last, and reads it back: the config and
// the version record must be what was applied.
func (u *upgrade) applyConfig(ctx context.Context, p *upgradePlan) error {
	if p.cfgObj == nil {
		return skip("kiln-config already holds this config and version")
	}
	if err := u.ensure(ctx, *p.cfgObj); err != nil {
		return err
	}
	st, err := platform.Read(ctx, u.loc.Client)
	if err != nil {
		return err
	}
	if !st.Installed || len(config.Diff(st.Config, p.cfg)) > 0 || st.Version != u.e.version() || st.Schema != platform.SchemaVersion {
		return fmt.Errorf("read back %s/%s: it does not hold the config and version kiln applied", platform.Namespace, platform.ConfigMapName)
	}
	u.e.checkpoint(ctx, "upgrade-after-config")
	return nil
}

// ensure applies objects, then waits until all are ready.
func (u *upgrade) ensure(ctx context.Context, objs ...platform.Object) error {
	var refs []readiness.Ref
	for _, obj := range objs {
		if _, err := platform.Ensure(ctx, u.loc.Client, obj); err != nil {
			return err
		}
		refs = append(refs, obj.Ref)
	}
	wctx, cancel := withTimeout(ctx, u.req.Timeout)
	defer cancel()
	_, err := u.watcher().Until(wctx, refs, readiness.Ready)
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/input"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/project"
	"github.com/kilnctl/kiln/engine/readiness"
	"github.com/kilnctl/kiln/internal/human"
)

// upgradePlan is what an upgrade changes, in apply order, with what the
// apply needs to do it.
type upgradePlan struct {
	changes []PlanChange
	// infra are the provider's infrastructure changes (InfraUpgrader),
	// applied first.
	infra []PlanChange
	// notes are warnings shown with the plan (projects left on an old
	// stack, say).
	notes []string
	cfg   *config.ClusterConfig // the desired config
	ops   *project.Ops          // project operations under cfg

	system    *platform.Object // kiln-system, when it changes
	addTokens []string         // tenants to sign tokens for
	// tokens is the tenant-table protocol's work (syncTenantTokens): the
	// tokens issued with new token ids, and whether tenants.json changes.
	tokens        tokenWork
	st            *platform.State   // as read by the plan (under the lock on apply)
	addTenants    []platform.Object // tenant namespaces to create or fix
	removeTenants []readiness.Ref   // tenant namespaces to delete
	// strayRoutes are the routes (kiln-system) of removed tenants'
	// projects, deleted before those tenants' namespaces.
	strayRoutes []readiness.Ref
	dropTokens  []string // tenants whose tokens go
	// blocked are the projects of removed tenants (refused unless
	// DeleteProjects).
	blocked []string
	// policies are NetworkPolicies to create or fix (a new tenant's, a
	// changed tenantIsolation); stalePolicies go (isolation back to
	// gateway).
	policies      []platform.Object
	stalePolicies []readiness.Ref
	gateway       []platform.Object
	// routes are the projects' routes to create or fix and the previous
	// kiln's tenant-namespace Ingresses to delete once those are ready.
	routes  []project.RouteChange
	restack []project.Recorded // restacked (Restack)
	cfgObj  *platform.Object   // kiln-config, when it changes
	// needRestack are the projects on a changed stack that stay on it.
	needRestack []string
}

// plan computes the plan from the cluster as it is now. It writes
// nothing: GETs, LISTs and server-side dry-run applies only.
func (u *upgrade) plan(ctx context.Context) (*upgradePlan, error) {
	e, req, cs := u.e, u.req, u.loc.Client
	st, err := platform.Read(ctx, cs)
	if err != nil {
		return nil, err
	}
	if !st.Installed || st.Config == nil {
		return nil, fmt.Errorf("read %s/%s: the platform is no longer installed", platform.Namespace, platform.ConfigMapName)
	}
	if err := e.checkVersion(st, req.Name); err != nil {
		return nil, err
	}
	cfg := st.Config
	if u.userCfg != nil {
		// A file that leaves expose out keeps the recorded front door.
		cfg = u.userCfg.KeepRecorded(st.Config)
	}
	p := &upgradePlan{cfg: cfg}
	p.ops = &project.Ops{Client: cs, Cluster: req.Name, Config: cfg, Timeout: req.Timeout,
		Provider: req.Provider.Name(), Location: u.loc.Name, At: req.Provider.Nouns().Target,
		R: &reporter{e: e, w: u.watcher()}, Now: e.Now, PlatformHeld: true}
	if err := u.planInfrastructure(ctx, p); err != nil {
		return nil, err
	}
	add := func(obj platform.Object, message string) (bool, error) {
		ch, err := platform.Plan(ctx, cs, obj)
		if err != nil || ch.Action == "" {
			return false, err
		}
		p.changes = append(p.changes, PlanChange{Action: ch.Action, Kind: obj.Ref.Kind, Namespace: obj.Ref.Namespace, Name: obj.Ref.Name, Fields: ch.Fields, Message: message})
		return true, nil
	}
	sys := platform.NamespaceObject(req.Name)
	if changed, err := add(sys, "the platform namespace"); err != nil {
		return nil, err
	} else if changed {
		p.system = &sys
	}

	// Tenants: tokens first (signed with the key the cluster trusts), then
	// namespaces; removed tenants' namespaces, then their tokens.
	td, err := loadCandidate(candidate{Path: u.td.Path, Source: "token dir", Forget: u.e.forgetHint(req.Provider.Name(), req.Name)}, req.Provider.Name(), req.Name)
	if err != nil {
		return nil, err
	}
	u.td = td
	p.st = st
	if p.tokens, err = planTokens(td, cfg.Spec.Tenants, st.Table, req.RotateTokens); err != nil {
		return nil, err
	}
	for _, t := range req.RotateTokens {
		if !slices.Contains(cfg.Spec.Tenants, t) {
			return nil, inputErr(failure.Input, input.RotateToken, t, "{input} %s: the platform has no tenant %s (tenants: %s)", t, t, strings.Join(cfg.Spec.Tenants, ", "))
		}
	}
	for _, t := range p.tokens.issue {
		if !td.Manifest.HasTenant(t) {
			p.addTokens = append(p.addTokens, t)
			p.changes = append(p.changes, PlanChange{Action: platform.ActionCreate, Kind: KindToken, Name: t,
				Message: fmt.Sprintf("token of tenant %s, signed with trusted key %s and a new token id, added to %s", t, td.Manifest.KeyID, td.Path)})
			continue
		}
		why := "it is not current in kiln-auth's tenant table"
		switch {
		case slices.Contains(req.RotateTokens, t):
			why = e.inputName(input.RotateToken) + ": the old token is refused once the new one is in place"
		case st.Table == nil:
			why = "kiln-auth has no tenant table yet (a platform of an earlier kiln): tokens get the platform id and a token id"
		}
		p.changes = append(p.changes, PlanChange{Action: platform.ActionUpdate, Kind: KindToken, Name: t,
			Message: fmt.Sprintf("token of tenant %s issued again with key %s and a new token id (%s)", t, td.Manifest.KeyID, why)})
	}
	if p.tokens.table {
		action := platform.ActionUpdate
		p.changes = append(p.changes, PlanChange{Action: action, Kind: readiness.KindConfigMap, Namespace: platform.Namespace, Name: platform.AuthName,
			Fields:  []string{"data." + platform.AuthTenantsKey},
			Message: "tenant table: new token ids first, then only the token dir's tokens accepted"})
	}
	for _, obj := range platform.TenantObjects(req.Name, cfg.Spec.Tenants) {
		changed, err := add(obj, "tenant "+strings.TrimPrefix(obj.Ref.Name, config.TenantNamespacePrefix))
		if err != nil {
			return nil, err
		}
		if changed {
			p.addTenants = append(p.addTenants, obj)
		}
	}
	specs, err := p.ops.Specs(ctx)
	if err != nil {
		return nil, err
	}
	stray, err := strayTenants(ctx, cs, req.Name, cfg.Spec.Tenants)
	if err != nil {
		return nil, err
	}
	for _, ref := range stray {
		tenant := strings.TrimPrefix(ref.Name, config.TenantNamespacePrefix)
		var projects []string
		for _, s := range specs {
			if s.Ref.Tenant == tenant {
				projects = append(projects, s.Ref.String())
			}
		}
		msg := fmt.Sprintf("tenant %s removed: its namespace is deleted", tenant)
		if len(projects) > 0 {
			msg += fmt.Sprintf(", with its project%s %s", human.Plural(len(projects)), strings.Join(projects, ", "))
			p.blocked = append(p.blocked, projects...)
		}
		p.removeTenants = append(p.removeTenants, ref)
		p.changes = append(p.changes, PlanChange{Action: platform.ActionDelete, Kind: ref.Kind, Name: ref.Name, Message: msg})
	}
	stale, err := p.ops.StrayRoutes(ctx)
	if err != nil {
		return nil, err
	}
	for _, ref := range stale {
		p.strayRoutes = append(p.strayRoutes, ref)
		p.changes = append(p.changes, PlanChange{Action: platform.ActionDelete, Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name,
			Message: fmt.Sprintf("the route of project %s, whose tenant is removed, goes before the tenant's namespace", strings.Replace(ref.Name, ".", "/", 1))})
	}
	for _, t := range td.Manifest.Tenants {
		if !slices.Contains(cfg.Spec.Tenants, t) {
			p.dropTokens = append(p.dropTokens, t)
			p.changes = append(p.changes, PlanChange{Action: platform.ActionDelete, Kind: KindToken, Name: t,
				Message: fmt.Sprintf("token of removed tenant %s deleted from %s", t, td.Path)})
		}
	}

	// NetworkPolicies before the gateway, as create applies them: a new
	// tenant's pods are never reachable unfenced.
	for _, obj := range platform.PolicyObjects(req.Name, cfg) {
		changed, err := add(obj, "network isolation of "+obj.Ref.Namespace)
		if err != nil {
			return nil, err
		}
		if changed {
			p.policies = append(p.policies, obj)
		}
	}
	for _, ref := range platform.StaleTenantPolicies(cfg) {
		res, err := readiness.Compute(ctx, cs, ref)
		if err != nil {
			return nil, err
		}
		if res.Status != readiness.NotFound {
			p.stalePolicies = append(p.stalePolicies, ref)
			p.changes = append(p.changes, PlanChange{Action: platform.ActionDelete, Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name,
				Message: "tenantIsolation is gateway: pods of the tenant's own namespace no longer reach each other"})
		}
	}

	for _, obj := range platform.WithTenantTable(platform.GatewayObjects(req.Name, cfg, u.e.Version), st.Table) {
		changed, err := add(obj, "the gateway")
		if err != nil {
			return nil, err
		}
		if changed {
			p.gateway = append(p.gateway, obj)
		}
	}
	if p.tokens.table && !slices.ContainsFunc(p.gateway, func(o platform.Object) bool { return o.Ref.Kind == readiness.KindDeployment }) {
		p.changes = append(p.changes, PlanChange{Action: platform.ActionUpdate, Kind: readiness.KindDeployment, Namespace: platform.Namespace, Name: platform.GatewayName,
			Fields:  []string{"spec.template.metadata.annotations." + platform.AnnotationTenantTable},
			Message: "the gateway rolls out with the new tenant table"})
	}
	p.notes = append(p.notes, frontDoorWarnings(ctx, cs, cfg)...)
	if err := u.planProjects(ctx, p, specs); err != nil {
		return nil, err
	}

	// kiln-config last: the fields that differ, and the version record.
	cfgObj, err := platform.ConfigObject(req.Name, cfg)
	if err != nil {
		return nil, err
	}
	cfgObj = platform.Stamp(cfgObj, e.version())
	ch, err := platform.Plan(ctx, cs, cfgObj)
	if err != nil {
		return nil, err
	}
	if ch.Action != "" {
		diff := config.Diff(st.Config, cfg)
		var fields []string
		for _, f := range ch.Fields {
			if f != "data."+platform.ConfigKey {
				fields = append(fields, f)
			}
		}
		for _, d := range diff {
			fields = append(fields, strings.SplitN(d, ":", 2)[0])
		}
		msg := fmt.Sprintf("records kiln %s (platform schema %d)", e.version(), platform.SchemaVersion)
		if len(diff) > 0 {
			msg = strings.Join(diff, "; ") + "; " + msg
		}
		p.cfgObj = &cfgObj
		p.changes = append(p.changes, PlanChange{Action: ch.Action, Kind: cfgObj.Ref.Kind, Namespace: cfgObj.Ref.Namespace, Name: cfgObj.Ref.Name, Fields: fields, Message: msg})
	}
	return p, nil
}

// planProjects adds what the projects need: every running project's
// route through the gateway (Ingress kiln-system/T.P) that is missing or
// differs (a changed domain, a previous kiln's platform), the previous
// kiln's Ingress in the tenant namespace to delete once the new route is
// ready, and a restack (or a note) for each project whose recorded stack
// differs from the stack of that name now.
func (u *upgrade) planProjects(ctx context.Context, p *upgradePlan, specs []project.Recorded) error {
	routes, err := p.ops.PlanRoutes(ctx, specs)
	if err != nil {
		return err
	}
	p.routes = routes
	for _, c := range routes {
		msg := c.Message(p.ops.Host(c.Ref))
		if c.Route != nil && c.Action != "" {
			r := c.Route.Ref
			p.changes = append(p.changes, PlanChange{Action: c.Action, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, Fields: c.Fields, Message: msg})
		}
		if c.Legacy != nil {
			p.changes = append(p.changes, PlanChange{Action: platform.ActionDelete, Kind: c.Legacy.Kind, Namespace: c.Legacy.Namespace, Name: c.Legacy.Name,
				Message: fmt.Sprintf("the route of project %s moved to %s/%s through %s; this one bypassed the gateway's token check", c.Ref, platform.Namespace, project.RouteName(c.Ref), platform.GatewayName)})
		}
	}
	for _, s := range specs {
		if !slices.Contains(p.cfg.Spec.Tenants, s.Ref.Tenant) {
			continue // goes with its tenant
		}
		running := s.Spec.State == project.DesiredRunning
		want, ok := p.cfg.Stack(s.Spec.Stack.Name)
		if !ok {
			p.notes = append(p.notes, fmt.Sprintf("project %s runs stack %s, which the config no longer lists; it keeps running its recorded stack (`%s` moves it)", s.Ref, s.Spec.Stack.Name,
				command(u.req.Target, u.loc.Name, "project restack", s.Ref.String(), FlagName(InputStack), "NAME")))
			continue
		}
		fields := stackFields(s.Spec.Stack, want)
		if len(fields) == 0 {
			continue
		}
		c := PlanChange{Action: platform.ActionUpdate, Kind: KindProject, Namespace: s.Ref.Namespace(), Name: s.Ref.Project, Fields: fields}
		switch {
		case running && u.req.Restack:
			c.Message = fmt.Sprintf("project %s restacked onto the changed stack %s (suspended, then started)", s.Ref, want.Name)
			p.restack = append(p.restack, s)
			p.changes = append(p.changes, c)
		default:
			// Worded for the frontend (the wizard's Restack option and r key).
			how := "pass " + u.e.inputName(InputRestack) + " to restack it"
			if !running {
				how = "it is suspended; restack it with `" + command(u.req.Target, u.loc.Name, "project restack", s.Ref.String()) + "` when it should run the new stack"
			}
			p.needRestack = append(p.needRestack, s.Ref.String())
			p.notes = append(p.notes, fmt.Sprintf("project %s needs a restack: stack %s changed (%s); %s", s.Ref, want.Name, strings.Join(fields, ", "), how))
		}
	}
	return nil
}

// stackFields lists the fields in which a project's recorded stack differs
// from the stack of that name in the config.
func stackFields(have, want config.Stack) []string {
	var out []string
	if have.Image != want.Image {
		out = append(out, "stack.image")
	}
	if have.Port != want.Port {
		out = append(out, "stack.port")
	}
	if !sameQty(have.CPU, want.CPU) {
		out = append(out, "stack.cpu")
	}
	if !sameQty(have.Memory, want.Memory) {
		out = append(out, "stack.memory")
	}
	return out
}

// sameQty compares quantities by value (0.1 equals 100m).
func sameQty(a, b string) bool {
	qa, errA := resource.ParseQuantity(a)
	qb, errB := resource.ParseQuantity(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return qa.Cmp(qb) == 0
}

// refusal is the plan's bad input: removing a tenant that has projects
// without DeleteProjects (failure.Input naming them).
func (p *upgradePlan) refusal(u *upgrade) error {
	if len(p.blocked) == 0 || u.req.DeleteProjects {
		return nil
	}
	return inputErr(failure.Input, InputDeleteProjects, u.req.Name, "the config removes tenants that still have projects: %s; nothing was changed. Delete those projects first, or pass {input} to delete them with their tenant",
		strings.Join(p.blocked, ", "))
}

// beyond lists the changes of p that the shown plan did not have.
func (p *upgradePlan) beyond(shown *upgradePlan) []string {
	seen := map[string]bool{}
	for _, c := range shown.changes {
		seen[c.key()] = true
	}
	var out []string
	for _, c := range p.changes {
		if !seen[c.key()] {
			out = append(out, c.key())
		}
	}
	return out
}

func (u *upgrade) watcher() *readiness.Watcher {
	if u.w == nil {
		u.w = u.e.watcher(u.loc.Client)
	}
	return u.w
}

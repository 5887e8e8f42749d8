package project

import (
	"context"
	"fmt"
	"sort"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/readiness"
)

// RouteChange is one step of moving projects onto their routes through
// the gateway: a route to create or update (Route set, with the planned
// Action and Fields), and/or a route the previous kiln made in the tenant
// namespace to delete once the new one is ready (Legacy set).
type RouteChange struct {
	Ref    Ref
	Route  *platform.Object
	Action string
	Fields []string
	Legacy *readiness.Ref
}

// Message says why the change is made (the plan event's message).
func (c RouteChange) Message(host string) string {
	if c.Route == nil {
		return fmt.Sprintf("project %s is not running: the route the previous kiln made in %s (straight to the project, bypassing the gateway's token check) is deleted", c.Ref, c.Ref.Namespace())
	}
	if c.Legacy != nil && c.Action != "" {
		return fmt.Sprintf("project %s served at %s through %s: the route moves from %s to %s/%s (the previous kiln routed straight to the project, bypassing the gateway's token check)", c.Ref, host, platform.GatewayName, c.Legacy, platform.Namespace, RouteName(c.Ref))
	}
	return fmt.Sprintf("project %s served at %s through %s", c.Ref, host, platform.GatewayName)
}

// PlanRoutes compares every project's route with what o.Config wants,
// reading the routes with one LIST of kiln-system and the previous kiln's
// tenant-namespace Ingresses with one more: a running project's route is
// created or updated (a server-side dry-run apply each), and every kiln
// Ingress left in a tenant namespace is to be deleted, after its
// project's new route is ready. It writes nothing.
func (o *Ops) PlanRoutes(ctx context.Context, specs []Recorded) ([]RouteChange, error) {
	live, err := o.Routes(ctx)
	if err != nil {
		return nil, err
	}
	legacy, err := o.legacyRoutes(ctx)
	if err != nil {
		return nil, err
	}
	var out []RouteChange
	for _, s := range specs {
		if !o.hasTenant(s.Ref.Tenant) {
			continue // goes with its tenant
		}
		c := RouteChange{Ref: s.Ref}
		lref := legacyRouteRef(s.Ref)
		if legacy[key(lref.Namespace, lref.Name)] != nil {
			c.Legacy = &lref
			delete(legacy, key(lref.Namespace, lref.Name))
		}
		if s.Spec.State == DesiredRunning {
			obj := o.routeObject(s.Ref)
			cur := live[key(obj.Ref.Namespace, obj.Ref.Name)]
			c.Route = &obj
			if !o.routeHolds(s.Ref, cur) {
				// Only a route that differs in what kiln sets costs a
				// dry-run apply: an upgrade of 1,000 up-to-date projects
				// makes none.
				ch, err := platform.PlanLive(ctx, o.Client, obj, objOrNil(cur))
				if err != nil {
					return nil, err
				}
				c.Action, c.Fields = ch.Action, ch.Fields
			}
		}
		if c.Action != "" || c.Legacy != nil {
			out = append(out, c)
		}
	}
	// A kiln Ingress in a tenant namespace without a project (its spec
	// gone): nothing may route around the gateway, so it goes too.
	var rest []string
	for k := range legacy {
		rest = append(rest, k)
	}
	sort.Strings(rest)
	for _, k := range rest {
		ing := legacy[k]
		t := strings.TrimPrefix(ing.Namespace, config.TenantNamespacePrefix)
		if !o.hasTenant(t) {
			continue
		}
		lref := readiness.Ref{Kind: readiness.KindIngress, Namespace: ing.Namespace, Name: ing.Name}
		out = append(out, RouteChange{Ref: Ref{Tenant: t, Project: ing.Name}, Legacy: &lref})
	}
	return out, nil
}

// routeHolds says whether the live route ing holds everything kiln sets
// on it: host and backend (routeDrift), class, labels and upstream.
func (o *Ops) routeHolds(r Ref, ing *networkingv1.Ingress) bool {
	if ing == nil || o.routeDrift(r, ing) != "" || len(ing.Spec.Rules) != 1 || ing.Spec.DefaultBackend != nil {
		return false
	}
	h := ing.Spec.Rules[0].HTTP
	if h == nil || len(h.Paths) != 1 {
		return false
	}
	path := h.Paths[0]
	if path.Path != "/" || path.PathType == nil || *path.PathType != networkingv1.PathTypePrefix ||
		path.Backend.Service == nil || path.Backend.Service.Port.Number != platform.GatewayServicePort {
		return false
	}
	class := ""
	if ing.Spec.IngressClassName != nil {
		class = *ing.Spec.IngressClassName
	}
	if class != o.Config.Spec.Gateway.IngressClassName {
		return false
	}
	for k, v := range o.labels(r) {
		if ing.Labels[k] != v {
			return false
		}
	}
	ns, name, ok := readiness.Upstream(ing)
	return ok && ns == r.Namespace() && name == r.Project
}

// StrayRoutes are the routes in kiln-system of tenants o.Config no longer
// has: a removed tenant's projects go with its namespace, and their
// routes, which live outside it, must go first (a route is the first
// thing to go, as in suspend).
func (o *Ops) StrayRoutes(ctx context.Context) ([]readiness.Ref, error) {
	live, err := o.Routes(ctx)
	if err != nil {
		return nil, err
	}
	var out []readiness.Ref
	for _, ing := range live {
		if !o.hasTenant(ing.Labels[LabelTenant]) {
			out = append(out, readiness.Ref{Kind: readiness.KindIngress, Namespace: ing.Namespace, Name: ing.Name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (o *Ops) hasTenant(t string) bool { return o.checkTenant(t) == nil }

// legacyRoutes are the kiln Ingresses of this cluster outside kiln-system
// (the previous kiln's Ingress kiln-tenant-T/P), keyed by namespace/name.
func (o *Ops) legacyRoutes(ctx context.Context) (map[string]*networkingv1.Ingress, error) {
	sel := o.selector("")
	out := map[string]*networkingv1.Ingress{}
	tenants, err := o.allTenants(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range tenants {
		ns := Ref{Tenant: t}.Namespace()
		list, err := o.Client.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if o.notYet(ctx, ns, err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list ingresses in %s (%s): %w", ns, sel, err)
		}
		for i := range list.Items {
			x := &list.Items[i]
			if x.Namespace != platform.Namespace && strings.HasPrefix(x.Namespace, config.TenantNamespacePrefix) {
				out[key(x.Namespace, x.Name)] = x
			}
		}
	}
	return out, nil
}

// ApplyRoutes makes the planned changes so that a running project is
// never without a route: each new route is applied and watched until
// ready (the gateway and the project behind it ready), and only then is
// the project's old Ingress deleted and watched until gone. A project
// whose own Service has no ready endpoints has no working route to keep:
// its route is applied without waiting, and the old one deleted. Each
// route's host is read back from the API.
func (o *Ops) ApplyRoutes(ctx context.Context, changes []RouteChange) error {
	// One set of informers for every route's wait (kiln-system's routes
	// by label, and each tenant namespace's Services for the upstreams),
	// as a batch start has: not five watches per project.
	shared := readiness.NewShared(o.Client)
	shared.IngressSelector = o.selector("")
	defer shared.Close()
	w := &readiness.Watcher{Client: o.Client, OnChange: o.R.Watcher().OnChange, Shared: shared}
	var await []readiness.Ref
	for _, c := range changes {
		if c.Route == nil || c.Action == "" {
			continue
		}
		if err := platform.Apply(ctx, o.Client, *c.Route); err != nil {
			return err
		}
		_, _, svc, _, _ := refs(c.Ref)
		res, err := readiness.Compute(ctx, o.Client, svc)
		if err != nil {
			return err
		}
		if res.Status == readiness.Current {
			await = append(await, c.Route.Ref)
		} else {
			o.R.Logf(event.LevelWarn, "project %s: service %s has %s, so its route %s is applied without waiting for it to be ready", c.Ref, svc, res.Message, c.Route.Ref)
		}
	}
	if len(await) > 0 {
		wctx, cancel := o.withTimeout(ctx)
		_, err := w.Until(wctx, await, readiness.Ready)
		cancel()
		if err != nil {
			return err
		}
	}
	if err := o.checkHosts(ctx, changes); err != nil {
		return err
	}
	var gone []readiness.Ref
	for _, c := range changes {
		if c.Legacy == nil {
			continue
		}
		if err := platform.Delete(ctx, o.Client, *c.Legacy); err != nil {
			return err
		}
		gone = append(gone, *c.Legacy)
	}
	if len(gone) == 0 {
		return nil
	}
	wctx, cancel := o.withTimeout(ctx)
	defer cancel()
	_, err := w.Until(wctx, gone, readiness.Gone)
	return err
}

// checkHosts reads the applied routes back with one LIST: each must serve
// its project's host through the gateway.
func (o *Ops) checkHosts(ctx context.Context, changes []RouteChange) error {
	live, err := o.Routes(ctx)
	if err != nil {
		return err
	}
	for _, c := range changes {
		if c.Route == nil || c.Action == "" {
			continue
		}
		ref := c.Route.Ref
		ing := live[key(ref.Namespace, ref.Name)]
		if ing == nil {
			return fmt.Errorf("read back %s: not found", ref)
		}
		if d := o.routeDrift(c.Ref, ing); d != "" {
			return fmt.Errorf("read back %s: %s", ref, d)
		}
		o.R.Resource(ref.Kind, ref.Namespace, ref.Name, readiness.Current, "serves "+o.Host(c.Ref)+" via "+platform.GatewayName)
	}
	return nil
}

// MoveRoutes plans and applies the routes in one go (kiln create
// --continue, which shows no plan); it returns how many changes it made.
func (o *Ops) MoveRoutes(ctx context.Context) (int, error) {
	specs, err := o.Specs(ctx)
	if err != nil {
		return 0, err
	}
	changes, err := o.PlanRoutes(ctx, specs)
	if err != nil || len(changes) == 0 {
		return 0, err
	}
	for _, c := range changes {
		o.R.Logf(event.LevelInfo, "%s", c.Message(o.Host(c.Ref)))
	}
	return len(changes), o.ApplyRoutes(ctx, changes)
}

package project

import (
	"context"
	"slices"

	"github.com/kilnctl/kiln/engine/event"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Observe computes the row List gives project r, from a read of r's
// objects only: the same eight LISTs as List's with the same label
// selector, each narrowed to r (by the object's name, DESIGN.md §5, or
// for pods and EndpointSlices by the label List groups them by). Its cost
// does not depend on the number of projects: a live inspector (engine's
// Watch) re-reads only the projects a change touched with it.
//
// ok is false when List has no row for r: its spec ConfigMap is gone or
// cannot be trusted (List skips it, warning), its tenant is not one of
// o.Config's, or its tenant namespace does not exist yet.
func (o *Ops) Observe(ctx context.Context, r Ref) (st *Status, ok bool, err error) {
	if !slices.Contains(o.tenants(), r.Tenant) {
		return nil, false, nil
	}
	ns := r.Namespace()
	sel := o.selector("")
	named := func(name string) metav1.ListOptions {
		return metav1.ListOptions{LabelSelector: sel, FieldSelector: "metadata.name=" + name}
	}
	sc := scope{
		cms:     named(SpecName(r.Project)),
		deps:    named(r.Project),
		svcs:    named(r.Project),
		ings:    named(RouteName(r)),
		leases:  named(LeaseName(r.Project)),
		slices:  metav1.ListOptions{LabelSelector: sel + "," + discoveryv1.LabelServiceName + "=" + r.Project},
		pods:    metav1.ListOptions{LabelSelector: o.selector(r.Project)},
		secrets: named(SecretName(r.Project)),
	}
	snap, err := o.readScope(ctx, ns, sc)
	if o.notYet(ctx, ns, err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	for i := range snap.specs {
		if snap.specs[i].Name != SpecName(r.Project) {
			continue
		}
		st, err := o.observe(snap, &snap.specs[i])
		if err != nil {
			o.R.Logf(event.LevelWarn, "skipped: %v", err)
			return nil, false, nil
		}
		return st, true, nil
	}
	return nil, false, nil
}

package project

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilnctl/kiln/engine/platform"
)

// Recorded is one project as its spec ConfigMap records it.
type Recorded struct {
	Ref  Ref
	Spec Spec
}

// Specs reads every project's spec with one LIST per tenant namespace
// (what kiln upgrade plans with: the recorded stack and desired state of
// each project).
func (o *Ops) Specs(ctx context.Context) ([]Recorded, error) {
	sel := o.selector("")
	var items []corev1.ConfigMap
	tenants, err := o.allTenants(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range tenants {
		ns := Ref{Tenant: t}.Namespace()
		cms, err := o.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if o.notYet(ctx, ns, err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list configmaps in %s (%s): %w", ns, sel, err)
		}
		items = append(items, cms.Items...)
	}
	var out []Recorded
	for i := range items {
		cm := &items[i]
		if !strings.HasPrefix(cm.Name, specPrefix) {
			continue
		}
		s, err := decodeSpec(cm)
		if err != nil {
			return nil, err
		}
		out = append(out, Recorded{Ref: Ref{Tenant: s.Tenant, Project: s.Project}, Spec: *s})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ref.String() < out[j].Ref.String() })
	return out, nil
}

// RouteObject is the project's route as o.Config wants it (the host is
// P.T.DOMAIN of o.Config's domain).
func (o *Ops) RouteObject(r Ref) platform.Object { return o.routeObject(r) }

// Routes reads every project route of the cluster (Ingresses in
// kiln-system) with one LIST, keyed by namespace/name.
func (o *Ops) Routes(ctx context.Context) (map[string]*networkingv1.Ingress, error) {
	sel := o.selector("")
	list, err := o.Client.NetworkingV1().Ingresses(platform.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list ingresses %s (%s): %w", platform.Namespace, sel, err)
	}
	out := make(map[string]*networkingv1.Ingress, len(list.Items))
	for i := range list.Items {
		x := &list.Items[i]
		out[key(x.Namespace, x.Name)] = x
	}
	return out, nil
}

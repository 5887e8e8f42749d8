package project

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/readiness"
)

// orderWatch records, from the API server's watches, the resourceVersion
// (etcd's revision, which orders writes across kinds) of: the first ready
// endpoint of Service P, and the route's creation and deletion, and the
// Service's deletion, and every Ingress event in the tenant namespace.
type orderWatch struct {
	mu      sync.Mutex
	evs     []orderEvent
	changed chan struct{} // closed (and replaced) on every event
}

type orderEvent struct {
	what string // "endpoint ready", "route ADDED", "route DELETED", "service DELETED", "tenant ingress TYPE"
	rv   int64
}

func watchOrder(t *testing.T, ctx context.Context, o *Ops, r Ref) *orderWatch {
	t.Helper()
	ow := &orderWatch{changed: make(chan struct{})}
	cs := o.Client
	type src struct {
		list  func(context.Context, metav1.ListOptions) (runtime.Object, error)
		watch func(context.Context, metav1.ListOptions) (watch.Interface, error)
		opts  metav1.ListOptions
		name  func(watch.Event) string
	}
	rv := func(obj runtime.Object) int64 {
		m, _ := meta.Accessor(obj)
		n, _ := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
		return n
	}
	srcs := []src{
		{func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return cs.DiscoveryV1().EndpointSlices(r.Namespace()).List(ctx, o)
		}, cs.DiscoveryV1().EndpointSlices(r.Namespace()).Watch, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + r.Project},
			func(ev watch.Event) string {
				if es, ok := ev.Object.(*discoveryv1.EndpointSlice); ok && readiness.CountReady([]discoveryv1.EndpointSlice{*es}) > 0 {
					return "endpoint ready"
				}
				return ""
			}},
		{func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return cs.NetworkingV1().Ingresses(platform.Namespace).List(ctx, o)
		}, cs.NetworkingV1().Ingresses(platform.Namespace).Watch, metav1.ListOptions{FieldSelector: "metadata.name=" + RouteName(r)},
			func(ev watch.Event) string { return "route " + string(ev.Type) }},
		{func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return cs.CoreV1().Services(r.Namespace()).List(ctx, o)
		}, cs.CoreV1().Services(r.Namespace()).Watch, metav1.ListOptions{FieldSelector: "metadata.name=" + r.Project},
			func(ev watch.Event) string { return "service " + string(ev.Type) }},
		{func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return cs.NetworkingV1().Ingresses(r.Namespace()).List(ctx, o)
		}, cs.NetworkingV1().Ingresses(r.Namespace()).Watch, metav1.ListOptions{},
			func(ev watch.Event) string { return "tenant ingress " + string(ev.Type) }},
	}
	for _, s := range srcs {
		list, err := s.list(ctx, s.opts)
		if err != nil {
			t.Fatal(err)
		}
		lm, _ := meta.ListAccessor(list)
		opts := s.opts
		opts.ResourceVersion = lm.GetResourceVersion()
		w, err := s.watch(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer w.Stop()
			for ev := range w.ResultChan() {
				if ev.Type == watch.Bookmark || ev.Type == watch.Error {
					continue
				}
				if what := s.name(ev); what != "" {
					ow.mu.Lock()
					ow.evs = append(ow.evs, orderEvent{what, rv(ev.Object)})
					close(ow.changed)
					ow.changed = make(chan struct{})
					ow.mu.Unlock()
				}
			}
		}()
	}
	return ow
}

// first is the revision of the first event what, once the watch saw it.
func (ow *orderWatch) first(t *testing.T, ctx context.Context, what string) int64 {
	t.Helper()
	for {
		ow.mu.Lock()
		for _, e := range ow.evs {
			if e.what == what {
				ow.mu.Unlock()
				return e.rv
			}
		}
		changed := ow.changed
		ow.mu.Unlock()
		select {
		case <-ctx.Done():
			t.Fatalf("the watch never saw %q", what)
		case <-changed:
		}
	}
}

func (ow *orderWatch) count(what string) int {
	ow.mu.Lock()
	defer ow.mu.Unlock()
	n := 0
	for _, e := range ow.evs {
		if strings.HasPrefix(e.what, what) {
			n++
		}
	}
	return n
}

// A project's route is Ingress kiln-system/T.P to kiln-gateway with the
// class from spec.gateway.ingressClassName; it is created only after the
// project's Service has a ready endpoint and deleted before the Service;
// no Ingress ever appears in the tenant namespace; and repair heals a
// deleted route.
func TestRouteThroughTheGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the control plane")
	}
	o, ctx := newOps(t, "routes")
	o.Config.Spec.Gateway.IngressClassName = "nginx"
	r := Ref{Tenant: "routes", Project: "web"}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	ow := watchOrder(t, wctx, o, r)

	if err := o.Create(ctx, r, ""); err != nil {
		t.Fatal(err)
	}
	ing, err := o.Client.NetworkingV1().Ingresses(platform.Namespace).Get(ctx, "routes.web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ing.Labels[LabelTenant] != "routes" || ing.Labels[LabelProject] != "web" || ing.Labels[LabelCluster] != "unit" || ing.Labels[LabelManagedBy] != "kiln" {
		t.Errorf("route labels %v", ing.Labels)
	}
	if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != "nginx" {
		t.Errorf("route class %v, want nginx", ing.Spec.IngressClassName)
	}
	rule := ing.Spec.Rules
	if len(rule) != 1 || rule[0].Host != o.Host(r) || rule[0].HTTP == nil || len(rule[0].HTTP.Paths) != 1 {
		t.Fatalf("route rules %+v", rule)
	}
	path := rule[0].HTTP.Paths[0]
	if path.Path != "/" || *path.PathType != networkingv1.PathTypePrefix || path.Backend.Service.Name != platform.GatewayName || path.Backend.Service.Port.Number != 80 {
		t.Errorf("route path %+v", path)
	}
	if up := ing.Annotations[readiness.AnnotationUpstream]; up != "kiln-tenant-routes/web" {
		t.Errorf("route upstream %q", up)
	}
	if ready, added := ow.first(t, ctx, "endpoint ready"), ow.first(t, ctx, "route ADDED"); ready >= added {
		t.Errorf("route created (rv %d) before the Service had a ready endpoint (rv %d)", added, ready)
	}
	st, err := o.Inspect(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateRunning {
		t.Errorf("state %s %v, want running", st.State, st.Reasons)
	}
	found := false
	for _, obj := range st.Objects {
		if obj.Kind == readiness.KindIngress {
			found = true
			if obj.Namespace != platform.Namespace || obj.Name != "routes.web" || obj.Status != readiness.Current {
				t.Errorf("route row %+v", obj)
			}
		}
	}
	if !found {
		t.Errorf("no route row in %+v", st.Objects)
	}
	// The route's Events (in kiln-system) are the project's too.
	if _, err := o.Client.CoreV1().Events(platform.Namespace).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "routes.web.test", Namespace: platform.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Ingress", Namespace: platform.Namespace, Name: "routes.web"},
		Reason:         "Sync", Message: "scheduled for sync", Type: corev1.EventTypeNormal, LastTimestamp: metav1.Now(),
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if st, err = o.Inspect(ctx, r); err != nil {
		t.Fatal(err)
	}
	seenEvent := false
	for _, ev := range st.Events {
		seenEvent = seenEvent || (ev.Object == "Ingress/kiln-system/routes.web" && ev.Reason == "Sync")
	}
	if !seenEvent {
		t.Errorf("inspect events %+v lack the route's", st.Events)
	}

	// Repair heals a deleted route, and only it.
	if err := o.Client.NetworkingV1().Ingresses(platform.Namespace).Delete(ctx, "routes.web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := (&readiness.Watcher{Client: o.Client}).Until(ctx, []readiness.Ref{{Kind: readiness.KindIngress, Namespace: platform.Namespace, Name: "routes.web"}}, readiness.Gone); err != nil {
		t.Fatal(err)
	}
	if st, err := o.Inspect(ctx, r); err != nil || st.State != StateDegraded || !hasReason(st, "route missing") {
		t.Errorf("inspect without the route: %+v, %v", st, err)
	}
	// Repair covers the cluster: other tests' broken projects may be
	// reported; this one must be repaired.
	repaired, err := o.Repair(ctx)
	if !slices.Contains(repaired, "routes/web") || (err != nil && strings.Contains(err.Error(), "routes/web")) {
		t.Errorf("repair: %v, %v", repaired, err)
	}
	if _, err := o.Client.NetworkingV1().Ingresses(platform.Namespace).Get(ctx, "routes.web", metav1.GetOptions{}); err != nil {
		t.Errorf("route after repair: %v", err)
	}

	if n := ow.count("tenant ingress"); n != 0 {
		t.Errorf("%d Ingress events in the tenant namespace from create and repair: kiln must make none there", n)
	}
	// An earlier kiln's route (Ingress kiln-tenant-T/P to Service P) and
	// no route: repair makes the route, then deletes the old one.
	legacy := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: r.Namespace(), Labels: o.labels(r)},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: o.Host(r),
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: ptrTo(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}},
			}}}}}}},
	}
	if _, err := o.Client.NetworkingV1().Ingresses(r.Namespace()).Create(ctx, legacy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := o.Client.NetworkingV1().Ingresses(platform.Namespace).Delete(ctx, "routes.web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if repaired, err := o.Repair(ctx); !slices.Contains(repaired, "routes/web") || (err != nil && strings.Contains(err.Error(), "routes/web")) {
		t.Errorf("repair with an old route: %v, %v", repaired, err)
	}
	if _, err := o.Client.NetworkingV1().Ingresses(platform.Namespace).Get(ctx, "routes.web", metav1.GetOptions{}); err != nil {
		t.Errorf("route after repair: %v", err)
	}
	if _, err := o.Client.NetworkingV1().Ingresses(r.Namespace()).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the old route after repair: %v, want it gone", err)
	}
	// The test's own old route: its deletion seen, its events forgotten.
	ow.first(t, ctx, "tenant ingress DELETED")
	ow.reset("tenant ingress")

	if err := o.Suspend(ctx, r); err != nil {
		t.Fatal(err)
	}
	if route, svc := ow.first(t, ctx, "route DELETED"), ow.first(t, ctx, "service DELETED"); route >= svc {
		t.Errorf("Service deleted (rv %d) before the route (rv %d)", svc, route)
	}
	if _, err := o.Client.NetworkingV1().Ingresses(platform.Namespace).Get(ctx, "routes.web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("route after suspend: %v", err)
	}
	if n := ow.count("tenant ingress"); n != 0 {
		t.Errorf("%d Ingress events in the tenant namespace: kiln must make none there", n)
	}
	if err := o.Delete(ctx, r); err != nil {
		t.Fatal(err)
	}
}

func ptrTo[T any](v T) *T { return &v }

// reset forgets the events what seen so far.
func (ow *orderWatch) reset(what string) {
	ow.mu.Lock()
	defer ow.mu.Unlock()
	kept := ow.evs[:0]
	for _, e := range ow.evs {
		if !strings.HasPrefix(e.what, what) {
			kept = append(kept, e)
		}
	}
	ow.evs = kept
}

func hasReason(st *Status, want string) bool {
	for _, r := range st.Reasons {
		if r == want {
			return true
		}
	}
	return false
}

package readiness

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/kilnctl/kiln/internal/testenv/testcluster"
)

var cluster *testcluster.Cluster

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m, testcluster.Options{}, &cluster)) }

const testFinalizer = "kiln.dev/test-hold"

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func deployment(ns, name string, replicas int32, mutate ...func(*appsv1.Deployment)) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: "nginx:1.27-alpine",
					Ports: []corev1.ContainerPort{{ContainerPort: 80}},
				}}},
			},
		},
	}
	for _, m := range mutate {
		m(d)
	}
	return d
}

// unschedulable keeps the Deployment's pods Pending: no node matches.
func unschedulable(d *appsv1.Deployment) {
	d.Spec.Template.Spec.NodeSelector = map[string]string{"kiln.dev/no-such-node": "true"}
}

func service(ns, name, app string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": app},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}},
		},
	}
}

func ingress(ns, name string, backends ...string) *networkingv1.Ingress {
	var paths []networkingv1.HTTPIngressPath
	for i, b := range backends {
		paths = append(paths, networkingv1.HTTPIngressPath{
			Path:     "/" + strings.Repeat("x", i),
			PathType: ptr.To(networkingv1.PathTypePrefix),
			Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: b, Port: networkingv1.ServiceBackendPort{Number: 80},
			}},
		})
	}
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
			Host:             name + ".kiln.test",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}},
		}}},
	}
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// waitFor follows ref with a Watcher until cond holds and returns that
// result (a real watch; it fails the test when ctx ends first).
func waitFor(t *testing.T, ctx context.Context, ref Ref, cond Goal) Result {
	t.Helper()
	w := &Watcher{Client: cluster.Client}
	res, err := w.Until(ctx, []Ref{ref}, cond)
	if err != nil {
		t.Fatalf("waiting for %s: %v", ref, err)
	}
	return res[ref]
}

func compute(t *testing.T, ctx context.Context, ref Ref) Result {
	t.Helper()
	r, err := Compute(ctx, cluster.Client, ref)
	if err != nil {
		t.Fatalf("Compute(%s): %v", ref, err)
	}
	return r
}

func TestComputeSimpleKinds(t *testing.T) {
	ctx := testCtx(t)
	ns := cluster.Namespace(t)
	cs := cluster.Client
	tests := []struct {
		kind   string
		create func() error
	}{
		{KindConfigMap, func() error {
			_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "obj"}}, metav1.CreateOptions{})
			return err
		}},
		{KindSecret, func() error {
			_, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "obj"}}, metav1.CreateOptions{})
			return err
		}},
		{KindServiceAcc, func() error {
			_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "obj"}}, metav1.CreateOptions{})
			return err
		}},
		{KindLease, func() error {
			_, err := cs.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "obj"}}, metav1.CreateOptions{})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			ref := Ref{Kind: tt.kind, Namespace: ns, Name: "obj"}
			if r := compute(t, ctx, ref); r != (Result{NotFound, "not found"}) {
				t.Errorf("before create: %+v, want NotFound", r)
			}
			if err := tt.create(); err != nil {
				t.Fatal(err)
			}
			if r := compute(t, ctx, ref); r.Status != Current {
				t.Errorf("after create: %+v, want Current", r)
			}
		})
	}

	t.Run(KindNamespace, func(t *testing.T) {
		if r := compute(t, ctx, Ref{Kind: KindNamespace, Name: ns}); r.Status != Current {
			t.Errorf("existing namespace: %+v, want Current", r)
		}
		if r := compute(t, ctx, Ref{Kind: KindNamespace, Name: ns + "-absent"}); r.Status != NotFound {
			t.Errorf("absent namespace: %+v, want NotFound", r)
		}
	})

	t.Run("unsupported kind", func(t *testing.T) {
		_, err := Compute(ctx, cs, Ref{Kind: "Pod", Namespace: ns, Name: "x"})
		if err == nil || !strings.Contains(err.Error(), `"Pod"`) {
			t.Errorf("err = %v, want one naming kind Pod", err)
		}
	})
}

func TestComputeDeployment(t *testing.T) {
	tests := []struct {
		replicas int32
		want     string
	}{
		{1, "1/1 replicas available"},
		{3, "3/3 replicas available"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			ctx := testCtx(t)
			ns := cluster.Namespace(t)
			ref := Ref{Kind: KindDeployment, Namespace: ns, Name: "web"}
			cs := cluster.Client
			// Paused, the controller creates no ReplicaSet: nothing becomes
			// available until it is resumed, so this state can be observed.
			paused := deployment(ns, "web", tt.replicas, func(d *appsv1.Deployment) { d.Spec.Paused = true })
			must[*appsv1.Deployment](t)(cs.AppsV1().Deployments(ns).Create(ctx, paused, metav1.CreateOptions{}))
			wantStart := Result{InProgress, "0/" + strings.Split(tt.want, "/")[1]}
			if r := compute(t, ctx, ref); r != wantStart {
				t.Errorf("paused: %+v, want %+v", r, wantStart)
			}
			// Still the same once the controller has seen it.
			observed := waitFor(t, ctx, ref, func(Result) bool {
				d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
				return err == nil && d.Status.ObservedGeneration >= d.Generation
			})
			if observed != wantStart {
				t.Errorf("paused, observed by the controller: %+v, want %+v", observed, wantStart)
			}
			must[*appsv1.Deployment](t)(cs.AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"paused":false}}`), metav1.PatchOptions{}))
			got := waitFor(t, ctx, ref, Ready)
			if got != (Result{Current, tt.want}) {
				t.Errorf("rolled out: %+v, want Current %q", got, tt.want)
			}
			if again := compute(t, ctx, ref); again != got {
				t.Errorf("Compute after rollout = %+v, Watcher said %+v", again, got)
			}
		})
	}
}

func TestComputeDeploymentTerminating(t *testing.T) {
	ctx := testCtx(t)
	ns := cluster.Namespace(t)
	cs := cluster.Client
	d := deployment(ns, "held", 1, func(d *appsv1.Deployment) { d.Finalizers = []string{testFinalizer} })
	must[*appsv1.Deployment](t)(cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}))
	t.Cleanup(func() { dropFinalizer(t, cs, ns, "held") })
	if err := cs.AppsV1().Deployments(ns).Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := compute(t, ctx, Ref{Kind: KindDeployment, Namespace: ns, Name: "held"}); r != (Result{Terminating, "being deleted"}) {
		t.Errorf("deleted with a finalizer: %+v, want Terminating", r)
	}
}

func dropFinalizer(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	_, err := cs.AppsV1().Deployments(ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("remove finalizer of %s/%s: %v", ns, name, err)
	}
}

func TestComputeService(t *testing.T) {
	ctx := testCtx(t)
	ns := cluster.Namespace(t)
	cs := cluster.Client
	ref := Ref{Kind: KindService, Namespace: ns, Name: "web"}

	if r := compute(t, ctx, ref); r.Status != NotFound {
		t.Errorf("absent: %+v, want NotFound", r)
	}
	must[*corev1.Service](t)(cs.CoreV1().Services(ns).Create(ctx, service(ns, "web", "web"), metav1.CreateOptions{}))
	if r := compute(t, ctx, ref); r != (Result{InProgress, "no ready endpoints"}) {
		t.Errorf("no pods: %+v, want InProgress no ready endpoints", r)
	}
	must[*appsv1.Deployment](t)(cs.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "web", 1), metav1.CreateOptions{}))
	if r := waitFor(t, ctx, ref, Ready); r != (Result{Current, "1 ready endpoint"}) {
		t.Errorf("with a ready deployment: %+v, want Current 1 ready endpoint", r)
	}
	if n, err := ReadyEndpoints(ctx, cs, ns, "web"); err != nil || n != 1 {
		t.Errorf("ReadyEndpoints = %d, %v; want 1", n, err)
	}

	// Scaling up is reported with the new count.
	// The deployment controller may write between our read and update
	// (the scale carries the resourceVersion): re-read on a conflict.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale, err := cs.AppsV1().Deployments(ns).GetScale(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		scale.Spec.Replicas = 2
		_, err = cs.AppsV1().Deployments(ns).UpdateScale(ctx, "web", scale, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if r := waitFor(t, ctx, ref, func(r Result) bool { return r.Message == "2 ready endpoints" }); r.Status != Current {
		t.Errorf("scaled to 2: %+v, want Current", r)
	}

	t.Run("ExternalName", func(t *testing.T) {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: ns},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"},
		}
		must[*corev1.Service](t)(cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}))
		if r := compute(t, ctx, Ref{Kind: KindService, Namespace: ns, Name: "ext"}); r != (Result{Current, "external name"}) {
			t.Errorf("ExternalName service: %+v, want Current external name", r)
		}
	})
}

func TestComputeIngress(t *testing.T) {
	ctx := testCtx(t)
	ns := cluster.Namespace(t)
	cs := cluster.Client
	ref := Ref{Kind: KindIngress, Namespace: ns, Name: "site"}

	if r := compute(t, ctx, ref); r.Status != NotFound {
		t.Errorf("absent: %+v, want NotFound", r)
	}
	must[*networkingv1.Ingress](t)(cs.NetworkingV1().Ingresses(ns).Create(ctx, ingress(ns, "site", "web"), metav1.CreateOptions{}))
	if r := compute(t, ctx, ref); r != (Result{InProgress, "backend svc/web missing"}) {
		t.Errorf("backend missing: %+v", r)
	}
	must[*corev1.Service](t)(cs.CoreV1().Services(ns).Create(ctx, service(ns, "web", "web"), metav1.CreateOptions{}))
	if r := compute(t, ctx, ref); r != (Result{InProgress, "backend svc/web has no ready endpoints"}) {
		t.Errorf("backend without endpoints: %+v", r)
	}
	must[*appsv1.Deployment](t)(cs.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "web", 1), metav1.CreateOptions{}))
	if r := waitFor(t, ctx, ref, Ready); r != (Result{Current, "1 backend ready"}) {
		t.Errorf("all ready: %+v, want Current 1 backend ready", r)
	}

	// A load-balancer address is reported when present (never required).
	ing := must[*networkingv1.Ingress](t)(cs.NetworkingV1().Ingresses(ns).Get(ctx, "site", metav1.GetOptions{}))
	ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.10"}, {Hostname: "lb.example.test"}}
	must[*networkingv1.Ingress](t)(cs.NetworkingV1().Ingresses(ns).UpdateStatus(ctx, ing, metav1.UpdateOptions{}))
	if r := compute(t, ctx, ref); r != (Result{Current, "1 backend ready, address 192.0.2.10,lb.example.test"}) {
		t.Errorf("with address: %+v", r)
	}

	t.Run("every backend must be ready", func(t *testing.T) {
		ref := Ref{Kind: KindIngress, Namespace: ns, Name: "two"}
		must[*networkingv1.Ingress](t)(cs.NetworkingV1().Ingresses(ns).Create(ctx, ingress(ns, "two", "web", "api"), metav1.CreateOptions{}))
		if r := compute(t, ctx, ref); r != (Result{InProgress, "backend svc/api missing"}) {
			t.Errorf("second backend missing: %+v", r)
		}
		must[*corev1.Service](t)(cs.CoreV1().Services(ns).Create(ctx, service(ns, "api", "web"), metav1.CreateOptions{}))
		if r := waitFor(t, ctx, ref, Ready); r != (Result{Current, "2 backends ready"}) {
			t.Errorf("both ready: %+v", r)
		}
	})

	t.Run("ExternalName backend", func(t *testing.T) {
		ext := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: ns},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"},
		}
		must[*corev1.Service](t)(cs.CoreV1().Services(ns).Create(ctx, ext, metav1.CreateOptions{}))
		must[*networkingv1.Ingress](t)(cs.NetworkingV1().Ingresses(ns).Create(ctx, ingress(ns, "ext", "ext"), metav1.CreateOptions{}))
		// An ExternalName Service never has endpoints; it is ready as is.
		if r := compute(t, ctx, Ref{Kind: KindIngress, Namespace: ns, Name: "ext"}); r != (Result{Current, "1 backend ready"}) {
			t.Errorf("ExternalName backend: %+v, want Current", r)
		}
	})

	t.Run("no service backend", func(t *testing.T) {
		ing := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: "res", Namespace: ns},
			Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{
				Resource: &corev1.TypedLocalObjectReference{APIGroup: ptr.To("example.com"), Kind: "Bucket", Name: "b"},
			}},
		}
		must[*networkingv1.Ingress](t)(cs.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}))
		if r := compute(t, ctx, Ref{Kind: KindIngress, Namespace: ns, Name: "res"}); r != (Result{Failed, "no backend services"}) {
			t.Errorf("resource-only backend: %+v, want Failed", r)
		}
	})
}

func TestIngressBackends(t *testing.T) {
	svc := func(name string) *networkingv1.IngressBackend {
		return &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name}}
	}
	path := func(name string) networkingv1.HTTPIngressPath {
		return networkingv1.HTTPIngressPath{Backend: *svc(name)}
	}
	tests := []struct {
		name string
		spec networkingv1.IngressSpec
		want []string
	}{
		{"empty", networkingv1.IngressSpec{}, []string{}},
		{"default backend only", networkingv1.IngressSpec{DefaultBackend: svc("d")}, []string{"d"}},
		{"rules sorted and deduplicated, with default", networkingv1.IngressSpec{
			DefaultBackend: svc("b"),
			Rules: []networkingv1.IngressRule{
				{IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{path("c"), path("a")}}}},
				{Host: "no-http.example"},
				{IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{path("b"), {Backend: networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{Kind: "X", Name: "y"}}}}}}},
			},
		}, []string{"a", "b", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := IngressBackends(&networkingv1.Ingress{Spec: tt.spec})
			if strings.Join(got, ",") != strings.Join(tt.want, ",") || got == nil {
				t.Errorf("IngressBackends = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCountReady(t *testing.T) {
	ep := func(ready *bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	}
	tests := []struct {
		name   string
		slices []discoveryv1.EndpointSlice
		want   int
	}{
		{"none", nil, 0},
		{"not ready", []discoveryv1.EndpointSlice{{Endpoints: []discoveryv1.Endpoint{ep(ptr.To(false))}}}, 0},
		// The API documents an unset ready condition as ready.
		{"unknown counts as ready", []discoveryv1.EndpointSlice{{Endpoints: []discoveryv1.Endpoint{ep(nil)}}}, 1},
		{"across slices", []discoveryv1.EndpointSlice{
			{Endpoints: []discoveryv1.Endpoint{ep(ptr.To(true)), ep(ptr.To(false))}},
			{Endpoints: []discoveryv1.Endpoint{ep(ptr.To(true))}},
		}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := countReady(tt.slices); got != tt.want {
				t.Errorf("countReady = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestRefString(t *testing.T) {
	tests := []struct {
		ref  Ref
		want string
	}{
		{Ref{Kind: KindNamespace, Name: "kiln-system"}, "namespace/kiln-system"},
		{Ref{Kind: KindDeployment, Namespace: "kiln-tenant-a", Name: "p"}, "deployment/kiln-tenant-a/p"},
	}
	for _, tt := range tests {
		if got := tt.ref.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.ref, got, tt.want)
		}
	}
}

// Package readiness judges live Kubernetes objects: kstatus for the generic
// case, plus what kstatus lacks (a Service is ready when its EndpointSlices
// have a ready endpoint; an Ingress when every backend Service is ready).
//
// Compute answers once from the API server. Watcher follows objects through
// watches and reports every status change until a goal is reached; it never
// sleeps on a timer.
package readiness

import (
	"context"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/internal/human"
)

// Statuses (the kstatus vocabulary).
const (
	InProgress  = event.StatusInProgress
	Current     = event.StatusCurrent
	Failed      = event.StatusFailed
	NotFound    = event.StatusNotFound
	Terminating = event.StatusTerminating
)

// Kinds kiln knows how to judge.
const (
	KindNamespace  = "Namespace"
	KindConfigMap  = "ConfigMap"
	KindSecret     = "Secret"
	KindDeployment = "Deployment"
	KindService    = "Service"
	KindIngress    = "Ingress"
	KindLease      = "Lease"
	KindServiceAcc = "ServiceAccount"
	// KindNetworkPolicy is ready when it exists; that it holds what kiln
	// applied is checked by whoever knows what that is (platform.Drift).
	KindNetworkPolicy = "NetworkPolicy"
)

// AnnotationUpstream on an Ingress names, as NAMESPACE/NAME, the Service
// its backend (a gateway) forwards to: the Ingress is ready only when that
// Service is ready too. A project's route points at kiln-gateway, which
// is ready while the project behind it may be dead; without this a route
// would say Current in front of a project with no endpoints.
const AnnotationUpstream = "kiln.dev/upstream"

// Upstream is the Service an Ingress's AnnotationUpstream names (ok false
// when it names none, or is malformed).
func Upstream(ing *networkingv1.Ingress) (namespace, name string, ok bool) {
	ns, n, found := strings.Cut(ing.Annotations[AnnotationUpstream], "/")
	if !found || ns == "" || n == "" {
		return "", "", false
	}
	return ns, n, true
}

// Ref names one object.
type Ref struct {
	Kind      string
	Namespace string
	Name      string
}

func (r Ref) String() string {
	if r.Namespace == "" {
		return strings.ToLower(r.Kind) + "/" + r.Name
	}
	return strings.ToLower(r.Kind) + "/" + r.Namespace + "/" + r.Name
}

// Result is the judged status of an object with a human message.
type Result struct {
	Status  event.Status
	Message string
}

// Compute reads the object (and what its readiness depends on) from the API
// server and judges it.
func Compute(ctx context.Context, cs kubernetes.Interface, ref Ref) (Result, error) {
	obj, err := get(ctx, cs, ref)
	if apierrors.IsNotFound(err) {
		return Result{NotFound, "not found"}, nil
	}
	if apierrors.IsForbidden(err) && ref.Namespace != "" {
		// kiln's roles read only in namespaces kiln made: in one that is
		// not there (yet) a read is refused, and the object is as absent
		// as its namespace.
		if _, gerr := cs.CoreV1().Namespaces().Get(ctx, ref.Namespace, metav1.GetOptions{}); apierrors.IsNotFound(gerr) {
			return Result{NotFound, "not found (namespace " + ref.Namespace + " not found)"}, nil
		}
	}
	if err != nil {
		return Result{}, fmt.Errorf("get %s: %w", ref, err)
	}
	res, err := generic(ref.Kind, obj)
	if err != nil || res.Status != Current {
		return res, err
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return deploymentResult(o, res), nil
	case *corev1.Service:
		return serviceResult(ctx, cs, o)
	case *networkingv1.Ingress:
		return ingressResult(ctx, cs, o)
	}
	return res, nil
}

func get(ctx context.Context, cs kubernetes.Interface, ref Ref) (runtime.Object, error) {
	opts := metav1.GetOptions{}
	switch ref.Kind {
	case KindNamespace:
		return cs.CoreV1().Namespaces().Get(ctx, ref.Name, opts)
	case KindConfigMap:
		return cs.CoreV1().ConfigMaps(ref.Namespace).Get(ctx, ref.Name, opts)
	case KindSecret:
		return cs.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, opts)
	case KindDeployment:
		return cs.AppsV1().Deployments(ref.Namespace).Get(ctx, ref.Name, opts)
	case KindService:
		return cs.CoreV1().Services(ref.Namespace).Get(ctx, ref.Name, opts)
	case KindIngress:
		return cs.NetworkingV1().Ingresses(ref.Namespace).Get(ctx, ref.Name, opts)
	case KindLease:
		return cs.CoordinationV1().Leases(ref.Namespace).Get(ctx, ref.Name, opts)
	case KindServiceAcc:
		return cs.CoreV1().ServiceAccounts(ref.Namespace).Get(ctx, ref.Name, opts)
	case KindNetworkPolicy:
		return cs.NetworkingV1().NetworkPolicies(ref.Namespace).Get(ctx, ref.Name, opts)
	}
	return nil, fmt.Errorf("readiness: unsupported kind %q", ref.Kind)
}

var apiVersions = map[string]string{
	KindNamespace:  "v1",
	KindConfigMap:  "v1",
	KindSecret:     "v1",
	KindService:    "v1",
	KindDeployment: "apps/v1",
	KindIngress:    "networking.k8s.io/v1",
	KindLease:      "coordination.k8s.io/v1",
	KindServiceAcc: "v1",

	KindNetworkPolicy: "networking.k8s.io/v1",
}

// generic runs kstatus on the object. Typed objects read from the API have
// no TypeMeta, and kstatus picks its rules by kind, so set it here.
func generic(kind string, obj runtime.Object) (Result, error) {
	m, ok := kstatusFields(obj)
	if !ok {
		var err error
		if m, err = runtime.DefaultUnstructuredConverter.ToUnstructured(withoutManagedFields(obj)); err != nil {
			return Result{}, err
		}
	}
	return judgeFields(kind, obj, m)
}

// judgeFields runs kstatus on m, the unstructured form of obj.
func judgeFields(kind string, obj runtime.Object, m map[string]any) (Result, error) {
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(apiVersions[kind])
	u.SetKind(kind)
	r, err := status.Compute(u)
	if err != nil {
		return Result{}, fmt.Errorf("kstatus %s/%s: %w", kind, u.GetName(), err)
	}
	switch r.Status {
	case status.CurrentStatus:
		return Result{Current, currentMessage(kind, r.Message)}, nil
	case status.TerminatingStatus:
		return Result{Terminating, "being deleted"}, nil
	case status.FailedStatus:
		return Result{Failed, r.Message}, nil
	case status.NotFoundStatus:
		return Result{NotFound, "not found"}, nil
	}
	msg := r.Message
	if d, ok := obj.(*appsv1.Deployment); ok {
		msg = replicaMessage(d)
	}
	return Result{InProgress, msg}, nil
}

// withoutManagedFields returns a shallow copy of obj without
// metadata.managedFields, which kstatus never reads and which are most of
// an object's size: converting it to unstructured was most of the CPU
// time of `kiln project list` with 1,000 projects. The caller's object
// (perhaps an informer's cached one) is not modified. Deployments and
// Services never get here (kstatusFields), and kinds kiln does not judge
// are returned as they are.
func withoutManagedFields(obj runtime.Object) runtime.Object {
	switch o := obj.(type) {
	case *networkingv1.Ingress:
		return copyWithoutManagedFields(o)
	case *corev1.Pod:
		return copyWithoutManagedFields(o)
	case *corev1.ConfigMap:
		return copyWithoutManagedFields(o)
	case *corev1.Secret:
		return copyWithoutManagedFields(o)
	case *corev1.Namespace:
		return copyWithoutManagedFields(o)
	}
	return obj
}

// copyWithoutManagedFields is a shallow copy of o without its managedFields.
func copyWithoutManagedFields[T any, P interface {
	*T
	SetManagedFields([]metav1.ManagedFieldsEntry)
}](o P) P {
	c := P(new(T))
	*c = *o
	c.SetManagedFields(nil)
	return c
}

// Judge applies the generic rules (kstatus, and the replica message of a
// Deployment) to an object already read, from a LIST say. What depends on
// other objects (a Service's endpoints, an Ingress's backends) is the
// caller's to add.
func Judge(kind string, obj runtime.Object) (Result, error) {
	res, err := generic(kind, obj)
	if d, ok := obj.(*appsv1.Deployment); ok && err == nil && res.Status == Current {
		res = deploymentResult(d, res)
	}
	return res, err
}

// CountReady counts the ready endpoints of EndpointSlices already read.
func CountReady(slices []discoveryv1.EndpointSlice) int { return countReady(slices) }

func replicaMessage(d *appsv1.Deployment) string {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return fmt.Sprintf("%d/%d replicas available", d.Status.AvailableReplicas, want)
}

func deploymentResult(d *appsv1.Deployment, r Result) Result {
	r.Message = replicaMessage(d)
	return r
}

// ReadyEndpoints counts the ready endpoints of a Service's EndpointSlices.
func ReadyEndpoints(ctx context.Context, cs kubernetes.Interface, namespace, service string) (int, error) {
	slices, err := cs.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + service,
	})
	if err != nil {
		return 0, fmt.Errorf("list endpointslices of service %s/%s: %w", namespace, service, err)
	}
	return countReady(slices.Items), nil
}

func countReady(slices []discoveryv1.EndpointSlice) int {
	n := 0
	for _, s := range slices {
		for _, e := range s.Endpoints {
			// Ready nil means unknown, which the API documents as ready.
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				n++
			}
		}
	}
	return n
}

func serviceResult(ctx context.Context, cs kubernetes.Interface, svc *corev1.Service) (Result, error) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return Result{Current, "external name"}, nil
	}
	n, err := ReadyEndpoints(ctx, cs, svc.Namespace, svc.Name)
	if err != nil {
		return Result{}, err
	}
	if n == 0 {
		return Result{InProgress, "no ready endpoints"}, nil
	}
	return Result{Current, fmt.Sprintf("%d ready endpoint%s", n, human.Plural(n))}, nil
}

// IngressBackends lists the Service names an Ingress routes to.
func IngressBackends(ing *networkingv1.Ingress) []string {
	set := map[string]bool{}
	if b := ing.Spec.DefaultBackend; b != nil && b.Service != nil {
		set[b.Service.Name] = true
	}
	for _, rule := range ing.Spec.Rules {
		if rule.HTTP == nil {
			continue
		}
		for _, p := range rule.HTTP.Paths {
			if p.Backend.Service != nil {
				set[p.Backend.Service.Name] = true
			}
		}
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func ingressResult(ctx context.Context, cs kubernetes.Interface, ing *networkingv1.Ingress) (Result, error) {
	backends := IngressBackends(ing)
	if len(backends) == 0 {
		return Result{Failed, "no backend services"}, nil
	}
	for _, name := range backends {
		svc, err := cs.CoreV1().Services(ing.Namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return Result{InProgress, "backend svc/" + name + " missing"}, nil
		}
		if err != nil {
			return Result{}, fmt.Errorf("get backend service %s/%s: %w", ing.Namespace, name, err)
		}
		// Judge the backend as a Service is judged, so an ExternalName
		// backend (which never has endpoints) counts as ready.
		r, err := serviceResult(ctx, cs, svc)
		if err != nil {
			return Result{}, err
		}
		if r.Status != Current {
			return Result{InProgress, "backend svc/" + name + " has " + r.Message}, nil
		}
	}
	msg := fmt.Sprintf("%d backend%s ready", len(backends), human.Plural(len(backends)))
	if ns, name, ok := Upstream(ing); ok {
		svc, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return Result{InProgress, "upstream svc/" + ns + "/" + name + " missing"}, nil
		}
		if err != nil {
			return Result{}, fmt.Errorf("get upstream service %s/%s: %w", ns, name, err)
		}
		r, err := serviceResult(ctx, cs, svc)
		if err != nil {
			return Result{}, err
		}
		if r.Status != Current {
			return Result{InProgress, "upstream svc/" + ns + "/" + name + " has " + r.Message}, nil
		}
		msg += ", upstream svc/" + ns + "/" + name + " ready"
	}
	var addrs []string
	for _, lb := range ing.Status.LoadBalancer.Ingress {
		if lb.Hostname != "" {
			addrs = append(addrs, lb.Hostname)
		} else if lb.IP != "" {
			addrs = append(addrs, lb.IP)
		}
	}
	if len(addrs) > 0 {
		msg += ", address " + strings.Join(addrs, ",")
	}
	return Result{Current, msg}, nil
}

// currentMessage replaces kstatus' generic wording ("Resource is always
// ready") with what Current means for kinds that have no rollout.
func currentMessage(kind, kstatusMessage string) string {
	switch kind {
	case KindNamespace:
		return "active"
	case KindConfigMap, KindSecret, KindServiceAcc, KindLease, KindNetworkPolicy:
		return "exists"
	}
	return kstatusMessage
}

package platform

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	networkingac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/readiness"
)

// Names of the NetworkPolicies kiln installs. Every namespace kiln creates
// denies all ingress by default; the other policies add back exactly what
// the platform needs. Enforcing them takes a CNI that implements
// NetworkPolicy; without one they are inert.
const (
	PolicyDenyAll      = "kiln-deny-ingress"
	PolicyFromGateway  = "kiln-allow-from-gateway"
	PolicySameTenant   = "kiln-allow-same-tenant"
	PolicyToGateway    = "kiln-allow-to-gateway"
	labelNamespaceName = "kubernetes.io/metadata.name" // set by the API server on every namespace
)

// TenantPolicyObjects are the NetworkPolicies of every tenant namespace:
// deny all ingress, admit the gateway's pods, and, with
// spec.tenantIsolation namespace, the pods of the tenant's own namespace.
func TenantPolicyObjects(cluster string, cfg *config.ClusterConfig) []Object {
	var out []Object
	for _, t := range cfg.Spec.Tenants {
		ns := TenantNamespace(t)
		l := labels(cluster)
		l[LabelTenant] = t
		out = append(out,
			policy(ns, PolicyDenyAll, l, networkingv1.NetworkPolicySpec{}),
			policy(ns, PolicyFromGateway, l, networkingv1.NetworkPolicySpec{
				Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{labelNamespaceName: Namespace}},
					PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{LabelName: GatewayName}},
				}}}},
			}))
		if cfg.Spec.AllowsSameNamespace() {
			out = append(out, policy(ns, PolicySameTenant, l, networkingv1.NetworkPolicySpec{
				Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
					PodSelector: &metav1.LabelSelector{},
				}}}},
			}))
		}
	}
	return out
}

// StaleTenantPolicies are the policies kiln must remove because the config
// no longer asks for them (spec.tenantIsolation back to gateway).
func StaleTenantPolicies(cfg *config.ClusterConfig) []readiness.Ref {
	if cfg.Spec.AllowsSameNamespace() {
		return nil
	}
	var out []readiness.Ref
	for _, t := range cfg.Spec.Tenants {
		out = append(out, readiness.Ref{Kind: readiness.KindNetworkPolicy, Namespace: TenantNamespace(t), Name: PolicySameTenant})
	}
	return out
}

// SystemPolicyObjects are kiln-system's NetworkPolicies: deny all ingress
// but to the gateway's pods on their http port (from anywhere: it is the
// way in).
func SystemPolicyObjects(cluster string) []Object {
	l := labels(cluster)
	port := intstr.FromString("http")
	tcp := corev1.ProtocolTCP
	return []Object{
		policy(Namespace, PolicyDenyAll, l, networkingv1.NetworkPolicySpec{}),
		policy(Namespace, PolicyToGateway, l, networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelName: GatewayName}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		}),
	}
}

// PolicyObjects are every NetworkPolicy of the platform, kiln-system's
// first, in apply order.
func PolicyObjects(cluster string, cfg *config.ClusterConfig) []Object {
	return append(SystemPolicyObjects(cluster), TenantPolicyObjects(cluster, cfg)...)
}

// policy is one ingress NetworkPolicy. An empty pod selector selects every
// pod of the namespace; an empty rule list denies all ingress.
func policy(ns, name string, l map[string]string, spec networkingv1.NetworkPolicySpec) Object {
	spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	return Object{
		Ref:   readiness.Ref{Kind: readiness.KindNetworkPolicy, Namespace: ns, Name: name},
		Apply: policyApply(ns, name, l, spec),
	}
}

// policyApply turns a typed spec into its apply configuration; the two
// share their JSON form, and a typed spec is what Drift compares with.
func policyApply(ns, name string, l map[string]string, spec networkingv1.NetworkPolicySpec) *networkingac.NetworkPolicyApplyConfiguration {
	var sa networkingac.NetworkPolicySpecApplyConfiguration
	b, err := json.Marshal(spec)
	if err == nil {
		err = json.Unmarshal(b, &sa)
	}
	if err != nil {
		panic(fmt.Sprintf("platform: network policy %s/%s: %v", ns, name, err)) // static data: a bug
	}
	return networkingac.NetworkPolicy(name, ns).WithLabels(l).WithSpec(&sa)
}

// Drift says how the live NetworkPolicy differs from obj ("" when it holds
// what kiln applies, or does not exist: readiness reports that). It reads
// with GET only, so a read-only role can ask.
func Drift(ctx context.Context, cs kubernetes.Interface, obj Object) (string, error) {
	a, ok := obj.Apply.(*networkingac.NetworkPolicyApplyConfiguration)
	if !ok {
		return "", fmt.Errorf("platform: no drift check for %s", obj.Ref)
	}
	live, err := cs.NetworkingV1().NetworkPolicies(obj.Ref.Namespace).Get(ctx, obj.Ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("get %s: %w", obj.Ref, err)
	}
	var want networkingv1.NetworkPolicySpec
	b, err := json.Marshal(a.Spec)
	if err == nil {
		err = json.Unmarshal(b, &want)
	}
	if err != nil {
		return "", err
	}
	if !equality.Semantic.DeepEqual(normalize(want), normalize(live.Spec)) {
		return "rules differ from what kiln applied (an upgrade of this cluster, or continuing its create, restores them)", nil
	}
	return "", nil
}

// normalize makes empty and nil lists compare equal.
func normalize(s networkingv1.NetworkPolicySpec) networkingv1.NetworkPolicySpec {
	if len(s.Ingress) == 0 {
		s.Ingress = nil
	}
	if len(s.Egress) == 0 {
		s.Egress = nil
	}
	if len(s.PodSelector.MatchLabels) == 0 {
		s.PodSelector.MatchLabels = nil
	}
	return s
}

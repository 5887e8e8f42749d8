package policycheck

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/project"
	"github.com/kilnctl/kiln/engine/readiness"
)

// The question of issue #22: what do the NetworkPolicies kiln installs
// admit? The policies are the exact objects kiln applies
// (platform.PolicyObjects), the namespaces and the gateway pod are kiln's
// own objects (platform.NamespaceObject, TenantObjects, GatewayObjects),
// and the verdict comes from an engine kiln does not own: the policy
// matcher of cyclonus, the NetworkPolicy engine that sigs.k8s.io/
// network-policy-api's policy-assistant grew out of and still imports.

const (
	cluster     = "dev1"
	externalIP  = "203.0.113.5" // TEST-NET-3: outside every namespace
	metricsPort = 9090
	// labelNamespaceName is the label the API server puts on every
	// namespace; kiln's allow-from-gateway selects kiln-system by it.
	labelNamespaceName = "kubernetes.io/metadata.name"
)

// endpoint is one side of a connection: a pod (its namespace's and its own
// labels, its container ports) or, with no namespace, an address outside
// the cluster.
type endpoint struct {
	name     string
	ip       string
	ns       string
	nsLabels map[string]string
	labels   map[string]string
	ports    []corev1.ContainerPort
}

// world is the cluster the questions are asked about: kiln-system with the
// gateway and one other pod, tenants a and b with two projects each (web,
// api), a client in default, and a host outside the cluster.
type world struct {
	gateway, systemOther        endpoint
	aWeb, aAPI, bWeb, bAPI      endpoint
	defaultClient, outside      endpoint
	projectPort                 int
	gatewayHTTP, gatewayMetrics int
}

// fromApply decodes a client-go apply configuration into its typed object;
// the two share their JSON form.
func fromApply[T any](t *testing.T, apply any) *T {
	t.Helper()
	b, err := json.Marshal(apply)
	if err != nil {
		t.Fatal(err)
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func testConfig(isolation string) *config.ClusterConfig {
	cfg := config.Default(cluster)
	cfg.Spec.Tenants = []string{"a", "b"}
	cfg.Spec.TenantIsolation = isolation
	return cfg
}

// kilnPolicies are the NetworkPolicies kiln applies for cfg, typed.
func kilnPolicies(t *testing.T, cfg *config.ClusterConfig) []*networkingv1.NetworkPolicy {
	t.Helper()
	var out []*networkingv1.NetworkPolicy
	for _, o := range platform.PolicyObjects(cluster, cfg) {
		p := fromApply[networkingv1.NetworkPolicy](t, o.Apply)
		if p.Namespace != o.Ref.Namespace || p.Name != o.Ref.Name {
			t.Fatalf("apply configuration of %s decodes as %s/%s", o.Ref, p.Namespace, p.Name)
		}
		out = append(out, p)
	}
	return out
}

// namespaceLabels are a namespace's labels as the API server holds them:
// kiln's, plus the name label it adds to every namespace.
func namespaceLabels(t *testing.T, o platform.Object) map[string]string {
	ns := fromApply[corev1.Namespace](t, o.Apply)
	l := map[string]string{labelNamespaceName: ns.Name}
	for k, v := range ns.Labels {
		l[k] = v
	}
	return l
}

func newWorld(t *testing.T, cfg *config.ClusterConfig) world {
	t.Helper()
	nsLabels := map[string]map[string]string{
		platform.Namespace: namespaceLabels(t, platform.NamespaceObject(cluster)),
		"default":          {labelNamespaceName: "default"},
	}
	for _, o := range platform.TenantObjects(cluster, cfg.Spec.Tenants) {
		nsLabels[o.Ref.Name] = namespaceLabels(t, o)
	}
	for _, ns := range []string{platform.Namespace, platform.TenantNamespace("a"), platform.TenantNamespace("b")} {
		if len(nsLabels[ns]) < 2 {
			t.Fatalf("namespace %s: labels %v, want kiln's", ns, nsLabels[ns])
		}
	}

	// The gateway pod as its Deployment's template makes it.
	var gw endpoint
	for _, o := range platform.GatewayObjects(cluster, cfg, "v0.0.0-test") {
		if o.Ref.Kind == readiness.KindDeployment && o.Ref.Name == platform.GatewayName {
			dep := fromApply[appsv1.Deployment](t, o.Apply)
			gw = endpoint{name: "gateway", ip: "10.0.0.10", ns: dep.Namespace, labels: dep.Spec.Template.Labels}
			for _, c := range dep.Spec.Template.Spec.Containers {
				gw.ports = append(gw.ports, c.Ports...)
			}
		}
	}
	if gw.ns != platform.Namespace || len(gw.labels) == 0 {
		t.Fatalf("no gateway Deployment in platform.GatewayObjects (got %+v)", gw)
	}
	gw.nsLabels = nsLabels[gw.ns]
	w := world{gateway: gw, projectPort: int(config.DefaultStackPort)}
	for _, p := range gw.ports {
		switch p.Name {
		case "http":
			w.gatewayHTTP = int(p.ContainerPort)
		case "metrics":
			w.gatewayMetrics = int(p.ContainerPort)
		}
	}
	if w.gatewayHTTP != 8080 || w.gatewayMetrics != metricsPort {
		t.Fatalf("gateway container ports %+v, want http 8080 and metrics %d", gw.ports, metricsPort)
	}

	// Any other pod of kiln-system (kiln runs none today): it even has a
	// port named http, which the allow-to-gateway rule names.
	w.systemOther = endpoint{name: "kiln-system/other", ip: "10.0.0.11", ns: platform.Namespace, nsLabels: nsLabels[platform.Namespace],
		labels: map[string]string{platform.LabelName: "other", platform.LabelManagedBy: "kiln", platform.LabelCluster: cluster},
		ports:  []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}

	// A project's pods carry the project labels of its Deployment's
	// template and the stack's port, named http.
	projectPod := func(ip, tenant, name string) endpoint {
		ns := platform.TenantNamespace(tenant)
		return endpoint{name: tenant + "/" + name, ip: ip, ns: ns, nsLabels: nsLabels[ns],
			labels: map[string]string{project.LabelManagedBy: "kiln", project.LabelCluster: cluster,
				project.LabelTenant: tenant, project.LabelProject: name},
			ports: []corev1.ContainerPort{{Name: "http", ContainerPort: config.DefaultStackPort, Protocol: corev1.ProtocolTCP}}}
	}
	w.aWeb = projectPod("10.0.1.10", "a", "web")
	w.aAPI = projectPod("10.0.1.11", "a", "api")
	w.bWeb = projectPod("10.0.2.10", "b", "web")
	w.bAPI = projectPod("10.0.2.11", "b", "api")
	w.defaultClient = endpoint{name: "default/client", ip: "10.0.3.10", ns: "default", nsLabels: nsLabels["default"],
		labels: map[string]string{"app": "client"}}
	w.outside = endpoint{name: "outside " + externalIP, ip: externalIP}
	return w
}

// traffic is a TCP connection from src to port of dst. As on a node, a
// numbered port is resolved to the name of dst's container port that
// listens on it, so that rules naming the port ("http") can match.
func traffic(src, dst endpoint, port int) *matcher.Traffic {
	peer := func(e endpoint) *matcher.TrafficPeer {
		p := &matcher.TrafficPeer{IP: e.ip}
		if e.ns != "" {
			p.Internal = &matcher.InternalPeer{Namespace: e.ns, NamespaceLabels: e.nsLabels, PodLabels: e.labels}
		}
		return p
	}
	name := ""
	for _, p := range dst.ports {
		if int(p.ContainerPort) == port && (p.Protocol == "" || p.Protocol == corev1.ProtocolTCP) {
			name = p.Name
		}
	}
	return &matcher.Traffic{Source: peer(src), Destination: peer(dst), ResolvedPort: port, ResolvedPortName: name, Protocol: corev1.ProtocolTCP}
}

// engine answers for one set of policies; it builds the matcher both plain
// and simplified (as policy-assistant's CLI does) and insists they agree.
type engine struct {
	plain, simplified *matcher.Policy
}

func newEngine(policies []*networkingv1.NetworkPolicy) engine {
	return engine{plain: matcher.BuildNetworkPolicies(false, policies), simplified: matcher.BuildNetworkPolicies(true, policies)}
}

func (e engine) allowed(t *testing.T, tr *matcher.Traffic) bool {
	t.Helper()
	r := e.plain.IsTrafficAllowed(tr)
	if s := e.simplified.IsTrafficAllowed(tr).IsAllowed(); s != r.IsAllowed() {
		t.Fatalf("engine disagrees with itself (plain %t, simplified %t):\n%s", r.IsAllowed(), s, tr.Table())
	}
	return r.IsAllowed()
}

// question is one row of the truth table.
type question struct {
	what     string
	src, dst endpoint
	port     int
	// want per spec.tenantIsolation: gateway (also unset), namespace
	gateway, namespace bool
}

func questions(w world) []question {
	return []question{
		{"tenant a -> project of tenant b", w.aWeb, w.bWeb, w.projectPort, false, false},
		{"tenant a -> other project of tenant b", w.aAPI, w.bAPI, w.projectPort, false, false},
		{"tenant b -> project of tenant a", w.bWeb, w.aWeb, w.projectPort, false, false},
		{"tenant a -> other project of tenant a", w.aWeb, w.aAPI, w.projectPort, false, true},
		{"tenant b -> other project of tenant b", w.bAPI, w.bWeb, w.projectPort, false, true},
		{"gateway -> project of tenant a", w.gateway, w.aWeb, w.projectPort, true, true},
		{"gateway -> project of tenant b", w.gateway, w.bAPI, w.projectPort, true, true},
		{"tenant a -> gateway http", w.aWeb, w.gateway, w.gatewayHTTP, true, true},
		{"tenant a -> gateway metrics", w.aWeb, w.gateway, w.gatewayMetrics, false, false},
		{"tenant b -> gateway metrics", w.bAPI, w.gateway, w.gatewayMetrics, false, false},
		{"outside -> project of tenant a", w.outside, w.aWeb, w.projectPort, false, false},
		{"outside -> project of tenant b", w.outside, w.bAPI, w.projectPort, false, false},
		{"outside -> gateway http", w.outside, w.gateway, w.gatewayHTTP, true, true},
		{"outside -> gateway metrics", w.outside, w.gateway, w.gatewayMetrics, false, false},
		{"default -> other kiln-system pod (port named http)", w.defaultClient, w.systemOther, 8080, false, false},
		{"tenant a -> other kiln-system pod (port named http)", w.aWeb, w.systemOther, 8080, false, false},
		{"default -> gateway metrics", w.defaultClient, w.gateway, w.gatewayMetrics, false, false},
		{"default -> gateway http", w.defaultClient, w.gateway, w.gatewayHTTP, true, true},
		{"default -> project of tenant a", w.defaultClient, w.aWeb, w.projectPort, false, false},
		{"other kiln-system pod -> project of tenant a", w.systemOther, w.aWeb, w.projectPort, false, false},
	}
}

func verdict(b bool) string {
	if b {
		return "allowed"
	}
	return "denied"
}

// TestKilnPoliciesEnforceIsolation asks the engine every question of the
// truth table for both isolation modes, and requires kiln's answers.
func TestKilnPoliciesEnforceIsolation(t *testing.T) {
	for _, isolation := range []string{"", config.IsolationGateway, config.IsolationNamespace} {
		name := isolation
		if name == "" {
			name = "unset"
		}
		t.Run("tenantIsolation="+name, func(t *testing.T) {
			cfg := testConfig(isolation)
			w := newWorld(t, cfg)
			policies := kilnPolicies(t, cfg)
			e := newEngine(policies)
			var table strings.Builder
			for _, q := range questions(w) {
				want := q.gateway
				if cfg.Spec.AllowsSameNamespace() {
					want = q.namespace
				}
				tr := traffic(q.src, q.dst, q.port)
				got := e.allowed(t, tr)
				fmt.Fprintf(&table, "  %-52s %-7s (%s -> %s:%d %s)\n", q.what, verdict(got), q.src.name, q.dst.name, q.port, tr.ResolvedPortName)
				if got != want {
					t.Errorf("%s: engine says %s, want %s\n%s%s", q.what, verdict(got), verdict(want), tr.Table(), e.plain.IsTrafficAllowed(tr).Table())
				}
			}
			t.Logf("%d policies; the engine's answers:\n%s", len(policies), table.String())
		})
	}
}

// mutate returns a deep copy of policies with f applied to the one named
// ns/name (which must exist).
func mutate(t *testing.T, policies []*networkingv1.NetworkPolicy, ns, name string, f func(*networkingv1.NetworkPolicy)) []*networkingv1.NetworkPolicy {
	t.Helper()
	var out []*networkingv1.NetworkPolicy
	found := false
	for _, p := range policies {
		p = p.DeepCopy()
		if p.Namespace == ns && p.Name == name {
			f(p)
			found = true
		}
		out = append(out, p)
	}
	if !found {
		t.Fatalf("no policy %s/%s to break", ns, name)
	}
	return out
}

// TestEngineCanSayNo is the negative control: the same questions on policy
// sets that are known to be wrong get the wrong answers, so the test above
// can fail and its denials come from kiln's policies, not from the engine
// or the world.
func TestEngineCanSayNo(t *testing.T) {
	cfg := testConfig(config.IsolationGateway)
	w := newWorld(t, cfg)
	good := kilnPolicies(t, cfg)
	a := platform.TenantNamespace("a")
	for _, tt := range []struct {
		what     string
		policies []*networkingv1.NetworkPolicy
		src, dst endpoint
		port     int
		want     bool
	}{
		// No policy at all: Kubernetes admits everything.
		{"no policies: tenant a -> project of tenant b", nil, w.aWeb, w.bWeb, w.projectPort, true},
		{"no policies: tenant a -> other project of tenant a", nil, w.aWeb, w.aAPI, w.projectPort, true},
		{"no policies: outside -> project of tenant a", nil, w.outside, w.aWeb, w.projectPort, true},
		{"no policies: tenant a -> gateway metrics", nil, w.aWeb, w.gateway, w.gatewayMetrics, true},
		{"no policies: default -> other kiln-system pod", nil, w.defaultClient, w.systemOther, 8080, true},
		// allow-from-gateway selecting a label the gateway does not carry.
		{"allow-from-gateway with a wrong pod label: gateway -> project of tenant a",
			mutate(t, good, a, platform.PolicyFromGateway, func(p *networkingv1.NetworkPolicy) {
				p.Spec.Ingress[0].From[0].PodSelector.MatchLabels[platform.LabelName] = "kiln-gateway-typo"
			}), w.gateway, w.aWeb, w.projectPort, false},
		// ... or a namespace the gateway does not run in.
		{"allow-from-gateway in the wrong namespace: gateway -> project of tenant a",
			mutate(t, good, a, platform.PolicyFromGateway, func(p *networkingv1.NetworkPolicy) {
				p.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels[labelNamespaceName] = "default"
			}), w.gateway, w.aWeb, w.projectPort, false},
		// allow-from-gateway that forgot its namespace selector: only pods
		// of the tenant's own namespace with the gateway's label match.
		{"allow-from-gateway without namespace selector: gateway -> project of tenant a",
			mutate(t, good, a, platform.PolicyFromGateway, func(p *networkingv1.NetworkPolicy) {
				p.Spec.Ingress[0].From[0].NamespaceSelector = nil
			}), w.gateway, w.aWeb, w.projectPort, false},
		// The named port is resolved, not ignored: naming metrics instead
		// of http swaps which gateway port is open.
		{"allow-to-gateway naming metrics: tenant a -> gateway http",
			mutate(t, good, platform.Namespace, platform.PolicyToGateway, func(p *networkingv1.NetworkPolicy) {
				port := intstr.FromString("metrics")
				p.Spec.Ingress[0].Ports[0].Port = &port
			}), w.aWeb, w.gateway, w.gatewayHTTP, false},
		{"allow-to-gateway naming metrics: tenant a -> gateway metrics",
			mutate(t, good, platform.Namespace, platform.PolicyToGateway, func(p *networkingv1.NetworkPolicy) {
				port := intstr.FromString("metrics")
				p.Spec.Ingress[0].Ports[0].Port = &port
			}), w.aWeb, w.gateway, w.gatewayMetrics, true},
		// Without deny-all in kiln-system its other pods are open.
		{"kiln-system without deny-all: default -> other kiln-system pod",
			drop(good, platform.Namespace, platform.PolicyDenyAll), w.defaultClient, w.systemOther, 8080, true},
	} {
		tr := traffic(tt.src, tt.dst, tt.port)
		if got := newEngine(tt.policies).allowed(t, tr); got != tt.want {
			t.Errorf("%s: engine says %s, want %s\n%s", tt.what, verdict(got), verdict(tt.want), tr.Table())
		}
	}
	// And the same questions on kiln's own policies get kiln's answers.
	e := newEngine(good)
	for _, tr := range []*matcher.Traffic{
		traffic(w.aWeb, w.bWeb, w.projectPort), traffic(w.outside, w.aWeb, w.projectPort),
		traffic(w.aWeb, w.gateway, w.gatewayMetrics), traffic(w.defaultClient, w.systemOther, 8080),
	} {
		if e.allowed(t, tr) {
			t.Errorf("kiln's policies allow\n%s", tr.Table())
		}
	}
	if !e.allowed(t, traffic(w.gateway, w.aWeb, w.projectPort)) {
		t.Error("kiln's policies deny gateway -> project of tenant a")
	}
}

// drop returns policies without ns/name.
func drop(policies []*networkingv1.NetworkPolicy, ns, name string) []*networkingv1.NetworkPolicy {
	var out []*networkingv1.NetworkPolicy
	for _, p := range policies {
		if p.Namespace != ns || p.Name != name {
			out = append(out, p)
		}
	}
	return out
}

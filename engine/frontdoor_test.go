package engine

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilnctl/kiln/engine/config"
)

func ds(ns, name string, ready int32, containers ...corev1.Container) appsv1.DaemonSet {
	if len(containers) == 0 {
		containers = []corev1.Container{{Name: name}}
	}
	return appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: containers}}},
		Status:     appsv1.DaemonSetStatus{NumberReady: ready, DesiredNumberScheduled: ready},
	}
}

func TestDetectIsolation(t *testing.T) {
	labelled := ds("calico-system", "node-agent", 3)
	labelled.Labels = map[string]string{"k8s-app": "calico-node"}
	tests := []struct {
		name   string
		in     []appsv1.DaemonSet
		state  string
		plugin string // substring
		reason string // substring
	}{
		{"nothing", nil, IsolationUnknown, "", "no recognised network plugin among the cluster's 0 DaemonSets"},
		{"unrelated", []appsv1.DaemonSet{ds("kube-system", "kube-proxy", 1)}, IsolationUnknown, "", "1 DaemonSets"},
		{"calico", []appsv1.DaemonSet{ds("kube-system", "kube-proxy", 1), ds("kube-system", "calico-node", 2)}, IsolationEnforced, "calico (DaemonSet kube-system/calico-node)", "2/2 pods ready"},
		{"calico by label", []appsv1.DaemonSet{labelled}, IsolationEnforced, "calico (DaemonSet calico-system/node-agent)", "Calico"},
		{"cilium", []appsv1.DaemonSet{ds("kube-system", "cilium", 1)}, IsolationEnforced, "cilium", "Cilium"},
		{"kube-router", []appsv1.DaemonSet{ds("kube-system", "kube-router", 1)}, IsolationEnforced, "kube-router", ""},
		{"antrea", []appsv1.DaemonSet{ds("kube-system", "antrea-agent", 1)}, IsolationEnforced, "antrea", ""},
		{"weave", []appsv1.DaemonSet{ds("kube-system", "weave-net", 1)}, IsolationEnforced, "weave-net", ""},
		{"canal", []appsv1.DaemonSet{ds("kube-system", "canal", 1)}, IsolationEnforced, "canal", ""},
		{"kube-network-policies beside kindnet", []appsv1.DaemonSet{ds("kube-system", "kindnet", 1), ds("kube-system", "kube-network-policies", 1)}, IsolationEnforced, "kube-network-policies", ""},
		{"calico beside flannel", []appsv1.DaemonSet{ds("kube-flannel", "kube-flannel-ds", 1), ds("kube-system", "calico-node", 1)}, IsolationEnforced, "calico", ""},
		{"flannel alone", []appsv1.DaemonSet{ds("kube-flannel", "kube-flannel-ds", 1)}, IsolationNotEnforced, "flannel (DaemonSet kube-flannel/kube-flannel-ds)", "flannel alone does not enforce"},
		{"kindnet", []appsv1.DaemonSet{ds("kube-system", "kindnet", 1)}, IsolationNotEnforced, "kindnet", "without its network policy controller"},
		{"kindnet with policies", []appsv1.DaemonSet{ds("kube-system", "kindnet", 1, corev1.Container{Name: "kindnet-cni", Args: []string{"--network-policy=true"}})}, IsolationEnforced, "kindnet", "--network-policy=true"},
		{"aws-node without agent", []appsv1.DaemonSet{ds("kube-system", "aws-node", 2, corev1.Container{Name: "aws-node"})}, IsolationNotEnforced, "aws-node", "without its network policy agent"},
		{"aws-node agent off", []appsv1.DaemonSet{ds("kube-system", "aws-node", 2, corev1.Container{Name: "aws-node"}, corev1.Container{Name: "aws-eks-nodeagent", Args: []string{"--enable-network-policy=false"}})}, IsolationNotEnforced, "aws-node", "without --enable-network-policy=true"},
		{"aws-node agent on", []appsv1.DaemonSet{ds("kube-system", "aws-node", 2, corev1.Container{Name: "aws-node"}, corev1.Container{Name: "aws-network-policy-agent", Args: []string{"--enable-network-policy", "true"}})}, IsolationEnforced, "aws-node", "network policy agent"},
		{"calico with no ready pods", []appsv1.DaemonSet{ds("kube-system", "calico-node", 0)}, IsolationUnknown, "calico", "none of its pods is ready"},
		{"calico not ready beside flannel", []appsv1.DaemonSet{ds("kube-system", "calico-node", 0), ds("kube-system", "kube-flannel-ds", 1)}, IsolationUnknown, "calico", "none of its pods is ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DetectIsolation(tt.in)
			if got.State != tt.state || !strings.Contains(got.Plugin, tt.plugin) || !strings.Contains(got.Reason, tt.reason) {
				t.Fatalf("DetectIsolation = %+v, want state %q, plugin ~%q, reason ~%q", got, tt.state, tt.plugin, tt.reason)
			}
			if got.State != IsolationEnforced && strings.Contains(got.String(), "enforced:") && !strings.HasPrefix(got.String(), "not enforced") {
				t.Fatalf("String %q claims enforcement", got.String())
			}
		})
	}
}

func TestFrontDoorOf(t *testing.T) {
	svc := func(typ corev1.ServiceType, nodePort int32, lb ...corev1.LoadBalancerIngress) *corev1.Service {
		return &corev1.Service{
			Spec:   corev1.ServiceSpec{Type: typ, Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: nodePort}}},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: lb}},
		}
	}
	node := func(name, ip string, ready corev1.ConditionStatus) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "203.0.113.9"}, {Type: corev1.NodeInternalIP, Address: ip}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}},
		}}
	}
	class := func(name string, def bool) networkingv1.IngressClass {
		c := networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if def {
			c.Annotations = map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}
		}
		return c
	}
	route := func(lb ...networkingv1.IngressLoadBalancerIngress) networkingv1.Ingress {
		return networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "default.web"}, Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{Ingress: lb}}}
	}
	const d = "dev1.example.test"
	tests := []struct {
		name      string
		f         frontDoorFacts
		addr, dns string
		ready     bool
		msg, tls  string // substrings
	}{
		{name: "none", f: frontDoorFacts{Mode: config.ExposeNone, Domain: d}, msg: "no front door: reach the gateway with `kubectl port-forward -n kiln-system svc/kiln-gateway 8080:80`", tls: "plain HTTP"},
		{name: "none with hints", f: frontDoorFacts{Mode: config.ExposeNone, Domain: d, Hints: frontDoorHints{Kubectl: "kubectl --context kind-dev1"}}, msg: "`kubectl --context kind-dev1 port-forward -n kiln-system svc/kiln-gateway 8080:80`", tls: "plain HTTP"},
		{name: "lb not applied, with hints", f: frontDoorFacts{Mode: config.ExposeLoadBalancer, Domain: d, Service: svc(corev1.ServiceTypeClusterIP, 0), Hints: frontDoorHints{Upgrade: "kiln upgrade kube dev1 -c FILE --context kind-dev1"}}, msg: "(run `kiln upgrade kube dev1 -c FILE --context kind-dev1` to apply spec.gateway.expose)", tls: "load balancer"},
		{name: "none with tls", f: frontDoorFacts{Mode: config.ExposeNone, Domain: d, TLSSecret: "dev1-tls"}, msg: "port-forward", tls: "at the gateway, with Secret kiln-system/dev1-tls"},
		{name: "lb hostname", f: frontDoorFacts{Mode: config.ExposeLoadBalancer, Domain: d, Service: svc(corev1.ServiceTypeLoadBalancer, 31000, corev1.LoadBalancerIngress{Hostname: "a1.elb.amazonaws.com"})},
			addr: "a1.elb.amazonaws.com", dns: "*.dev1.example.test CNAME a1.elb.amazonaws.com", ready: true, tls: "at the load balancer"},
		{name: "lb ip", f: frontDoorFacts{Mode: config.ExposeLoadBalancer, Domain: d, Service: svc(corev1.ServiceTypeLoadBalancer, 31000, corev1.LoadBalancerIngress{IP: "198.51.100.7"})},
			addr: "198.51.100.7", dns: "*.dev1.example.test A 198.51.100.7", ready: true},
		{name: "lb pending", f: frontDoorFacts{Mode: config.ExposeLoadBalancer, Domain: d, Service: svc(corev1.ServiceTypeLoadBalancer, 31000)},
			msg: "no load-balancer address yet"},
		{name: "lb not applied", f: frontDoorFacts{Mode: config.ExposeLoadBalancer, Domain: d, Service: svc(corev1.ServiceTypeClusterIP, 0)},
			msg: "is type ClusterIP, not LoadBalancer"},
		{name: "service unreadable", f: frontDoorFacts{Mode: config.ExposeLoadBalancer, Domain: d, ServiceErr: "not permitted to get services"},
			msg: "Service kiln-system/kiln-gateway not permitted to get services"},
		{name: "nodePort", f: frontDoorFacts{Mode: config.ExposeNodePort, Domain: d, Service: svc(corev1.ServiceTypeNodePort, 31080),
			Nodes: []corev1.Node{node("b", "10.0.0.2", corev1.ConditionTrue), node("a", "10.0.0.1", corev1.ConditionFalse)}},
			addr: "10.0.0.2:31080", dns: "*.dev1.example.test A 10.0.0.2", ready: true, msg: "node port 31080"},
		{name: "nodePort nodes unreadable", f: frontDoorFacts{Mode: config.ExposeNodePort, Domain: d, Service: svc(corev1.ServiceTypeNodePort, 31080), NodesErr: "not permitted to list nodes"},
			msg: "not permitted to list nodes"},
		{name: "ingress default class, address", f: frontDoorFacts{Mode: config.ExposeIngress, Domain: d, Classes: []networkingv1.IngressClass{class("nginx", true)},
			Ingresses: []networkingv1.Ingress{route(networkingv1.IngressLoadBalancerIngress{IP: "192.0.2.10"})}},
			addr: "192.0.2.10", dns: "*.dev1.example.test A 192.0.2.10", ready: true, msg: "class nginx", tls: "at the ingress controller"},
		{name: "ingress no routes", f: frontDoorFacts{Mode: config.ExposeIngress, Domain: d, Classes: []networkingv1.IngressClass{class("nginx", true)}},
			msg: "no project route yet"},
		{name: "ingress routes without address", f: frontDoorFacts{Mode: config.ExposeIngress, Domain: d, Classes: []networkingv1.IngressClass{class("nginx", true)}, Ingresses: []networkingv1.Ingress{route()}},
			msg: "no address on the route Ingresses yet"},
		{name: "ingress class missing", f: frontDoorFacts{Mode: config.ExposeIngress, Domain: d, IngressClass: "traefik", Classes: []networkingv1.IngressClass{class("nginx", true)}},
			msg: "no IngressClass traefik in the cluster"},
		{name: "ingress no default", f: frontDoorFacts{Mode: config.ExposeIngress, Domain: d, Classes: []networkingv1.IngressClass{class("nginx", false)}},
			msg: "no default IngressClass"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := frontDoorOf(tt.f)
			if got.Address != tt.addr || got.DNS != tt.dns || got.Ready != tt.ready || !strings.Contains(got.Message, tt.msg) || !strings.Contains(got.TLS, tt.tls) || got.Mode != tt.f.Mode {
				t.Fatalf("frontDoorOf = %+v\nwant address %q dns %q ready %v message ~%q tls ~%q", got, tt.addr, tt.dns, tt.ready, tt.msg, tt.tls)
			}
		})
	}
}

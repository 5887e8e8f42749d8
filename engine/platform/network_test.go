package platform

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/kilnctl/kiln/engine/config"
)

func TestPolicyObjects(t *testing.T) {
	for _, tt := range []struct {
		isolation string
		want      []string
		stale     int
	}{
		{"", []string{
			"kiln-system/kiln-deny-ingress", "kiln-system/kiln-allow-to-gateway",
			"kiln-tenant-a/kiln-deny-ingress", "kiln-tenant-a/kiln-allow-from-gateway",
			"kiln-tenant-b/kiln-deny-ingress", "kiln-tenant-b/kiln-allow-from-gateway",
		}, 2},
		{config.IsolationNamespace, []string{
			"kiln-system/kiln-deny-ingress", "kiln-system/kiln-allow-to-gateway",
			"kiln-tenant-a/kiln-deny-ingress", "kiln-tenant-a/kiln-allow-from-gateway", "kiln-tenant-a/kiln-allow-same-tenant",
			"kiln-tenant-b/kiln-deny-ingress", "kiln-tenant-b/kiln-allow-from-gateway", "kiln-tenant-b/kiln-allow-same-tenant",
		}, 0},
	} {
		cfg := config.Default("dev1")
		cfg.Spec.Tenants = []string{"a", "b"}
		cfg.Spec.TenantIsolation = tt.isolation
		var got []string
		for _, o := range PolicyObjects("dev1", cfg) {
			got = append(got, o.Ref.Namespace+"/"+o.Ref.Name)
			// Every policy is ingress-only: egress stays open.
			b, _ := json.Marshal(o.Apply)
			var p networkingv1.NetworkPolicy
			if err := json.Unmarshal(b, &p); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
				t.Errorf("%s: policy types %v", o.Ref, p.Spec.PolicyTypes)
			}
			switch o.Ref.Name {
			case PolicyDenyAll:
				if len(p.Spec.Ingress) != 0 || len(p.Spec.PodSelector.MatchLabels) != 0 {
					t.Errorf("%s: %+v, want every pod selected and no rule", o.Ref, p.Spec)
				}
			case PolicyFromGateway:
				from := p.Spec.Ingress[0].From[0]
				if from.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != Namespace || from.PodSelector.MatchLabels[LabelName] != GatewayName {
					t.Errorf("%s: from %+v, want the gateway's pods in %s", o.Ref, from, Namespace)
				}
			case PolicyToGateway:
				if p.Spec.PodSelector.MatchLabels[LabelName] != GatewayName || p.Spec.Ingress[0].Ports[0].Port.String() != "http" || len(p.Spec.Ingress[0].From) != 0 {
					t.Errorf("%s: %+v, want ingress to the gateway's http port only", o.Ref, p.Spec)
				}
			}
		}
		if strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("isolation %q: policies\n%v\nwant\n%v", tt.isolation, got, tt.want)
		}
		if n := len(StaleTenantPolicies(cfg)); n != tt.stale {
			t.Errorf("isolation %q: %d stale policies to remove, want %d", tt.isolation, n, tt.stale)
		}
	}
}

func TestNamespacesEnforceRestricted(t *testing.T) {
	objs := append([]Object{NamespaceObject("dev1")}, TenantObjects("dev1", []string{"a"})...)
	for _, o := range objs {
		b, _ := json.Marshal(o.Apply)
		var ns struct {
			Metadata struct{ Labels map[string]string }
		}
		if err := json.Unmarshal(b, &ns); err != nil {
			t.Fatal(err)
		}
		for _, mode := range []string{"enforce", "warn", "audit"} {
			if ns.Metadata.Labels["pod-security.kubernetes.io/"+mode] != "restricted" || ns.Metadata.Labels["pod-security.kubernetes.io/"+mode+"-version"] != "latest" {
				t.Errorf("%s: labels %v lack %s=restricted (latest)", o.Ref, ns.Metadata.Labels, mode)
			}
		}
	}
}

package engine

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kilnctl/kiln/engine/project"
)

// TestChangedProjects: each informer event is mapped to the projects whose
// status it may change (by tenant namespace and label, and by DESIGN §5's
// names); platform objects and namespaces map to none (read everything).
func TestChangedProjects(t *testing.T) {
	om := func(ns, name string, labels map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}
	}
	web := map[string]string{"kiln.dev/project": "web"}
	ref := func(tp ...string) []project.Ref {
		var out []project.Ref
		for i := 0; i < len(tp); i += 2 {
			out = append(out, project.Ref{Tenant: tp[i], Project: tp[i+1]})
		}
		return out
	}
	for _, c := range []struct {
		name string
		obj  any
		want []project.Ref // nil: read everything
	}{
		{"spec", &corev1.ConfigMap{ObjectMeta: om("kiln-tenant-a", "kiln-project-web", web)}, ref("a", "web", "a", "web")},
		{"spec without label", &corev1.ConfigMap{ObjectMeta: om("kiln-tenant-a", "kiln-project-web", nil)}, ref("a", "web")},
		{"deployment", &appsv1.Deployment{ObjectMeta: om("kiln-tenant-a", "web", nil)}, ref("a", "web")},
		{"service labelled for another", &corev1.Service{ObjectMeta: om("kiln-tenant-a", "web", map[string]string{"kiln.dev/project": "api"})}, ref("a", "api", "a", "web")},
		{"lease", &coordinationv1.Lease{ObjectMeta: om("kiln-tenant-b", "kiln-project-api", nil)}, ref("b", "api")},
		{"pod", &corev1.Pod{ObjectMeta: om("kiln-tenant-a", "web-5d9c-x", web)}, ref("a", "web")},
		{"endpointslice", &discoveryv1.EndpointSlice{ObjectMeta: om("kiln-tenant-a", "web-abcde", map[string]string{discoveryv1.LabelServiceName: "web"})}, ref("a", "web")},
		{"route", &networkingv1.Ingress{ObjectMeta: om("kiln-system", "a.web", map[string]string{"kiln.dev/tenant": "a", "kiln.dev/project": "web"})}, ref("a", "web", "a", "web")},
		{"deleted route", cache.DeletedFinalStateUnknown{Key: "kiln-system/a.web", Obj: &networkingv1.Ingress{ObjectMeta: om("kiln-system", "a.web", nil)}}, ref("a", "web")},
		{"gateway", &appsv1.Deployment{ObjectMeta: om("kiln-system", "kiln-gateway", nil)}, nil},
		{"kiln-config", &corev1.ConfigMap{ObjectMeta: om("kiln-system", "kiln-config", nil)}, nil},
		{"lock", &coordinationv1.Lease{ObjectMeta: om("kiln-system", "kiln-lock", nil)}, nil},
		{"tenant namespace", &corev1.Namespace{ObjectMeta: om("", "kiln-tenant-a", nil)}, nil},
		{"unplaced configmap", &corev1.ConfigMap{ObjectMeta: om("kiln-tenant-a", "other", nil)}, nil},
		{"route without a dot", &networkingv1.Ingress{ObjectMeta: om("kiln-system", "odd", nil)}, nil},
		{"tombstone without object", cache.DeletedFinalStateUnknown{Key: "x"}, nil},
	} {
		got, ok := changedProjects(c.obj)
		if ok != (c.want != nil) || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %v (ok %v), want %v", c.name, got, ok, c.want)
		}
	}
}

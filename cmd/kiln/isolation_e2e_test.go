package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const isolatedConfig = `apiVersion: kiln.dev/v1alpha1
kind: ClusterConfig
spec:
  tenants: [default, staging]
  tenantIsolation: namespace
  stacks:
    - {name: web, image: "nginx:1.27-alpine", port: 80, cpu: 100m, memory: 128Mi, writablePaths: [/tmp, /var/cache/nginx]}
`

// What kiln installs is isolated: every namespace enforces Pod Security
// restricted (a violating pod is refused; kiln's own gateway and project
// pods are admitted), tenants get deny-by-default ingress plus the gateway
// (and, as configured, their own namespace), kiln-system admits only the
// gateway's port; status judges the policies by what kiln applied, and
// create --continue puts a changed one back.
func TestInstalledIsolation(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "iso", "kiln-b")
	expect(t, e.kiln("create", "kube", "iso", "--context", "kiln-b", "-c", writeConfig(t, isolatedConfig)), 0)
	expect(t, e.kiln("project", "create", "kube", "iso", "staging/web", "--context", "kiln-b"), 0)
	cs := clusterB.Client
	ctx := context.Background()

	for _, ns := range []string{"kiln-system", "kiln-tenant-default", "kiln-tenant-staging"} {
		n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, mode := range []string{"enforce", "warn", "audit"} {
			if n.Labels["pod-security.kubernetes.io/"+mode] != "restricted" || n.Labels["pod-security.kubernetes.io/"+mode+"-version"] != "latest" {
				t.Errorf("namespace %s labels %v: want pod security %s restricted/latest", ns, n.Labels, mode)
			}
		}
		pols, err := cs.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range pols.Items {
			names = append(names, p.Name)
		}
		want := "kiln-allow-from-gateway,kiln-allow-same-tenant,kiln-deny-ingress"
		if ns == "kiln-system" {
			want = "kiln-allow-to-gateway,kiln-deny-ingress"
		}
		if got := strings.Join(names, ","); got != want {
			t.Errorf("network policies of %s: %s, want %s", ns, got, want)
		}
		bad := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "privileged", Namespace: ns},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}},
		}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "PodSecurity") {
			t.Errorf("a pod violating restricted in %s: %v, want refused by PodSecurity", ns, err)
		}
	}
	// kiln's own pods were admitted: the gateway and the project run.
	for ns, sel := range map[string]string{"kiln-system": "app.kubernetes.io/name=kiln-gateway", "kiln-tenant-staging": "kiln.dev/project=web"} {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil || len(pods.Items) == 0 {
			t.Errorf("no pod %s in %s (%v): kiln's own pod was not admitted", sel, ns, err)
		}
	}

	// A policy changed by hand is not ready, and --continue restores it.
	p, err := cs.NetworkingV1().NetworkPolicies("kiln-tenant-default").Get(ctx, "kiln-allow-from-gateway", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels = map[string]string{"kubernetes.io/metadata.name": "kiln-tenant-staging"}
	if _, err := cs.NetworkingV1().NetworkPolicies("kiln-tenant-default").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := e.kiln("status", "kube", "iso", "--context", "kiln-b", "-o", "json")
	expect(t, r, 0)
	found := false
	for _, ev := range r.events(t) {
		if ev["type"] == "resource" && ev["kind"] == "NetworkPolicy" && ev["namespace"] == "kiln-tenant-default" && ev["name"] == "kiln-allow-from-gateway" {
			found = true
			if ev["status"] == "Current" || !strings.Contains(ev["message"].(string), "differ") {
				t.Errorf("a policy changed by hand reported %v", ev)
			}
		}
	}
	if !found {
		t.Errorf("status does not report kiln-allow-from-gateway:\n%s", r)
	}
	expect(t, e.kiln("create", "kube", "iso", "--context", "kiln-b", "--continue", "-c", writeConfig(t, isolatedConfig)), 0)
	r = e.kiln("status", "kube", "iso", "--context", "kiln-b", "-o", "json")
	expect(t, r, 0)
	for _, ev := range r.events(t) {
		if ev["type"] == "resource" && ev["status"] != "Current" {
			t.Errorf("after --continue: %v", ev)
		}
	}
}

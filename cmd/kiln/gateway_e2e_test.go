package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kilnctl/kiln/engine/platform"
)

// The platform's gateway is kiln's own image at kiln's version running
// `kiln gateway` with the cluster's name and domain, its pod passes Pod
// Security restricted (checked by the API server's admission, not by
// reading fields), and wait --probe says why it skips the data-plane
// probe on the control plane's fake nodes.
func TestGatewayDeployment(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "gwy", "kiln-a")
	expect(t, e.kiln("create", "kube", "gwy", "--context", "kiln-a"), 0)
	cs := clusterA.Client
	ctx := context.Background()
	d, err := cs.AppsV1().Deployments("kiln-system").Get(ctx, "kiln-gateway", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	// The e2e binary is kiln at version "dev" (no -ldflags).
	if want := "ghcr.io/kilnctl/kiln:dev"; c.Image != want {
		t.Errorf("gateway image %s, want %s", c.Image, want)
	}
	wantArgs := []string{"gateway", "--listen=:8080", "--metrics-listen=:9090", "--auth-dir=/etc/kiln/auth", "--cluster=gwy", "--domain=gwy.kiln.test"}
	if !slices.Equal(c.Args, wantArgs) || len(c.Command) != 0 {
		t.Errorf("gateway command %q args %q, want the image's entrypoint with args %q", c.Command, c.Args, wantArgs)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe %+v, want GET /readyz", p)
	}
	if c.Resources.Limits.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("gateway limits %v, want cpu and memory", c.Resources.Limits)
	}
	restrictedAdmits(t, cs, d, "")
	// Control: the same pod without its seccomp profile is refused, so the
	// admission check above is real.
	restrictedAdmits(t, cs, d, "no-seccomp")

	r := e.kiln("wait", "kube", "gwy", "--probe", "--timeout", "1m", "-o", "json")
	expect(t, r, 0)
	var skipped bool
	for _, ev := range r.events(t) {
		if ev["type"] == "phase" && ev["phase"] == "probe" && ev["state"] == "skipped" {
			msg, _ := ev["message"].(string)
			skipped = strings.Contains(msg, "kwok fake node")
		}
	}
	if !skipped {
		t.Errorf("wait --probe on fake nodes: no probe phase skipped for kwok fake nodes:\n%s", r)
	}

	// A running project: start and wait --probe say, per project, that
	// reachability was not checked and why — never a claim, never a
	// failure.
	r = e.kiln("project", "create", "kube", "gwy", "default/blog", "--context", "kiln-a", "-o", "json")
	expect(t, r, 0)
	notChecked := func(r result) bool {
		for _, ev := range r.events(t) {
			msg, _ := ev["message"].(string)
			if ev["type"] == "log" && strings.HasPrefix(msg, "project default/blog: reachable: not checked (the gateway pod ") &&
				strings.Contains(msg, "which serves no port-forward") {
				return true
			}
		}
		return false
	}
	if !notChecked(r) {
		t.Errorf("project create on fake nodes: no \"reachable: not checked\" line:\n%s", r)
	}
	r = e.kiln("wait", "kube", "gwy", "--probe", "--timeout", "1m", "-o", "json")
	expect(t, r, 0)
	if !notChecked(r) {
		t.Errorf("wait --probe with a running project: no \"reachable: not checked\" line:\n%s", r)
	}
}

// restrictedAdmits dry-run creates a pod from the Deployment's template in
// a namespace that enforces Pod Security restricted. With breakage
// "no-seccomp" it removes the seccomp profiles and expects a refusal.
func restrictedAdmits(t *testing.T, cs kubernetes.Interface, d *appsv1.Deployment, breakage string) {
	t.Helper()
	ctx := context.Background()
	const ns = "kiln-e2e-restricted"
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	}}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, nsObj, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: d.Spec.Template.Spec.ServiceAccountName, Namespace: ns}}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	spec := d.Spec.Template.Spec.DeepCopy()
	if breakage == "no-seccomp" {
		spec.SecurityContext.SeccompProfile = nil
		for i := range spec.Containers {
			spec.Containers[i].SecurityContext.SeccompProfile = nil
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: platform.GatewayName + "-", Namespace: ns}, Spec: *spec}
	_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case breakage == "" && err != nil:
		t.Errorf("the gateway pod is refused under Pod Security restricted: %v", err)
	case breakage != "" && (err == nil || !strings.Contains(err.Error(), "restricted")):
		t.Errorf("a pod without seccomp profile was not refused by Pod Security restricted (err %v): the check proves nothing", err)
	}
}

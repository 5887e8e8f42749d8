package main

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A hostile kiln-config in one context (an alias bomb) and a planted,
// malformed project spec in one tenant leave status, list and project list
// working for everything else: the context is listed as not inspected with
// its cause, the planted spec is skipped with a warning naming it, and a
// cluster string with escape sequences reaches the terminal without them.
func TestHostileClusterDataDoesNotTakeKilnDown(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "sturdy", "kiln-a")
	expect(t, e.kiln("create", "kube", "sturdy", "--context", "kiln-a", "--headless"), 0)
	expect(t, e.kiln("project", "create", "kube", "sturdy", "default/web", "--headless"), 0)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	planted := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kiln-project-evil", Namespace: "kiln-tenant-default",
			Labels: map[string]string{"kiln.dev/cluster": "sturdy", "kiln.dev/project": "evil", "kiln.dev/tenant": "default", "app.kubernetes.io/managed-by": "kiln"}},
		Data: map[string]string{"spec.json": `{"tenant":"default","project":"evil","state":"running","stack":{"name":"x\u001b[2J","image":"y"`},
	}
	if _, err := clusterA.Client.CoreV1().ConfigMaps("kiln-tenant-default").Create(ctx, planted, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// kiln-b: a kiln-system whose kiln-config is an alias bomb.
	var bomb strings.Builder
	bomb.WriteString("apiVersion: kiln.dev/v1alpha1\nkind: ClusterConfig\nmetadata: {name: hostile}\nx: &s {name: web, image: nginx, port: 80, cpu: 100m, memory: 64Mi}\nspec:\n  stacks: [")
	for i := 0; i < 20000; i++ {
		bomb.WriteString("*s, ")
	}
	bomb.WriteString("*s]\n")
	csB := clusterB.Client
	if _, err := csB.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kiln-system",
		Labels: map[string]string{"app.kubernetes.io/managed-by": "kiln", "kiln.dev/cluster": "hostile"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = csB.CoreV1().Namespaces().Delete(context.Background(), "kiln-system", metav1.DeleteOptions{})
		waitNamespaceGone(t, csB, "kiln-system")
	})
	if _, err := csB.CoreV1().ConfigMaps("kiln-system").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kiln-config"},
		Data: map[string]string{"config.yaml": bomb.String()}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	r := e.kiln("status", "kube", "sturdy", "--context", "kiln-a", "--headless")
	expect(t, r, 0)
	if !strings.Contains(r.stderr, "kiln-tenant-default/kiln-project-evil") || !strings.Contains(r.stdout, "web") {
		t.Errorf("status: want web listed and the planted spec named in a warning:\n%s", r)
	}
	r = e.kiln("project", "list", "kube", "sturdy", "--headless")
	expect(t, r, 0)
	if !strings.Contains(r.stdout, "web") || strings.Contains(r.stdout, "evil") {
		t.Errorf("project list: want web only:\n%s", r)
	}
	r = e.kiln("list", "kube", "-o", "json")
	expect(t, r, 0)
	var sturdy, hostile bool
	for _, ev := range r.events(t) {
		if ev["type"] != "cluster" {
			continue
		}
		sturdy = sturdy || ev["name"] == "sturdy"
		if ev["location"] == "kiln-b" {
			msg, _ := ev["error"].(string)
			hostile = strings.Contains(msg, "alias uses")
		}
	}
	if !sturdy || !hostile {
		t.Errorf("list: want sturdy listed and kiln-b not inspected because of its kiln-config (alias budget):\n%s", r)
	}
	for _, out := range []string{r.stdout, r.stderr} {
		if strings.Contains(out, "\x1b") {
			t.Errorf("an escape sequence from the cluster reached the output: %q", out)
		}
	}
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// access is one `kubectl auth can-i` question.
type access struct {
	verb, resource, sub, group, ns, name string
	want                                 bool
}

func (a access) String() string {
	s := a.verb + " " + a.resource
	if a.sub != "" {
		s += "/" + a.sub
	}
	if a.name != "" {
		s += " " + a.name
	}
	if a.ns != "" {
		s += " -n " + a.ns
	}
	return s
}

// canI asks the API server, as the user of cs, each question of the matrix
// (a SelfSubjectAccessReview: what `kubectl auth can-i` sends).
func canI(t *testing.T, cs kubernetes.Interface, who string, matrix []access) {
	t.Helper()
	for _, a := range matrix {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.sub, Namespace: a.ns, Name: a.name,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed != a.want {
			t.Errorf("%s: can-i %s = %v, want %v (%s)", who, a, r.Status.Allowed, a.want, r.Status.Reason)
		}
	}
}

func clientOf(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

const scopeBase = `apiVersion: kiln.dev/v1alpha1
kind: ClusterConfig
spec:
  tenants: [a]
`

const scopeNext = `apiVersion: kiln.dev/v1alpha1
kind: ClusterConfig
spec:
  tenants: [a, b]
`

// The shipped roles are scoped to kiln's namespaces (issue #27 item 1): a
// user bound only to docs/rbac-operator.yaml runs kiln's main flows —
// create, project create/suspend/start/delete, status, upgrade adding a
// tenant, destroy — while `can-i` denies it Secrets and Deployments in
// kube-system and patching or deleting a namespace kiln did not make, and
// the admission policy refuses its binding kiln's role anywhere else; a
// user bound only to docs/rbac-support.yaml runs status, list, project
// list|inspect|logs and a complete support bundle, and reads nothing
// outside kiln's namespaces and no Secret.
func TestRolesScopedToKilnsNamespaces(t *testing.T) {
	skipShort(t)
	const name, kctx = "scoped", "kiln-b"
	admin := newEnv(t)
	cleanup(t, admin, name, kctx) // whatever the operator left
	op := newEnv(t)
	op.kubeconfig = roleUser(t, clusterB, kctx, "rbac-operator.yaml", "op-scoped")
	sup := newEnv(t)
	sup.kubeconfig = roleUser(t, clusterB, kctx, "rbac-support.yaml", "sup-scoped")
	opc, supc := clientOf(t, op.kubeconfig), clientOf(t, sup.kubeconfig)

	in := func(args ...string) []string { return append(args, "--context", kctx, "--headless", "--yes") }
	expect(t, op.kiln(in("create", "kube", name, "-c", writeConfig(t, scopeBase))...), 0)
	expect(t, op.kiln(in("project", "create", "kube", name, "a/web")...), 0)
	expect(t, op.kiln(in("project", "suspend", "kube", name, "a/web")...), 0)
	expect(t, op.kiln(in("project", "start", "kube", name, "a/web")...), 0)
	expect(t, op.kiln(in("status", "kube", name)...), 0)
	expect(t, op.kiln(in("upgrade", "kube", name, "-c", writeConfig(t, scopeNext))...), 0)
	expect(t, op.kiln(in("project", "create", "kube", name, "b/api")...), 0)
	r := op.kiln("status", "kube", name, "--context", kctx, "-o", "json")
	expect(t, r, 0)
	if strings.Contains(r.stdout, "forbidden") {
		t.Errorf("status as operator met a refusal:\n%s", r)
	}

	// Every kiln namespace has its two RoleBindings, to the users bound then.
	for _, ns := range []string{"kiln-system", "kiln-tenant-a", "kiln-tenant-b"} {
		for rb, role := range map[string]string{"kiln-operator": "kiln-operator-namespaced", "kiln-support": "kiln-support-namespaced"} {
			b, err := clusterB.Client.RbacV1().RoleBindings(ns).Get(context.Background(), rb, metav1.GetOptions{})
			if err != nil {
				t.Errorf("rolebinding %s/%s: %v", ns, rb, err)
				continue
			}
			if b.RoleRef.Name != role || b.Labels["app.kubernetes.io/managed-by"] != "kiln" || b.Labels["kiln.dev/cluster"] != name {
				t.Errorf("rolebinding %s/%s: %+v", ns, rb, b)
			}
			var subjects []string
			for _, s := range b.Subjects {
				subjects = append(subjects, s.Namespace+"/"+s.Name)
			}
			want := map[string]string{"kiln-operator": "kiln-e2e-users/op-scoped", "kiln-support": "kiln-e2e-users/sup-scoped"}[rb]
			if !strings.Contains(strings.Join(subjects, ","), want) {
				t.Errorf("rolebinding %s/%s subjects %v, want %s among them", ns, rb, subjects, want)
			}
		}
	}

	t.Run("operator can-i", func(t *testing.T) {
		canI(t, opc, "operator", []access{
			// Outside kiln's namespaces: nothing of what kiln does inside.
			{verb: "get", resource: "secrets", ns: "kube-system"},
			{verb: "list", resource: "secrets", ns: "kube-system"},
			{verb: "list", resource: "secrets"},
			{verb: "get", resource: "secrets", ns: "default"},
			{verb: "create", resource: "deployments", group: "apps", ns: "kube-system"},
			{verb: "create", resource: "pods", ns: "kube-system"},
			{verb: "create", resource: "serviceaccounts", ns: "kube-system"},
			{verb: "list", resource: "configmaps", ns: "kube-system"},
			{verb: "list", resource: "configmaps"},
			{verb: "patch", resource: "namespaces", name: "kube-system"},
			{verb: "patch", resource: "namespaces", name: "kube-system", ns: "kube-system"},
			{verb: "update", resource: "namespaces", name: "default"},
			{verb: "delete", resource: "namespaces", name: "default"},
			{verb: "delete", resource: "namespaces", name: "kiln-e2e-users", ns: "kiln-e2e-users"},
			{verb: "create", resource: "pods", sub: "exec", ns: "kiln-tenant-a"},
			{verb: "create", resource: "clusterrolebindings", group: "rbac.authorization.k8s.io"},
			{verb: "create", resource: "roles", group: "rbac.authorization.k8s.io", ns: "kiln-tenant-a"},
			{verb: "escalate", resource: "clusterroles", group: "rbac.authorization.k8s.io"},
			{verb: "bind", resource: "clusterroles", group: "rbac.authorization.k8s.io", name: "cluster-admin"},
			// Inside: everything kiln does.
			{verb: "get", resource: "secrets", ns: "kiln-tenant-a", want: true},
			{verb: "create", resource: "deployments", group: "apps", ns: "kiln-tenant-b", want: true},
			{verb: "patch", resource: "configmaps", ns: "kiln-system", want: true},
			{verb: "create", resource: "leases", group: "coordination.k8s.io", ns: "kiln-tenant-a", want: true},
			{verb: "patch", resource: "namespaces", name: "kiln-tenant-a", ns: "kiln-tenant-a", want: true},
			{verb: "delete", resource: "namespaces", name: "kiln-tenant-b", ns: "kiln-tenant-b", want: true},
			{verb: "patch", resource: "namespaces", name: "kiln-system", want: true},
			{verb: "create", resource: "namespaces", want: true},
			{verb: "list", resource: "namespaces", want: true},
			{verb: "list", resource: "nodes", want: true},
			{verb: "list", resource: "daemonsets", group: "apps", want: true},
			{verb: "bind", resource: "clusterroles", group: "rbac.authorization.k8s.io", name: "kiln-operator-namespaced", want: true},
		})
	})
	t.Run("support can-i", func(t *testing.T) {
		canI(t, supc, "support", []access{
			{verb: "get", resource: "secrets", ns: "kiln-tenant-a"},
			{verb: "list", resource: "secrets", ns: "kiln-system"},
			{verb: "list", resource: "secrets"},
			{verb: "list", resource: "configmaps", ns: "kube-system"},
			{verb: "list", resource: "configmaps", ns: "default"},
			{verb: "list", resource: "configmaps"},
			{verb: "list", resource: "pods"},
			{verb: "get", resource: "pods", sub: "log", ns: "kube-system"},
			{verb: "create", resource: "leases", group: "coordination.k8s.io", ns: "kiln-tenant-a"},
			{verb: "update", resource: "configmaps", ns: "kiln-system"},
			{verb: "patch", resource: "namespaces", name: "kiln-tenant-a", ns: "kiln-tenant-a"},
			{verb: "create", resource: "pods", sub: "exec", ns: "kiln-tenant-a"},
			{verb: "list", resource: "configmaps", ns: "kiln-system", want: true},
			{verb: "list", resource: "pods", ns: "kiln-tenant-b", want: true},
			{verb: "get", resource: "pods", sub: "log", ns: "kiln-tenant-a", want: true},
			{verb: "list", resource: "leases", group: "coordination.k8s.io", ns: "kiln-tenant-a", want: true},
			{verb: "list", resource: "rolebindings", group: "rbac.authorization.k8s.io", ns: "kiln-system", want: true},
			{verb: "list", resource: "namespaces", want: true},
			{verb: "list", resource: "daemonsets", group: "apps", want: true},
		})
	})

	// What can-i allows the operator outside kiln's namespaces is refused
	// in fact: binding kiln's namespaced role in kube-system (the
	// admission policy), patching kube-system, reading its Secrets.
	ctx := context.Background()
	_, err := opc.RbacV1().RoleBindings("kube-system").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kiln-operator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kiln-operator-namespaced"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "kiln-e2e-users", Name: "op-scoped"}},
	}, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "kiln's namespaced roles may be bound only") {
		t.Errorf("operator binding kiln-operator-namespaced in kube-system: %v, want the admission policy's refusal", err)
		_ = clusterB.Client.RbacV1().RoleBindings("kube-system").Delete(ctx, "kiln-operator", metav1.DeleteOptions{})
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}}})
	if _, err := opc.CoreV1().Namespaces().Patch(ctx, "kube-system", types.MergePatchType, patch, metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("operator relabelling kube-system: %v, want Forbidden", err)
	}
	// kiln's own namespaces it may patch, but never out of restricted; nor
	// create one that is not.
	if _, err := opc.CoreV1().Namespaces().Patch(ctx, "kiln-tenant-a", types.MergePatchType, patch, metav1.PatchOptions{}); err == nil ||
		!strings.Contains(err.Error(), "must carry pod-security.kubernetes.io/enforce=restricted") {
		t.Errorf("operator relabelling kiln-tenant-a privileged: %v, want the admission policy's refusal", err)
	}
	evil := nsObj("kiln-tenant-evil")
	evil.Labels = map[string]string{"app.kubernetes.io/managed-by": "kiln", "pod-security.kubernetes.io/enforce": "privileged"}
	if _, err := opc.CoreV1().Namespaces().Create(ctx, evil, metav1.CreateOptions{}); err == nil ||
		!strings.Contains(err.Error(), "must carry pod-security.kubernetes.io/enforce=restricted") {
		t.Errorf("operator creating a privileged kiln-tenant-evil: %v, want the admission policy's refusal", err)
		_ = clusterB.Client.CoreV1().Namespaces().Delete(ctx, "kiln-tenant-evil", metav1.DeleteOptions{})
	}
	// Binding any other role in kube-system passes the API server's
	// escalation check only with permissions the operator holds there.
	_, err = opc.RbacV1().RoleBindings("kube-system").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kiln-view"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "kiln-e2e-users", Name: "op-scoped"}},
	}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("operator binding ClusterRole view in kube-system: %v, want Forbidden", err)
		_ = clusterB.Client.RbacV1().RoleBindings("kube-system").Delete(ctx, "kiln-view", metav1.DeleteOptions{})
	}
	if _, err := opc.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("operator listing kube-system's Secrets: %v, want Forbidden", err)
	}

	// The support role: its commands work, its bundle is complete.
	for _, args := range [][]string{
		{"status", "kube", name, "--context", kctx},
		{"list", "kube"},
		{"project", "list", "kube", name, "--context", kctx},
		{"project", "inspect", "kube", name, "a/web", "--context", kctx},
		{"project", "logs", "kube", name, "a/web", "--context", kctx, "--tail", "3"},
	} {
		r := sup.kiln(args...)
		expect(t, r, 0)
		if strings.Contains(r.stderr, "forbidden") {
			t.Errorf("kiln %s as support met a refusal:\n%s", strings.Join(args, " "), r)
		}
	}
	bundle := filepath.Join(t.TempDir(), "b.tar.gz")
	r = sup.kiln("support", "bundle", "kube", name, "--context", kctx, "--file", bundle)
	expect(t, r, 0)
	if strings.Contains(r.stderr, "could not be collected") {
		t.Errorf("support bundle as support is incomplete:\n%s", r)
	}
	files := untar(t, bundle)
	if p, ok := files["problems.txt"]; ok {
		t.Errorf("support bundle as support: problems.txt:\n%s", p)
	}
	for _, want := range []string{"objects/kiln-system/ConfigMap/kiln-config.json", "objects/kiln-tenant-a/Deployment/web.json",
		"objects/kiln-tenant-b/Deployment/api.json", "pods/kiln-tenant-a.json", "events/kiln-tenant-b.json", "projects.json", "leases.json", "logs.json"} {
		if _, ok := files[want]; !ok {
			t.Errorf("support bundle as support lacks %s: %v", want, keys(files))
		}
	}

	// The read-only inspector (live from watches, namespace by namespace).
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ro := &tmux{t: t, socket: filepath.Join(t.TempDir(), "tmux.sock"), session: "inspect"}
	t.Cleanup(func() { _, _ = ro.run("kill-server") })
	ro.must("new-session", "-d", "-s", ro.session, "-x", "120", "-y", "40",
		fmt.Sprintf("env KILN_E2E_AS_KILN=1 TERM=xterm-256color XDG_STATE_HOME=%q XDG_DATA_HOME=%q %q --kubeconfig %q --keyring-backend file inspect kube %s --context %s --read-only",
			sup.state, sup.data, exe, sup.kubeconfig, name, kctx))
	scr := ro.waitFor(60*time.Second, "Cluster "+name, "Projects (2)", "read-only")
	if strings.Contains(strings.ToLower(scr), "forbidden") {
		t.Errorf("inspector as support met a refusal:\n%s", scr)
	}
	ro.keys("q")

	// The rest of the operator's flows, to the end.
	expect(t, op.kiln(in("project", "delete", "kube", name, "a/web")...), 0)
	expect(t, op.kiln(in("destroy", "kube", name)...), 0)
	for _, ns := range []string{"kiln-system", "kiln-tenant-a", "kiln-tenant-b"} {
		deadline := time.Now().Add(time.Minute)
		for {
			_, err := clusterB.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("namespace %s still there after destroy as operator: %v", ns, err)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

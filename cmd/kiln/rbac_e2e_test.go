package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kilnctl/kiln/internal/testenv/testcluster"
)

// applyShipped creates every ClusterRole and admission policy of one of the
// RBAC files in docs/ (not the example bindings), and removes them when the
// test ends. It returns the file's first ClusterRole: the one to bind
// cluster-wide.
func applyShipped(t *testing.T, c *testcluster.Cluster, file string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "docs", file))
	if err != nil {
		t.Fatal(err)
	}
	cs := c.Client
	first := ""
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var head struct{ Kind string }
		if err := sigsyaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("docs/%s: %v", file, err)
		}
		var create func() error
		var remove func()
		switch head.Kind {
		case "ClusterRole":
			var o rbacv1.ClusterRole
			if err := sigsyaml.UnmarshalStrict([]byte(doc), &o); err != nil {
				t.Fatalf("docs/%s: %v", file, err)
			}
			if first == "" {
				first = o.Name
			}
			create = func() error { _, err := cs.RbacV1().ClusterRoles().Create(ctx, &o, metav1.CreateOptions{}); return err }
			remove = func() { _ = cs.RbacV1().ClusterRoles().Delete(context.Background(), o.Name, metav1.DeleteOptions{}) }
		case "ValidatingAdmissionPolicy":
			var o admissionregistrationv1.ValidatingAdmissionPolicy
			if err := sigsyaml.UnmarshalStrict([]byte(doc), &o); err != nil {
				t.Fatalf("docs/%s: %v", file, err)
			}
			create = func() error {
				_, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &o, metav1.CreateOptions{})
				return err
			}
			remove = func() {
				_ = cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), o.Name, metav1.DeleteOptions{})
			}
		case "ValidatingAdmissionPolicyBinding":
			var o admissionregistrationv1.ValidatingAdmissionPolicyBinding
			if err := sigsyaml.UnmarshalStrict([]byte(doc), &o); err != nil {
				t.Fatalf("docs/%s: %v", file, err)
			}
			create = func() error {
				_, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &o, metav1.CreateOptions{})
				return err
			}
			remove = func() {
				_ = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), o.Name, metav1.DeleteOptions{})
			}
		case "ClusterRoleBinding":
			continue // the example binding
		default:
			t.Fatalf("docs/%s: unexpected kind %q", file, head.Kind)
		}
		switch err := create(); {
		case err == nil:
			t.Cleanup(remove)
		case apierrors.IsAlreadyExists(err): // another user of the same file in this test
		default:
			t.Fatalf("docs/%s: %v", file, err)
		}
	}
	if first == "" {
		t.Fatalf("docs/%s holds no ClusterRole", file)
	}
	return first
}

// roleUser applies one of the RBAC files of docs/, binds a new
// ServiceAccount to its cluster-wide role and writes a kubeconfig with
// context ctxName that authenticates as it with a token from the
// TokenRequest API. kiln binds the namespaced role in the namespaces it
// creates or brings up to date, to the subjects bound then.
func roleUser(t *testing.T, c *testcluster.Cluster, ctxName, file, user string) string {
	t.Helper()
	roleName := applyShipped(t, c, file)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := c.Client
	const ns = "kiln-e2e-users"
	if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, nsObj(ns), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: user}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: roleName + "-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: user}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		bg := context.Background()
		_ = cs.RbacV1().ClusterRoleBindings().Delete(bg, binding.Name, metav1.DeleteOptions{})
		_ = cs.CoreV1().ServiceAccounts(ns).Delete(bg, user, metav1.DeleteOptions{})
	})
	exp := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, user, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	outputsMu.Lock()
	secrets[tr.Status.Token] = true // never to be printed
	outputsMu.Unlock()
	admin, err := clientcmd.Load(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var server *clientcmdapi.Cluster
	for _, cl := range admin.Clusters {
		server = cl
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters[ctxName] = server
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts[ctxName] = &clientcmdapi.Context{Cluster: ctxName, AuthInfo: user}
	kc.CurrentContext = ctxName
	path := filepath.Join(t.TempDir(), user+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// The roles shipped in docs/ are enough and no more: a user bound only to
// kiln-operator installs a cluster and runs a project; a user bound only to
// kiln-support sees status, list, project list and project inspect (token
// sync included) without any access to Secrets, and every mutating command
// fails with exit 1 naming the permission the API refused, changing
// nothing.
func TestRolesOperatorAndSupport(t *testing.T) {
	skipShort(t)
	const name, kctx = "roles", "kiln-b"
	op := newEnv(t)
	op.kubeconfig = roleUser(t, clusterB, kctx, "rbac-operator.yaml", "operator")
	// Both users before kiln creates its namespaces: kiln binds the
	// namespaced roles to whoever is bound to the cluster-wide ones then.
	sup := newEnv(t)
	sup.kubeconfig = roleUser(t, clusterB, kctx, "rbac-support.yaml", "support")
	cleanup(t, op, name, kctx)
	expect(t, op.kiln("create", "kube", name, "--context", kctx), 0)
	expect(t, op.kiln("project", "create", "kube", name, "default/web", "--context", kctx), 0)
	for _, args := range [][]string{
		{"status", "kube", name, "--context", kctx},
		{"list", "kube"},
		{"project", "list", "kube", name, "--context", kctx},
		{"project", "inspect", "kube", name, "default/web", "--context", kctx},
		{"project", "rotate-token", "kube", name, "default/web", "--context", kctx},
	} {
		expect(t, op.kiln(args...), 0)
	}

	for _, args := range [][]string{
		{"status", "kube", name, "--context", kctx},
		{"list", "kube"},
		{"project", "list", "kube", name, "--context", kctx},
	} {
		r := sup.kiln(args...)
		expect(t, r, 0)
		if strings.Contains(r.stderr, "forbidden") {
			t.Errorf("kiln %s as support met a refusal:\n%s", strings.Join(args, " "), r)
		}
	}
	r := sup.kiln("project", "inspect", "kube", name, "default/web", "--context", kctx, "-o", "json")
	expect(t, r, 0)
	p := projectEvent(t, r)
	if p["state"] != "running" || p["token_sync"] != "in-sync" {
		t.Errorf("project inspect as support: state %v, token sync %v (%v); want running, in-sync\n%s", p["state"], p["token_sync"], p["token_sync_reason"], r)
	}

	// Logs and a support bundle, as a support session needs them.
	r = sup.kiln("project", "logs", "kube", name, "default/web", "--context", kctx, "--tail", "5")
	expect(t, r, 0)
	if strings.Contains(r.stderr, "forbidden") {
		t.Errorf("project logs as support met a refusal:\n%s", r)
	}
	bundle := filepath.Join(t.TempDir(), "bundle.tar.gz")
	r = sup.kiln("support", "bundle", "kube", name, "--context", kctx, "--file", bundle)
	expect(t, r, 0)
	if st, err := os.Stat(bundle); err != nil || st.Size() == 0 {
		t.Errorf("support bundle as support: %v\n%s", err, r)
	}
	if strings.Contains(r.stderr, "could not be collected") {
		t.Errorf("support bundle as support is incomplete:\n%s", r)
	}
	files := untar(t, bundle)
	if p, ok := files["problems.txt"]; ok {
		t.Errorf("support bundle as support: problems.txt:\n%s", p)
	}
	for _, want := range []string{"objects/kiln-system/ConfigMap/kiln-config.json", "objects/kiln-tenant-default/Deployment/web.json",
		"objects/kiln-system/RoleBinding/kiln-support.json", "pods/kiln-tenant-default.json", "events/kiln-tenant-default.json", "projects.json", "notes.txt"} {
		if _, ok := files[want]; !ok {
			t.Errorf("support bundle as support lacks %s: %v", want, keys(files))
		}
	}

	// The support user may not read a Secret, and kiln never needed to.
	ns := "kiln-tenant-default"
	before := nsObjects(t, clusterB.Client, ns)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"project", "create", "kube", name, "default/other", "--context", kctx}, `cannot create resource "leases"`},
		// The project's released Lease is still there: taking it over is an update.
		{[]string{"project", "start", "kube", name, "default/web", "--context", kctx}, `cannot update resource "leases"`},
	} {
		r := sup.kiln(tc.args...)
		expect(t, r, 1)
		if !strings.Contains(r.stderr, tc.want) {
			t.Errorf("kiln %s as support: stderr does not name the refused permission %q:\n%s", strings.Join(tc.args, " "), tc.want, r)
		}
	}
	sameMap(t, "tenant namespace after refused commands", before, nsObjects(t, clusterB.Client, ns))

	// Sanity: the support role really cannot read Secrets.
	cfg, err := clientcmd.BuildConfigFromFlags("", sup.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("support user listing Secrets: %v, want Forbidden", err)
	}
}

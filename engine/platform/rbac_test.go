package platform

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestEnsureBindingsMirrorsTheClusterWideSubjects(t *testing.T) {
	ctx := context.Background()
	crb := func(name, role, user string) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	}
	cs := fake.NewClientset(crb("ops-alice", OperatorRole, "alice"), crb("ops-carol", OperatorRole, "carol"),
		crb("sup-bob", SupportRole, "bob"), crb("admin", "cluster-admin", "root"))
	wrote, err := EnsureBindings(ctx, cs, "kiln-tenant-a", map[string]string{LabelCluster: "dev1"})
	if err != nil || !wrote {
		t.Fatalf("first: wrote %v, %v", wrote, err)
	}
	check := func(name, role string, users ...string) {
		t.Helper()
		rb, err := cs.RbacV1().RoleBindings("kiln-tenant-a").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rb.RoleRef.Name != role || rb.Labels[LabelCluster] != "dev1" || rb.Labels[LabelManagedBy] != "kiln" {
			t.Errorf("%s: %+v", name, rb)
		}
		var got []string
		for _, s := range rb.Subjects {
			got = append(got, s.Name)
		}
		if len(got) != len(users) {
			t.Fatalf("%s subjects %v, want %v", name, got, users)
		}
		for i := range users {
			if got[i] != users[i] {
				t.Errorf("%s subjects %v, want %v", name, got, users)
			}
		}
	}
	check(OperatorRole, OperatorNamespacedRole, "alice", "carol")
	check(SupportRole, SupportNamespacedRole, "bob")
	if wrote, err := EnsureBindings(ctx, cs, "kiln-tenant-a", nil); err != nil || wrote {
		t.Errorf("converged: wrote %v, %v", wrote, err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb("sup-dave", SupportRole, "dave"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if wrote, err := EnsureBindings(ctx, cs, "kiln-tenant-a", nil); err != nil || !wrote {
		t.Errorf("new subject: wrote %v, %v", wrote, err)
	}
	check(SupportRole, SupportNamespacedRole, "bob", "dave")
}

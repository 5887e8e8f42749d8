package platform

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
)

// The roles of docs/rbac-operator.yaml and docs/rbac-support.yaml. The
// cluster-wide ClusterRoles (kiln-operator, kiln-support) grant only what
// must be cluster-wide; what kiln does in its own namespaces is in the
// *-namespaced ClusterRoles, which kiln binds in each namespace it creates
// with a RoleBinding of the cluster-wide role's name, to the subjects of
// the ClusterRoleBindings of that role.
const (
	OperatorRole           = "kiln-operator"
	OperatorNamespacedRole = "kiln-operator-namespaced"
	SupportRole            = "kiln-support"
	SupportNamespacedRole  = "kiln-support-namespaced"
)

// NamespaceBindings are the RoleBindings kiln makes in every namespace it
// creates: name (= the cluster-wide role whose subjects it mirrors) and the
// ClusterRole bound.
var NamespaceBindings = []struct{ Name, Role string }{
	{OperatorRole, OperatorNamespacedRole},
	{SupportRole, SupportNamespacedRole},
}

// accessWait bounds how long kiln waits for a new RoleBinding to take
// effect (the authorizer's cache) when the caller's context has no
// deadline.
const accessWait = time.Minute

// ensureNamespace is Ensure for a Namespace: created with a plain create
// when absent (the operator role may create namespaces but patch only
// kiln's own, through the binding made next), then its RoleBindings, then
// — verified — the caller's access through them, then server-side apply
// for an existing namespace as for every other object.
func ensureNamespace(ctx context.Context, cs kubernetes.Interface, obj Object, a *corev1ac.NamespaceApplyConfiguration) (bool, error) {
	name := *a.Name
	live, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	created := false
	switch {
	case apierrors.IsNotFound(err):
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: a.Labels, Annotations: a.Annotations}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{FieldManager: FieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("create %s: %w", obj.Ref, err)
		}
		created = true
	case err != nil:
		return false, fmt.Errorf("get %s: %w", obj.Ref, err)
	case live.DeletionTimestamp != nil:
		return ensureApplied(ctx, cs, obj) // being deleted: the apply says so
	}
	wrote, err := EnsureBindings(ctx, cs, name, a.Labels)
	if err != nil {
		return created || wrote, err
	}
	if err := WaitAccess(ctx, cs, name); err != nil {
		return created || wrote, err
	}
	if created {
		return true, nil
	}
	applied, err := ensureApplied(ctx, cs, obj)
	return applied || wrote, err
}

// EnsureBindings makes namespace ns's RoleBindings (NamespaceBindings):
// each binds its namespaced ClusterRole to the subjects of every
// ClusterRoleBinding of the cluster-wide role of its name, so whoever an
// administrator made a kiln operator (or support engineer) cluster-wide
// gets kiln's namespaced permissions in ns, and nowhere else. A binding
// that exists is updated to today's subjects. It reports whether it wrote.
func EnsureBindings(ctx context.Context, cs kubernetes.Interface, ns string, nsLabels map[string]string) (bool, error) {
	crbs, err := cs.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, fmt.Errorf("list clusterrolebindings (to bind kiln's roles in namespace %s): %w", ns, err)
	}
	l := map[string]string{LabelManagedBy: "kiln"}
	if c := nsLabels[LabelCluster]; c != "" {
		l[LabelCluster] = c
	}
	wrote := false
	for _, nb := range NamespaceBindings {
		subjects := []rbacv1.Subject{}
		seen := map[string]bool{}
		for _, crb := range crbs.Items {
			if crb.RoleRef.Kind != "ClusterRole" || crb.RoleRef.Name != nb.Name {
				continue
			}
			for _, s := range crb.Subjects {
				k := s.Kind + "/" + s.Namespace + "/" + s.Name
				if !seen[k] {
					seen[k] = true
					subjects = append(subjects, s)
				}
			}
		}
		sort.Slice(subjects, func(i, j int) bool {
			a, b := subjects[i], subjects[j]
			return a.Kind+"/"+a.Namespace+"/"+a.Name < b.Kind+"/"+b.Namespace+"/"+b.Name
		})
		want := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: nb.Name, Namespace: ns, Labels: l},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: nb.Role},
			Subjects:   subjects,
		}
		cur, err := cs.RbacV1().RoleBindings(ns).Get(ctx, nb.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			// Absent, or not readable yet: before the binding exists an
			// operator may create RoleBindings (cluster-wide, kept to
			// kiln's namespaces by the admission policy) but not read
			// them here.
			_, cerr := cs.RbacV1().RoleBindings(ns).Create(ctx, want, metav1.CreateOptions{FieldManager: FieldManager})
			switch {
			case cerr == nil:
				wrote = true
				continue
			case apierrors.IsAlreadyExists(cerr) && apierrors.IsForbidden(err):
				continue // there, and unreadable: WaitAccess says whether it serves the caller
			case apierrors.IsAlreadyExists(cerr):
				cur, err = cs.RbacV1().RoleBindings(ns).Get(ctx, nb.Name, metav1.GetOptions{})
			default:
				return wrote, fmt.Errorf("create rolebinding %s/%s: %w", ns, nb.Name, cerr)
			}
		}
		if err != nil {
			return wrote, fmt.Errorf("get rolebinding %s/%s: %w", ns, nb.Name, err)
		}
		if cur.RoleRef != want.RoleRef {
			return wrote, fmt.Errorf("rolebinding %s/%s binds %s %s, not ClusterRole %s: kiln does not replace it (delete it to let kiln make it)", ns, nb.Name, cur.RoleRef.Kind, cur.RoleRef.Name, nb.Role)
		}
		if reflect.DeepEqual(cur.Subjects, want.Subjects) || (len(cur.Subjects) == 0 && len(want.Subjects) == 0) {
			continue
		}
		cur.Subjects = want.Subjects
		if _, err := cs.RbacV1().RoleBindings(ns).Update(ctx, cur, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
			return wrote, fmt.Errorf("update rolebinding %s/%s subjects: %w", ns, nb.Name, err)
		}
		wrote = true
	}
	return wrote, nil
}

// WaitAccess waits until the caller may patch namespace ns (a
// SelfSubjectAccessReview: the permission kiln's RoleBinding there gives an
// operator, and an administrator has anyway), so the steps after a new
// binding never meet the authorizer's cache still without it.
func WaitAccess(ctx context.Context, cs kubernetes.Interface, ns string) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, accessWait)
		defer cancel()
	}
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "patch", Resource: "namespaces", Name: ns},
	}}
	delay := 20 * time.Millisecond
	for {
		out, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err == nil && out.Status.Allowed {
			return nil
		}
		select {
		case <-ctx.Done():
			why := "not permitted"
			if err != nil {
				why = err.Error()
			} else if out.Status.Reason != "" {
				why = out.Status.Reason
			}
			return fmt.Errorf("namespace %s: the caller may not patch it through RoleBinding %s/%s (ClusterRole %s; apply docs/rbac-operator.yaml and bind kiln-operator): %s",
				ns, ns, OperatorRole, OperatorNamespacedRole, why)
		case <-time.After(delay):
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

package platform

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kilnctl/kiln/engine/readiness"
)

// Delete asks the API server to delete ref. Deletion is foreground, so a
// Deployment disappears only after its ReplicaSets and pods are gone, and a
// Namespace after everything in it. Missing is not an error. Callers verify
// the object is gone with readiness.Watcher and the Gone goal. Deleting a
// namespace that is already terminating is not an error either.
func Delete(ctx context.Context, cs kubernetes.Interface, ref readiness.Ref) error {
	return deleteWith(ctx, cs, ref, metav1.DeletePropagationForeground, true)
}

// DeleteOwnerless is Delete for an object that owns nothing (kiln-config,
// kiln-auth: kiln sets no owner references): with background propagation
// the API server removes it in the DELETE itself, where foreground
// propagation would leave it, marked, for a garbage collector round.
// Callers still verify it gone.
func DeleteOwnerless(ctx context.Context, cs kubernetes.Interface, ref readiness.Ref) error {
	return deleteWith(ctx, cs, ref, metav1.DeletePropagationBackground, true)
}

// DeleteLive is Delete for an object the caller has just read or written
// and seen not being deleted: a Namespace is deleted without Delete's
// read first.
func DeleteLive(ctx context.Context, cs kubernetes.Interface, ref readiness.Ref) error {
	return deleteWith(ctx, cs, ref, metav1.DeletePropagationForeground, false)
}

func deleteWith(ctx context.Context, cs kubernetes.Interface, ref readiness.Ref, policy metav1.DeletionPropagation, readFirst bool) error {
	opts := metav1.DeleteOptions{PropagationPolicy: &policy}
	var err error
	switch ref.Kind {
	case readiness.KindNamespace:
		// Already terminating: its RoleBindings (an operator's only right
		// to delete a tenant namespace) may be gone with its content, and
		// there is nothing to ask.
		if readFirst {
			cur, gerr := cs.CoreV1().Namespaces().Get(ctx, ref.Name, metav1.GetOptions{})
			if gerr == nil && cur.DeletionTimestamp != nil {
				return nil
			}
		}
		err = cs.CoreV1().Namespaces().Delete(ctx, ref.Name, opts)
	case readiness.KindConfigMap:
		err = cs.CoreV1().ConfigMaps(ref.Namespace).Delete(ctx, ref.Name, opts)
	case readiness.KindSecret:
		err = cs.CoreV1().Secrets(ref.Namespace).Delete(ctx, ref.Name, opts)
	case readiness.KindServiceAcc:
		err = cs.CoreV1().ServiceAccounts(ref.Namespace).Delete(ctx, ref.Name, opts)
	case readiness.KindService:
		err = cs.CoreV1().Services(ref.Namespace).Delete(ctx, ref.Name, opts)
	case readiness.KindDeployment:
		err = cs.AppsV1().Deployments(ref.Namespace).Delete(ctx, ref.Name, opts)
	case readiness.KindIngress:
		err = cs.NetworkingV1().Ingresses(ref.Namespace).Delete(ctx, ref.Name, opts)
	case readiness.KindLease:
		err = cs.CoordinationV1().Leases(ref.Namespace).Delete(ctx, ref.Name, opts)
	case readiness.KindNetworkPolicy:
		err = cs.NetworkingV1().NetworkPolicies(ref.Namespace).Delete(ctx, ref.Name, opts)
	default:
		return fmt.Errorf("platform: cannot delete %s", ref)
	}
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case ref.Kind == readiness.KindNamespace && apierrors.IsConflict(err):
		// "The system is ensuring all content is removed from this
		// namespace": already being deleted, which is what was asked.
		return nil
	}
	return fmt.Errorf("delete %s: %w", ref, err)
}

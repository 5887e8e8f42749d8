package platform

import (
	"time"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// A key rotation under way is recorded on kiln-auth (annotations): which
// key it replaces, and with rotate-key --keep-old until when that key stays
// trusted. Both go when the old key is removed.
const (
	AnnotationRotationOldKey = "kiln.dev/rotation-old-key"
	AnnotationOldKeyExpires  = "kiln.dev/rotation-old-key-expires"
)

// MarkRotation records on a kiln-auth object made by AuthObject that the
// rotation replaces oldKeyID, trusted until expires (zero: until the
// rotation ends).
func MarkRotation(obj Object, oldKeyID string, expires time.Time) Object {
	cm, ok := obj.Apply.(*corev1ac.ConfigMapApplyConfiguration)
	if !ok {
		return obj
	}
	// Both annotations, always: the apply is forced, so kiln owns both
	// from here (a deadline someone else wrote by hand is replaced, not
	// left behind) and both go when the rotation ends. "" is no deadline.
	a := map[string]string{AnnotationRotationOldKey: oldKeyID, AnnotationOldKeyExpires: ""}
	if !expires.IsZero() {
		a[AnnotationOldKeyExpires] = expires.UTC().Format(time.RFC3339)
	}
	cm.WithAnnotations(a)
	return obj
}

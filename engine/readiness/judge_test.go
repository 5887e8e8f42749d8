package readiness

import (
	"reflect"
	"testing"

	"github.com/kilnctl/kiln/engine/event"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// Judge leaves out what kstatus never reads (managedFields, a Deployment's
// pod template) without changing the verdict or the caller's object, which
// may be an informer's cached one.
func TestJudgeIgnoresManagedFieldsAndTemplateWithoutTouchingTheObject(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kiln", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicas":{}}}`)}}}
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
	}
	dep := func(available int32) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "t", Generation: 2, ManagedFields: managed},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(int32(1)), Template: template},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: available, AvailableReplicas: available,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}},
		}
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "t", ManagedFields: managed}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}}
	for _, c := range []struct {
		kind string
		obj  runtime.Object
		want event.Status
	}{
		{KindDeployment, dep(1), Current},
		{KindDeployment, dep(0), InProgress},
		{KindService, svc, Current},
	} {
		before := c.obj.DeepCopyObject()
		got, err := Judge(c.kind, c.obj)
		if err != nil {
			t.Fatalf("%s: %v", c.kind, err)
		}
		if got.Status != c.want {
			t.Errorf("%s: %s (%s), want %s", c.kind, got.Status, got.Message, c.want)
		}
		// The verdict is the one kstatus gives on the whole object.
		whole, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c.obj)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: whole}
		u.SetAPIVersion(apiVersions[c.kind])
		u.SetKind(c.kind)
		r, err := status.Compute(u)
		if err != nil {
			t.Fatal(err)
		}
		if (r.Status == status.CurrentStatus) != (got.Status == Current) {
			t.Errorf("%s: kstatus on the whole object says %s, Judge %s", c.kind, r.Status, got.Status)
		}
		if !reflect.DeepEqual(before, c.obj) {
			t.Errorf("%s: Judge changed the caller's object", c.kind)
		}
	}
}

package readiness

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// The fields kstatusFields keeps must give kstatus, the consumer, the same
// verdict and message as the whole object converted by reflection: checked on generated Deployments and Services that
// vary every field kstatus reads, and some it does not.
func TestKstatusFieldsJudgeAsTheWholeObject(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 30))
	pick := func(n int) int { return rng.IntN(n) }
	i32 := func() int32 { return []int32{0, 1, 2, 3}[pick(4)] }
	optI32 := func(vals ...int32) *int32 {
		if pick(3) == 0 {
			return nil
		}
		return ptr.To(vals[pick(len(vals))])
	}
	meta := func() metav1.ObjectMeta {
		m := metav1.ObjectMeta{Name: "web", Namespace: "kiln-tenant-t", Generation: int64(pick(3)),
			Labels: map[string]string{"kiln.dev/project": "web"}, Annotations: map[string]string{"a": "b"}}
		if pick(6) == 0 {
			m.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)}
		}
		if pick(2) == 0 {
			m.Name = ""
		}
		return m
	}
	statuses := []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown}
	reasons := []string{"", "NewReplicaSetAvailable", "ProgressDeadlineExceeded", "ReplicaSetUpdated", "MinimumReplicasAvailable", "Whatever"}
	depConds := []appsv1.DeploymentConditionType{appsv1.DeploymentAvailable, appsv1.DeploymentProgressing, appsv1.DeploymentReplicaFailure, "Reconciling", "Stalled", "Ready"}
	judged := map[string]int{}
	for i := range 20000 {
		var obj runtime.Object
		var kind string
		switch i % 3 {
		case 0:
			d := &appsv1.Deployment{ObjectMeta: meta(), Spec: appsv1.DeploymentSpec{
				Replicas:                optI32(0, 1, 3),
				ProgressDeadlineSeconds: optI32(600, math.MaxInt32),
				Paused:                  pick(4) == 0,
				Template:                corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}},
			}, Status: appsv1.DeploymentStatus{
				ObservedGeneration: int64(pick(3)), Replicas: i32(), UpdatedReplicas: i32(), ReadyReplicas: i32(),
				AvailableReplicas: i32(), UnavailableReplicas: i32(),
			}}
			for range pick(4) {
				d.Status.Conditions = append(d.Status.Conditions, appsv1.DeploymentCondition{
					Type: depConds[pick(len(depConds))], Status: statuses[pick(3)], Reason: reasons[pick(len(reasons))],
					Message: []string{"", "m"}[pick(2)],
				})
			}
			obj, kind = d, KindDeployment
		case 1:
			s := &corev1.Service{ObjectMeta: meta(), Spec: corev1.ServiceSpec{
				Type:      []corev1.ServiceType{"", corev1.ServiceTypeClusterIP, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort}[pick(4)],
				ClusterIP: []string{"", "10.0.0.1", corev1.ClusterIPNone}[pick(3)],
			}}
			for range pick(3) {
				s.Status.Conditions = append(s.Status.Conditions, metav1.Condition{
					Type: []string{"Ready", "Reconciling", "Stalled", "Other"}[pick(4)], Status: metav1.ConditionStatus(statuses[pick(3)]),
					Reason: []string{"R", ""}[pick(2)], Message: []string{"", "m"}[pick(2)],
				})
			}
			obj, kind = s, KindService
		default:
			ing := &networkingv1.Ingress{ObjectMeta: meta(), Spec: networkingv1.IngressSpec{
				Rules: []networkingv1.IngressRule{{Host: "web.t.example"}},
			}}
			for range pick(3) {
				ing.Status.LoadBalancer.Ingress = append(ing.Status.LoadBalancer.Ingress, networkingv1.IngressLoadBalancerIngress{
					IP: []string{"", "10.0.0.2"}[pick(2)], Hostname: []string{"", "lb.example"}[pick(2)],
				})
			}
			obj, kind = ing, KindIngress
		}
		whole, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		want, wantErr := judgeFields(kind, obj, whole)
		few, ok := kstatusFields(obj)
		if !ok {
			t.Fatalf("kstatusFields does not take a %s", kind)
		}
		got, gotErr := judgeFields(kind, obj, few)
		if got != want || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("%s %d: from the kept fields %+v (%v), from the whole object %+v (%v)\nobject: %+v", kind, i, got, gotErr, want, wantErr, obj)
		}
		judged[kind+" "+string(want.Status)]++
	}
	// Every verdict was reached, or the generator did not vary enough.
	for _, k := range []string{KindDeployment + " Current", KindDeployment + " InProgress", KindDeployment + " Failed", KindDeployment + " Terminating",
		KindService + " Current", KindService + " InProgress", KindService + " Terminating",
		KindIngress + " Current", KindIngress + " Terminating"} {
		if judged[k] == 0 {
			t.Errorf("no object judged %s (%v)", k, judged)
		}
	}
}

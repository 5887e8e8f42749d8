package platform

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func deployment(replicas int32, image, rv string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns", ResourceVersion: rv},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}}},
		},
		Status: appsv1.DeploymentStatus{ReadyReplicas: replicas},
	}
}

func TestChangedFields(t *testing.T) {
	cases := []struct {
		name string
		a, b *appsv1.Deployment
		want []string
	}{
		{"server-maintained fields ignored", deployment(1, "x", "1"), deployment(1, "x", "2"), nil},
		{"replicas", deployment(1, "x", "1"), deployment(2, "x", "1"), []string{"spec.replicas"}},
		{"image and replicas", deployment(1, "x", "1"), deployment(3, "y", "1"), []string{"spec.replicas", "spec.template.spec.containers[0].image"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := changedFields(tc.a, tc.b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("changedFields = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNewer(t *testing.T) {
	cases := []struct {
		version string
		schema  int
		ours    string
		want    bool
	}{
		{"", 0, "v1.0.0", false},                      // not recorded: never newer
		{"v1.0.0", SchemaVersion + 1, "v9.0.0", true}, // schema wins
		{"v1.2.0", SchemaVersion, "v1.1.9", true},
		{"v1.2.0", SchemaVersion, "v1.2.0", false},
		{"v1.2.0", SchemaVersion, "v1.10.0", false},
		{"1.3.0-rc.1", SchemaVersion, "v1.2.5", true},
		{"v9.0.0", SchemaVersion, "dev", false}, // a dev build compares schemas only
		{"v9.0.0", SchemaVersion - 1, "v1.0.0", false},
	}
	for _, tc := range cases {
		if got := Newer(tc.version, tc.schema, tc.ours); got != tc.want {
			t.Errorf("Newer(%q, %d, %q) = %v, want %v", tc.version, tc.schema, tc.ours, got, tc.want)
		}
	}
}

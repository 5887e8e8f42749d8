package project

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilnctl/kiln/engine/config"
)

// FuzzDecodeSpec feeds decodeSpec what a tenant could plant in its
// namespace: it never panics, and whatever it accepts is a spec kiln could
// have written there (its own tenant and project, a known state, a stack
// that passes validation). Without -fuzz it runs the seeds only.
func FuzzDecodeSpec(f *testing.F) {
	good, _ := json.Marshal(Spec{Tenant: "t", Project: "p", Stack: config.DefaultStack(), State: DesiredRunning, Revision: 3})
	other, _ := json.Marshal(Spec{Tenant: "u", Project: "p", Stack: config.DefaultStack(), State: DesiredRunning})
	for _, s := range []string{string(good), string(other), "", "{}", "null", "[]", `{"tenant":"t","project":"p"}`,
		strings.Replace(string(good), "running", "deleted", 1), strings.Replace(string(good), `"port":8080`, `"port":-1`, 1),
		strings.Replace(string(good), `"image":"`, `"image":"\u001b[2J`, 1), `{"tenant":"t","project":"p","stack":{"name":"x"},"state":"running","revision":1e400}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kiln-tenant-t", Name: "kiln-project-p"}, Data: map[string]string{SpecKey: data}}
		s, err := decodeSpec(cm)
		if err != nil {
			if s != nil {
				t.Fatal("spec and error both returned")
			}
			if !strings.Contains(err.Error(), "kiln-tenant-t/kiln-project-p") {
				t.Fatalf("error does not name the ConfigMap: %v", err)
			}
			return
		}
		if s.Tenant != "t" || s.Project != "p" {
			t.Fatalf("accepted the spec of %s/%s from kiln-tenant-t/kiln-project-p", s.Tenant, s.Project)
		}
		if s.State != DesiredRunning && s.State != DesiredSuspended {
			t.Fatalf("accepted state %q", s.State)
		}
		if err := config.ValidateStack("stack", s.Stack); err != nil {
			t.Fatalf("accepted an invalid stack: %v", err)
		}
	})
}

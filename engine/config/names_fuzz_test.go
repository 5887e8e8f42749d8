package config

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kilnctl/kiln/engine/failure"
)

// FuzzNames checks NAME and TENANT/PROJECT validation against the rules of
// the real consumer, the Kubernetes API server: whatever kiln accepts makes
// valid object names (kiln-system labels, kiln-tenant-T namespaces,
// Service P), and whatever it refuses is bad input (exit 2) naming the
// input. Without -fuzz it runs the seeds only.
func FuzzNames(f *testing.F) {
	for _, s := range []string{"dev1", "a", "-a", "a-", "A", "a_b", "a.b", "web/blog", "default/1blog",
		strings.Repeat("a", 40), strings.Repeat("a", 41), "t/" + strings.Repeat("p", 40), "a/b/c", "/", "", "é", "a\x00b", "x\u202ey"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if err := ValidateName(s); err == nil {
			if errs := validation.IsDNS1123Label(s); len(errs) > 0 || len(s) > MaxNameLength {
				t.Fatalf("NAME %q accepted but the API server refuses it: %v", s, errs)
			}
			if errs := validation.IsValidLabelValue(s); len(errs) > 0 {
				t.Fatalf("NAME %q accepted but is not a label value: %v", s, errs)
			}
		} else if failure.Of(err) != failure.Input || !strings.Contains(err.Error(), "NAME") {
			t.Fatalf("NAME %q: %d %v", s, failure.Of(err), err)
		}
		tenant, project, err := ValidateProjectRef(s)
		if err != nil {
			if failure.Of(err) != failure.Input || !strings.Contains(err.Error(), "TENANT/PROJECT") {
				t.Fatalf("TENANT/PROJECT %q: %d %v", s, failure.Of(err), err)
			}
			return
		}
		if errs := validation.IsDNS1123Label(TenantNamespace(tenant)); len(errs) > 0 {
			t.Fatalf("%q: namespace %q refused by the API server: %v", s, TenantNamespace(tenant), errs)
		}
		if errs := validation.IsDNS1035Label(project); len(errs) > 0 {
			t.Fatalf("%q: Service %q refused by the API server: %v", s, project, errs)
		}
		if errs := validation.IsDNS1123Label("kiln-project-" + project); len(errs) > 0 {
			t.Fatalf("%q: spec ConfigMap name refused: %v", s, errs)
		}
	})
}

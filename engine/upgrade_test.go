package engine

import (
	"reflect"
	"testing"

	"github.com/kilnctl/kiln/engine/config"
)

func TestStackFields(t *testing.T) {
	base := config.Stack{Name: "web", Image: "nginx:1", Port: 80, CPU: "100m", Memory: "128Mi"}
	cases := []struct {
		name string
		want config.Stack
		out  []string
	}{
		{"same", base, nil},
		{"quantities compare by value", config.Stack{Name: "web", Image: "nginx:1", Port: 80, CPU: "0.1", Memory: "128Mi"}, nil},
		{"image and memory", config.Stack{Name: "web", Image: "nginx:2", Port: 80, CPU: "100m", Memory: "256Mi"}, []string{"stack.image", "stack.memory"}},
		{"port", config.Stack{Name: "web", Image: "nginx:1", Port: 8080, CPU: "100m", Memory: "128Mi"}, []string{"stack.port"}},
	}
	for _, tc := range cases {
		if got := stackFields(base, tc.want); !reflect.DeepEqual(got, tc.out) {
			t.Errorf("%s: stackFields = %v, want %v", tc.name, got, tc.out)
		}
	}
}

// A plan made under the lock may have fewer changes than the one shown
// (someone did part of it), never one the user did not see.
func TestPlanBeyondShown(t *testing.T) {
	shown := &upgradePlan{changes: []PlanChange{{Action: "create", Kind: "Namespace", Name: "kiln-tenant-a"}, {Action: "update", Kind: "ConfigMap", Namespace: "kiln-system", Name: "kiln-config"}}}
	fewer := &upgradePlan{changes: shown.changes[1:]}
	if got := fewer.beyond(shown); len(got) != 0 {
		t.Errorf("fewer changes reported beyond the plan: %v", got)
	}
	more := &upgradePlan{changes: append([]PlanChange{{Action: "delete", Kind: "Namespace", Name: "kiln-tenant-b"}}, shown.changes...)}
	if got := more.beyond(shown); len(got) != 1 || got[0] != "delete Namespace /kiln-tenant-b" {
		t.Errorf("beyond = %v", got)
	}
}

package aws

import (
	"fmt"
	"strings"
	"testing"
)

// TestNodeCountRule: CheckNodes is the one node-count rule (create,
// upgrade, the flags, the wizard's fields through its backend): 1 to
// MaxNodes when given, 0 the default when not; its refusals and
// NotANodeCount's say the range from MaxNodes itself, so no frontend
// words a range of its own.
func TestNodeCountRule(t *testing.T) {
	for _, c := range []struct {
		n     int
		given bool
		ok    bool
	}{
		{0, false, true}, {0, true, false}, {1, true, true}, {MaxNodes, true, true},
		{MaxNodes + 1, true, false}, {MaxNodes + 1, false, false}, {-1, false, false},
	} {
		err := CheckNodes(c.n, c.given)
		if (err == nil) != c.ok {
			t.Errorf("CheckNodes(%d, %v) = %v, want ok %v", c.n, c.given, err, c.ok)
		}
		if err != nil && !containsRange(err) {
			t.Errorf("CheckNodes(%d, %v) = %q, want it to say 1 to %d", c.n, c.given, err, MaxNodes)
		}
	}
	if err := NotANodeCount(); !containsRange(err) {
		t.Errorf("NotANodeCount() = %q, want it to say 1 to %d", err, MaxNodes)
	}
}

func containsRange(err error) bool {
	return err != nil && strings.Contains(err.Error(), fmt.Sprintf("a node group has 1 to %d nodes", MaxNodes))
}

package main

import (
	"strings"
	"syscall"
	"testing"
)

// TestCancelledSuspendReadsBack: a suspend interrupted after its spec
// write landed says what the cluster holds now, read back, instead of the
// cancelled call's "context canceled".
func TestCancelledSuspendReadsBack(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "kappa", "kiln-b")
	expect(t, e.kiln("create", "kube", "kappa", "--context", "kiln-b"), 0)
	args := func(op string) []string {
		return []string{"project", op, "kube", "kappa", "default/app", "--context", "kiln-b", "-o", "json"}
	}
	expect(t, e.kiln(args("create")...), 0)
	// The signal cancels kiln's context asynchronously, and the pause hook
	// does not wait for it: when the suspend got past the pause before the
	// cancel landed (exit 0), start the project again and retry.
	var r result
	for attempt := 1; ; attempt++ {
		p := e.startPaused("after-ingress", args("suspend")...)
		if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		r = p.resume()
		if r.code != 0 || attempt == 3 {
			break
		}
		expect(t, e.kiln(args("start")...), 0)
	}
	expect(t, r, 130)
	msg, _ := r.last(t, "result")["message"].(string)
	if !strings.Contains(msg, "read back from the cluster: desired suspended") || strings.Contains(msg, "context canceled") {
		t.Errorf("cancelled suspend: %q", msg)
	}
}

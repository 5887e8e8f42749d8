package project

import (
	"strings"
	"testing"
)

// TestActionsWordTheProjectHints: the commands project messages suggest
// ("nothing is running: run …") are the frontend's words when Ops.Actions
// is set, the kiln command otherwise.
func TestActionsWordTheProjectHints(t *testing.T) {
	r := Ref{Tenant: "default", Project: "blog"}
	o := &Ops{Cluster: "dev1", Provider: "kube", Actions: func(verb, args []string) string { return "ACT " + strings.Join(append(verb, args...), " ") }}
	if got := o.command("start", r); got != "ACT project start default/blog" {
		t.Errorf("with Actions: %q", got)
	}
	o.Actions = nil
	if got := o.command("start", r); got != "kiln project start kube dev1 default/blog" {
		t.Errorf("without Actions: %q", got)
	}
}

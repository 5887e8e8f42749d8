package tui

import (
	"context"
	"testing"

	"github.com/kilnctl/kiln/engine"
)

// feedOps is Ops (the interface embedded, unused) that is a ProjectFeed;
// its methods are never called: the test runs no command.
type feedOps struct {
	Ops
	ProjectFeed
}

// TestEventsReadOnShownProjectChange: on the project screen, a watch
// delivery reads the project's Events again only when that project's
// status changed, not when another project did (each read is a project
// inspect against the cluster).
func TestEventsReadOnShownProjectChange(t *testing.T) {
	status := func(webState, apiState string) *engine.ClusterStatus {
		return &engine.ClusterStatus{Provider: "kube", Name: "dev1", Location: "kiln-local", Installed: true, Ready: true,
			Projects: []engine.ProjectStatus{
				{Tenant: "default", Project: "web", State: webState, Desired: "running"},
				{Tenant: "team-a", Project: "api", State: apiState, Desired: "running"},
			}}
	}
	m := New(Options{Ops: feedOps{}})
	m.screen = screenProject
	m.insp = &inspectState{target: engine.ClusterRef{Provider: "kube", Name: "dev1", Location: "kiln-local"}, ref: "team-a/api",
		data: status("running", "degraded"), feed: &feedState{ref: "team-a/api"}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	deliver := func(st *engine.ClusterStatus) {
		m.insp.feed.eventsLoading = false
		m.inspectResult(inspectMsg{gen: m.insp.gen, data: st, watch: make(chan inspectMsg), ctx: ctx})
	}
	deliver(status("degraded", "degraded")) // web changed
	if m.insp.feed.eventsLoading {
		t.Error("another project's change read the shown project's Events again")
	}
	deliver(status("degraded", "running")) // api changed
	if !m.insp.feed.eventsLoading {
		t.Error("the shown project's change did not read its Events again")
	}
	deliver(status("degraded", "running")) // nothing changed
	if m.insp.feed.eventsLoading {
		t.Error("an unchanged read read the Events again")
	}
	gone := status("degraded", "running")
	gone.Projects = gone.Projects[:1]
	deliver(gone) // api deleted
	if !m.insp.feed.eventsLoading {
		t.Error("the shown project's deletion did not read its Events again")
	}
}

package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/failure"
)

// scopedProvider is a provider whose locations are given: the summary and
// scope messages are pure logic over them.
type scopedProvider struct{ locs []Location }

func (p *scopedProvider) Name() string { return "kube" }
func (p *scopedProvider) Nouns() Nouns {
	return Nouns{Location: "context", Scope: "kubeconfig", Target: InputContext}
}
func (p *scopedProvider) Target() string         { return "a" }
func (p *scopedProvider) Scope() (Input, string) { return InputContexts, "KILN_CONTEXTS" }
func (p *scopedProvider) Discover(context.Context, string) ([]Location, error) {
	return p.locs, nil
}
func (p *scopedProvider) EnsureInfrastructure(context.Context, string, string, *event.Reporter) (Location, bool, error) {
	return Location{}, true, nil
}
func (p *scopedProvider) DestroyInfrastructure(context.Context, string, string, *event.Reporter) (bool, error) {
	return true, nil
}

func TestDiscoveryReportsSlowAndSkippedLocations(t *testing.T) {
	var evs []Event
	e := &Engine{Sink: SinkFunc(func(ev Event) { evs = append(evs, ev) })}
	p := &scopedProvider{locs: []Location{
		{Name: "a", Infra: InfraPresent, Elapsed: 20 * time.Millisecond},
		{Name: "slow", Infra: InfraUnreachable, Elapsed: 5 * time.Second, Err: errors.New("credential plugin `aws` did not answer within 5s")},
		{Name: "prod", Skipped: true},
	}}
	f, err := e.discoverTarget(context.Background(), Target{Provider: p, Name: "dev1", TokenDir: t.TempDir()}, true)
	if err != nil {
		t.Fatal(err)
	}
	if f.loc.Name != "a" || len(f.skipped) != 1 || f.skipped[0] != "prod" {
		t.Errorf("found %+v", f)
	}
	var disc *event.DiscoveryEvent
	var summary string
	for _, ev := range evs {
		if d, ok := ev.Payload.(event.DiscoveryEvent); ok {
			disc = &d
		}
		if l, ok := ev.Payload.(event.LogEvent); ok && strings.HasPrefix(l.Message, "discovery:") {
			summary = string(l.Level) + " " + l.Message
		}
	}
	if disc == nil || len(disc.Clusters) != 2 || disc.Source != SourceDiscovery || len(disc.Skipped) != 1 || disc.Clusters[1].ElapsedMS != 5000 {
		t.Fatalf("discovery event: %+v", disc)
	}
	for _, want := range []string{"warn discovery: 2 contexts searched", "left out by the user: prod", "slow: slow 5s (credential plugin `aws` did not answer within 5s)", "--contexts or KILN_CONTEXTS"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary %q lacks %q", summary, want)
		}
	}
	if got := uniqueness(p, "dev1", f.skipped); !strings.Contains(got, "dev1 is known unique only across the contexts searched (not searched: prod)") {
		t.Errorf("uniqueness note: %q", got)
	}
}

// explicitProvider names its location (the user gave --context, or the
// wizard's selected row) and finds the cluster there.
type explicitProvider struct{ scopedProvider }

func (p *explicitProvider) Explicit() bool { return true }
func (p *explicitProvider) InspectLocation(_ context.Context, name, where string) Location {
	return Location{Name: where, Cluster: name, Infra: InfraPresent}
}

// TestNamedLocationIsWordedByTheFrontend: the line saying where a named
// cluster was found names the CLI's flag, or the frontend's own words
// (Engine.Chosen: the wizard's "chosen in the wizard", never a form field
// the user did not use).
func TestNamedLocationIsWordedByTheFrontend(t *testing.T) {
	for _, tc := range []struct {
		chosen, want string
	}{
		{"", "cluster dev1 is in context a (named with --context)"},
		{"chosen in the wizard", "cluster dev1 is in context a (chosen in the wizard)"},
	} {
		var logs []string
		e := &Engine{Chosen: tc.chosen, Namer: func(in Input) string { return "FORM FIELD " + string(in) }, Sink: SinkFunc(func(ev Event) {
			if l, ok := ev.Payload.(event.LogEvent); ok {
				logs = append(logs, l.Message)
			}
		})}
		if tc.chosen == "" {
			e.Namer = nil
		}
		if _, err := e.discoverTarget(context.Background(), Target{Provider: &explicitProvider{}, Name: "dev1", TokenDir: t.TempDir()}, false); err != nil {
			t.Fatal(err)
		}
		all := strings.Join(logs, "\n")
		if !strings.Contains(all, tc.want) || strings.Contains(all, "FORM FIELD") {
			t.Errorf("Chosen %q: logs\n%s\nwant a line with %q and no form field", tc.chosen, all, tc.want)
		}
	}
}

// TestNamedLocationRefusalsAreCreatesWords: an operation on a location the
// user named refuses a NAME that lives elsewhere, and a location hosting
// another kiln cluster, with the words of create's decision (one
// placeError for both), and the same exit.
func TestNamedLocationRefusalsAreCreatesWords(t *testing.T) {
	p := &explicitProvider{}
	for _, c := range []struct {
		locs []Location
		f    Facts
	}{
		{[]Location{{Name: "a", Cluster: "other"}}, Facts{Location: "a", Cluster: "other"}},
		{[]Location{{Name: "a"}, {Name: "b", Cluster: "dev1"}}, Facts{Location: "a", Elsewhere: []string{"b"}}},
	} {
		_, _, err := (&Engine{}).pick(Target{Provider: p, Name: "dev1"}, c.locs, nil, false)
		c.f.Nouns = p.Nouns()
		want := Decide(c.f, Asked{Name: "dev1"}).Err
		if err == nil || want == nil || err.Error() != want.Error() || failure.Of(err) != failure.Of(want) {
			t.Errorf("locations %+v: an operation says %v (kind %v), create %v (kind %v)", c.locs, err, failure.Of(err), want, failure.Of(want))
		}
	}
}

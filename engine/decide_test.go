package engine

import (
	"strings"
	"testing"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/platform"
)

// TestDecideTable checks every row of the create decision table (DESIGN.md
// §7) and its exits. Decide is pure: no cluster, no disk, milliseconds.
func TestDecideTable(t *testing.T) {
	const name = "dev1"
	dir := func(path, key string, state creds.State) TokenDirFact {
		return TokenDirFact{Candidate: candidate{Path: path, Source: "default path"},
			Dir: &creds.TokenDir{Path: path, Manifest: creds.Manifest{Cluster: name, Provider: "kube", KeyID: key, State: state}}}
	}
	absent := TokenDirFact{Candidate: candidate{Path: "/flag", Source: "--token-dir"}}
	broken := TokenDirFact{Candidate: candidate{Path: "/broken", Source: "--token-dir"},
		Err: failure.BadInput("token dir /broken (from --token-dir) is unusable")}
	installedCfg := config.Default(name)
	installed := func(keys ...string) *platform.State {
		st := &platform.State{NamespaceExists: true, Cluster: name, Installed: true, Config: installedCfg, Keys: map[string]string{}}
		for _, k := range keys {
			st.Keys[k] = "PEM"
		}
		return st
	}
	twoTenants := config.Default(name)
	twoTenants.Spec.Tenants = []string{"default", "staging"}
	userCfg := config.Default(name)
	userCfg.Spec.Tenants = []string{"team"}
	asked := ContinueQuestion{Provider: "kube", Name: name, Location: "kiln-a", TrustedKeyIDs: []string{"k1"}, TokenDir: "/td"}

	tests := []struct {
		name string
		f    Facts
		a    Asked
		// want is the decision, "?" for a question, or "" for an error.
		want     string
		kind     failure.Kind
		config   *config.ClusterConfig
		tokenDir string
		// msg are fragments the reason or error must hold.
		msg []string
	}{
		{name: "nothing found: fresh",
			f: Facts{Nouns: kubeNouns, Location: "kiln-a", Infra: InfraAbsent}, want: DecisionFresh, config: config.Default(name),
			msg: []string{"no cluster found"}},
		{name: "cluster without kiln-system: fresh",
			f: Facts{Nouns: kubeNouns, Location: "kiln-a", Infra: InfraPresent, State: &platform.State{}}, want: DecisionFresh, config: config.Default(name),
			msg: []string{"no kiln platform in context kiln-a"}},
		{name: "fresh keeps the user's config",
			f: Facts{Nouns: kubeNouns, Location: "kiln-a", Infra: InfraAbsent}, a: Asked{Config: userCfg}, want: DecisionFresh, config: userCfg},
		{name: "fresh with a pending dir on disk: still fresh (credentials replaces it)",
			f:    Facts{Nouns: kubeNouns, Location: "kiln-a", Infra: InfraPresent, State: &platform.State{}, TokenDirs: []TokenDirFact{dir("/td", "k9", creds.StatePending)}},
			want: DecisionFresh},
		{name: "infra only, kiln-system without kiln-config: resume",
			f: Facts{Nouns: kubeNouns, Location: "kiln-a", Infra: InfraPresent, State: &platform.State{NamespaceExists: true, Cluster: name}}, want: DecisionResume,
			config: config.Default(name), msg: []string{"resuming"}},
		{name: "kiln-auth without kiln-config: resume",
			f:    Facts{Provider: "aws", Nouns: awsNouns, Location: "eu-west-1", Infra: InfraPartial, State: &platform.State{Keys: map[string]string{"k1": "PEM"}}},
			want: DecisionResume, msg: []string{"region eu-west-1"}},
		{name: "--continue with nothing installed is a plain create",
			f: Facts{Nouns: kubeNouns, Location: "kiln-a", Infra: InfraAbsent}, a: Asked{Continue: true}, want: DecisionFresh},
		{name: "--continue on a partial create resumes",
			f: Facts{Nouns: kubeNouns, Location: "kiln-a", Infra: InfraPresent, State: &platform.State{NamespaceExists: true}}, a: Asked{Continue: true}, want: DecisionResume},
		{name: "installed without --continue: the question, exit 3 when declined",
			f:    Facts{Provider: "kube", Nouns: kubeNouns, Location: "kiln-a", Cluster: name, Infra: InfraPresent, State: installed("k1"), TokenDirs: []TokenDirFact{dir("/td", "k1", creds.StateCommitted)}},
			want: "?", kind: failure.Confirm, msg: []string{"--continue", "nothing was changed", "k1"}},
		{name: "installed, answered yes on the same facts: continue without asking again",
			f: Facts{Provider: "kube", Nouns: kubeNouns, Location: "kiln-a", Cluster: name, Infra: InfraPresent, State: installed("k1"), TokenDirs: []TokenDirFact{dir("/td", "k1", creds.StateCommitted)}},
			a: Asked{Confirmed: &asked}, want: DecisionContinue, config: installedCfg, tokenDir: "/td"},
		{name: "installed, answered yes but the trusted keys changed since: asked again",
			f: Facts{Provider: "kube", Nouns: kubeNouns, Location: "kiln-a", Cluster: name, Infra: InfraPresent, State: installed("k1", "k2"), TokenDirs: []TokenDirFact{dir("/td", "k1", creds.StateCommitted)}},
			a: Asked{Confirmed: &asked}, want: "?", kind: failure.Confirm},
		{name: "installed, answered yes but the token dir changed since: asked again",
			f: Facts{Provider: "kube", Nouns: kubeNouns, Location: "kiln-a", Cluster: name, Infra: InfraPresent, State: installed("k1")},
			a: Asked{Confirmed: &asked}, want: "?", kind: failure.Confirm},
		{name: "installed with --continue: continue with the trusted key",
			f: Facts{Nouns: kubeNouns, Location: "kiln-a", Cluster: name, Infra: InfraPresent, State: installed("k1"),
				TokenDirs: []TokenDirFact{absent, dir("/other", "k0", creds.StateCommitted), dir("/td", "k1", creds.StatePending)}},
			a: Asked{Continue: true}, want: DecisionContinue, config: installedCfg, tokenDir: "/td", msg: []string{"k1", "/td"}},
		{name: "installed with --continue and the same config: continue",
			f: Facts{Nouns: kubeNouns, Location: "kiln-a", Cluster: name, Infra: InfraPresent, State: installed("k1"), TokenDirs: []TokenDirFact{dir("/td", "k1", creds.StateCommitted)}},
			a: Asked{Continue: true, Config: config.Default(name)}, want: DecisionContinue, tokenDir: "/td"},
		{name: "installed, no token dir with a trusted key: exit 1 naming keys and places",
			f: Facts{Nouns: kubeNouns, Location: "kiln-a", Cluster: name, Infra: InfraPresent, State: installed("k1"), TokenDirs: []TokenDirFact{absent, dir("/td", "k0", creds.StateCommitted)}},
			a: Asked{Continue: true}, kind: failure.Failed, msg: []string{"trusted: k1", "/flag (--token-dir)", "/td has key k0", "--token-dir"}},
		{name: "installed, no token dir at all: the question says none was found",
			f:    Facts{Nouns: kubeNouns, Location: "kiln-a", Cluster: name, Infra: InfraPresent, State: installed("k1"), TokenDirs: []TokenDirFact{absent}},
			want: "?", kind: failure.Confirm},
		{name: "same NAME in another context: exit 2 saying where",
			f: Facts{Nouns: kubeNouns, Location: "kiln-b", Infra: InfraPresent, Elsewhere: []string{"kiln-a"}, State: &platform.State{}}, a: Asked{Continue: true},
			kind: failure.Input, msg: []string{"already exists in context kiln-a", "unique per kubeconfig", "--context kiln-a"}},
		{name: "same NAME in another region: exit 2 saying where",
			f:    Facts{Provider: "aws", Nouns: awsNouns, Location: "eu-west-1", Infra: InfraAbsent, Elsewhere: []string{"us-east-1"}},
			kind: failure.Input, msg: []string{"region us-east-1", "unique per account", "--region us-east-1"}},
		{name: "the context hosts another NAME: exit 2",
			f:    Facts{Nouns: kubeNouns, Location: "kiln-a", Cluster: "other", Infra: InfraPresent, State: installed("k1")},
			kind: failure.Input, msg: []string{"already hosts kiln cluster other"}},
		{name: "--continue with a config that differs: exit 2 listing fields",
			f: Facts{Nouns: kubeNouns, Location: "kiln-a", Cluster: name, Infra: InfraPresent, State: installed("k1"), TokenDirs: []TokenDirFact{dir("/td", "k1", creds.StateCommitted)}},
			a: Asked{Continue: true, Config: twoTenants, ConfigPath: "kiln.yaml"}, kind: failure.Input,
			msg: []string{"--config kiln.yaml differs", "spec.tenants"}},
		{name: "an unusable token dir stops a fresh create: exit 2",
			f: Facts{Nouns: kubeNouns, Location: "kiln-a", Infra: InfraAbsent, TokenDirs: []TokenDirFact{broken}}, kind: failure.Input, msg: []string{"/broken"}},
		{name: "an unusable token dir stops a continue: exit 2",
			f: Facts{Nouns: kubeNouns, Location: "kiln-a", Cluster: name, Infra: InfraPresent, State: installed("k1"), TokenDirs: []TokenDirFact{broken}},
			a: Asked{Continue: true}, kind: failure.Input, msg: []string{"/broken"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.a
			a.Name = name
			out := Decide(tt.f, a)
			text := out.Reason
			if out.Err != nil {
				text = out.Err.Error()
			}
			switch tt.want {
			case "":
				if out.Err == nil || out.Decision != "" || out.Question != nil {
					t.Fatalf("want an error, got %+v", out)
				}
			case "?":
				if out.Question == nil || out.Decision != "" {
					t.Fatalf("want a question, got %+v", out)
				}
				q := out.Question
				if q.Name != name || q.Location != tt.f.Location || strings.Join(q.TrustedKeyIDs, ",") != strings.Join(tt.f.State.KeyIDs(), ",") {
					t.Errorf("question %+v does not describe the facts", q)
				}
				wantDir := ""
				if td, _, _ := trustedDir(tt.f.TokenDirs, tt.f.State.Keys); td != nil {
					wantDir = td.Path
				}
				if q.TokenDir != wantDir {
					t.Errorf("question token dir %q, want %q", q.TokenDir, wantDir)
				}
			default:
				if out.Err != nil || out.Question != nil || out.Decision != tt.want {
					t.Fatalf("want %s, got decision %q question %v err %v", tt.want, out.Decision, out.Question, out.Err)
				}
				if out.Config == nil {
					t.Error("no config decided")
				}
			}
			if tt.want == "" || tt.want == "?" {
				if got := failure.Of(out.Err); got != tt.kind {
					t.Errorf("kind %v, want %v: %v", got, tt.kind, out.Err)
				}
			}
			if tt.config != nil && len(config.Diff(out.Config, tt.config)) > 0 {
				t.Errorf("config %v, want %v", out.Config.Spec, tt.config.Spec)
			}
			if tt.tokenDir != "" && (out.TokenDir == nil || out.TokenDir.Path != tt.tokenDir) {
				t.Errorf("token dir %v, want %s", out.TokenDir, tt.tokenDir)
			}
			for _, m := range tt.msg {
				if !strings.Contains(text, m) {
					t.Errorf("%q does not say %q", text, m)
				}
			}
		})
	}
}

var (
	kubeNouns = Nouns{Location: "context", Scope: "kubeconfig", Target: InputContext}
	awsNouns  = Nouns{Location: "region", Scope: "account", Target: InputRegion}
)

// TestPlaceIsDecidesRule: Place (which the wizard's create form asks as
// the user types) refuses exactly what Decide refuses from discovery's
// facts, and lets through what Decide goes on with; a form that judged
// names by a rule of its own could drift from create.
func TestPlaceIsDecidesRule(t *testing.T) {
	const name = "dev1"
	cases := []struct {
		hosted    string
		elsewhere []string
		want      Placement
	}{
		{"", nil, PlaceFree},
		{name, nil, PlaceHere},
		{"other", nil, PlaceTaken},
		{"", []string{"kiln-b"}, PlaceElsewhere},
		{"other", []string{"kiln-b"}, PlaceElsewhere}, // both: the NAME's own place is said first
	}
	for _, c := range cases {
		got := Place(name, c.hosted, c.elsewhere)
		if got != c.want {
			t.Errorf("Place(%q, %q, %v) = %d, want %d", name, c.hosted, c.elsewhere, got, c.want)
		}
		f := Facts{Nouns: kubeNouns, Location: "kiln-a", Cluster: c.hosted, Elsewhere: c.elsewhere, Infra: InfraPresent, State: &platform.State{}}
		out := Decide(f, Asked{Name: name})
		refused := got == PlaceElsewhere || got == PlaceTaken
		if (out.Err != nil) != refused {
			t.Errorf("hosted %q elsewhere %v: Place says %d, Decide says %+v", c.hosted, c.elsewhere, got, out)
		}
		if refused && failure.Of(out.Err) != failure.Input {
			t.Errorf("hosted %q elsewhere %v: Decide's refusal is %v, want %v", c.hosted, c.elsewhere, failure.Of(out.Err), failure.Input)
		}
	}
}

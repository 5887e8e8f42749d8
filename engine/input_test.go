package engine

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/platform"
)

// An error that tells the user what to give next carries the input, keeps
// its exit class, and is worded by the frontend: the CLI's flag by
// default, the wizard's own words through a Namer, also when wrapped.
func TestInputErrorIsWordedByTheFrontend(t *testing.T) {
	f := Facts{Nouns: kubeNouns, Location: "kiln-a", Cluster: "c1", Infra: InfraPresent, State: &platform.State{NamespaceExists: true, Cluster: "c1", Installed: true, Config: config.Default("c1"), Keys: map[string]string{"k1": "PEM"}},
		TokenDirs: []TokenDirFact{{Dir: &creds.TokenDir{Path: "/td", Manifest: creds.Manifest{Cluster: "c1", Provider: "kube", KeyID: "k1", State: creds.StateCommitted}}}}}
	out := Decide(f, Asked{Name: "c1"})
	if out.Err == nil {
		t.Fatal("installed platform without --continue: want an error")
	}
	if got := failure.Of(out.Err); got != failure.Confirm {
		t.Fatalf("kind %v, want %v", got, failure.Confirm)
	}
	var ie *InputError
	if !errors.As(out.Err, &ie) || ie.Input != InputContinue || ie.Object != "c1" {
		t.Fatalf("want an InputError for %q about c1, got %#v", InputContinue, ie)
	}
	if !strings.Contains(out.Err.Error(), "Run again with --continue to continue") {
		t.Fatalf("CLI wording changed: %s", out.Err)
	}
	wizard := func(in Input) string { return "the " + strings.ToUpper(string(in)) + " choice" }
	wrapped := fmt.Errorf("create c1: %w", out.Err)
	got := renderError(wrapped, wizard)
	// The prose is the wizard's; the command in backquotes is the CLI's,
	// given too, for the terminal.
	prose := regexp.MustCompile("`[^`]*`").ReplaceAllString(got, "")
	if !strings.HasPrefix(got, "create c1: ") || !strings.Contains(got, "Run again with the CONTINUE choice to continue") || strings.Contains(prose, "--continue") {
		t.Fatalf("wizard wording: %s", got)
	}
	if !strings.Contains(got, "`kiln create PROVIDER c1 --continue --context kiln-a`") {
		t.Fatalf("no runnable command in: %s", got)
	}
	// The location input is the provider's: region for aws.
	f = Facts{Nouns: awsNouns, Location: "eu-west-1", Infra: InfraAbsent, Elsewhere: []string{"us-east-1"}}
	out = Decide(f, Asked{Name: "c1"})
	if !errors.As(out.Err, &ie) || ie.Input != InputRegion || !strings.Contains(out.Err.Error(), "use --region us-east-1") {
		t.Fatalf("aws elsewhere: %v", out.Err)
	}
}

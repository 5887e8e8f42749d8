package input

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kilnctl/kiln/engine/failure"
)

func TestErrorIsWordedByEachFrontend(t *testing.T) {
	err := New(failure.Input, Region, "mars-1", "{input}/{input:regions}: %q is not an AWS region name", "mars-1")
	if got, want := err.Error(), `--region/--regions: "mars-1" is not an AWS region name`; got != want {
		t.Fatalf("CLI words: %q, want %q", got, want)
	}
	if failure.Of(err) != failure.Input {
		t.Fatalf("kind %v", failure.Of(err))
	}
	var ie *Error
	if !errors.As(err, &ie) || ie.Input != Region || ie.Object != "mars-1" {
		t.Fatalf("typed fields lost: %#v", ie)
	}
	form := func(in Input) string { return "the " + strings.ToUpper(string(in)) + " field" }
	wrapped := fmt.Errorf("create c1: %w", err)
	if got, want := Render(wrapped, form), `create c1: the REGION field/the REGIONS field: "mars-1" is not an AWS region name`; got != want {
		t.Fatalf("form words: %q, want %q", got, want)
	}
	// A value that looks like a verb is never taken for one.
	err = New(failure.Input, Config, "{input}.yaml", "{input} %q: cannot read", "{input}.yaml")
	if got, want := err.Error(), `-c/--config "{input}.yaml": cannot read`; got != want {
		t.Fatalf("value with braces: %q, want %q", got, want)
	}
	if got := Render(errors.New("plain"), form); got != "plain" {
		t.Fatalf("plain error reworded: %q", got)
	}
}

// TestCLIOnlyPartsAreTheCLIs: a command to run, marked CLIOnly, is in the
// CLI's words (Error, Render(nil), Render of a wrapping error with nil)
// and never in a frontend's.
func TestCLIOnlyPartsAreTheCLIs(t *testing.T) {
	err := New(failure.Input, KubernetesVersion, "1.33", "{input} %s: one minor version at a time. Upgrade to 1.32 first%s, then on from there",
		"1.33", CLIOnly(" (`kiln upgrade aws dev1 --kubernetes-version 1.32`)"))
	cli := "--kubernetes-version 1.33: one minor version at a time. Upgrade to 1.32 first (`kiln upgrade aws dev1 --kubernetes-version 1.32`), then on from there"
	wrapped := fmt.Errorf("upgrade dev1: %w", err)
	if got := err.Error(); got != cli {
		t.Fatalf("CLI words: %q, want %q", got, cli)
	}
	if got := Render(wrapped, nil); got != "upgrade dev1: "+cli {
		t.Fatalf("Render(nil): %q", got)
	}
	form := func(in Input) string { return "the " + string(in) + " field" }
	want := "upgrade dev1: the kubernetes-version field 1.33: one minor version at a time. Upgrade to 1.32 first, then on from there"
	if got := Render(wrapped, form); got != want {
		t.Fatalf("form words: %q, want %q", got, want)
	}
	if strings.Contains(Render(wrapped, form), "\x01") || strings.Contains(err.Error(), "\x01") {
		t.Fatal("a mark is left in the text")
	}
}

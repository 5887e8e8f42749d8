package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// complete runs `kiln __complete ARGS…` (cobra's completion entry point,
// what the shell scripts call) and returns the candidates.
func (e *env) complete(t *testing.T, args ...string) ([]string, time.Duration) {
	t.Helper()
	cmd := e.command(context.Background(), nil, "__complete")
	// The harness appends --kubeconfig and --keyring-backend; the word
	// being completed must stay last.
	cmd.Args = append([]string{cmd.Args[0], "__complete"}, append(cmd.Args[2:], args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("__complete %v: %v\n%s", args, err, errb.String())
	}
	took := time.Since(start)
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if l != "" && !strings.HasPrefix(l, ":") {
			got = append(got, strings.SplitN(l, "\t", 2)[0])
		}
	}
	return got, took
}

func has(list []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, x := range list {
			found = found || x == w
		}
		if !found {
			return false
		}
	}
	return true
}

// Completion knows the clusters (keyring, token dirs, the context's
// cluster), the contexts, the projects, stacks, tenants and regions.
func TestDynamicCompletion(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "cmpl", "kiln-b")
	cfg := writeConfig(t, projectConfig)
	expect(t, e.kiln("create", "kube", "cmpl", "--context", "kiln-b", "-c", cfg), 0)
	expect(t, e.kiln("project", "create", "kube", "cmpl", "staging/api", "--stack", "api", "--context", "kiln-b"), 0)

	check := func(what string, got []string, want ...string) {
		t.Helper()
		if !has(got, want...) {
			t.Errorf("%s: completion %v lacks %v", what, got, want)
		}
	}
	got, took := e.complete(t, "status", "")
	check("PROVIDER", got, "kube", "aws")
	got, took = e.complete(t, "status", "kube", "--context", "kiln-b", "")
	check("NAME", got, "cmpl")
	t.Logf("NAME completion took %s", took)
	// Without the context, the name still comes from the keyring and the
	// token dir.
	got, _ = e.complete(t, "project", "list", "kube", "--context", "kiln-a", "")
	check("NAME from keyring/token dir", got, "cmpl")
	got, _ = e.complete(t, "project", "inspect", "kube", "cmpl", "--context", "kiln-b", "")
	check("TENANT/PROJECT", got, "staging/api")
	got, _ = e.complete(t, "status", "kube", "cmpl", "--context", "")
	check("--context", got, "kiln-a", "kiln-b")
	got, _ = e.complete(t, "project", "create", "kube", "cmpl", "default/x", "--context", "kiln-b", "--stack", "")
	check("--stack", got, "web", "api")
	got, _ = e.complete(t, "project", "list", "kube", "cmpl", "--context", "kiln-b", "--tenant", "")
	check("--tenant", got, "default", "staging")
	got, _ = e.complete(t, "support", "bundle", "kube", "cmpl", "--context", "kiln-b", "--project", "")
	check("--project", got, "staging/api")
	got, _ = e.complete(t, "status", "aws", "x", "--region", "")
	check("--region", got, "us-east-1", "eu-west-1")
	got, _ = e.complete(t, "project", "inspect", "kube", "cmpl", "--context", "kiln-a", "")
	if len(got) != 0 {
		t.Errorf("projects of cmpl completed from kiln-a, where it does not run: %v", got)
	}
}

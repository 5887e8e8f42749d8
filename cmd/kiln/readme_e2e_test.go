package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// readmeLine is one kiln command of a README block, as a reader runs it.
type readmeLine struct {
	where string // README.md:LINE
	text  string // the line as written
	args  []string
	exit  int // the exit code its comment names ("# exit 3: …"), else 0
}

var commentExit = regexp.MustCompile(`#.*\bexit (\d+)\b`)

// readmeBlock returns the kiln commands of the README's shell block that
// holds a line starting with first, each with the words of subst replaced
// (the README's context and cluster names by this test's). Only what runs
// kiln is taken: the part before a comment, pipe or redirection; a quote
// in that part fails the test, since this reader does not parse quotes.
func readmeBlock(t *testing.T, first string, subst map[string]string) []readmeLine {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var block []readmeLine
	inShell, found := false, false
	for i, ln := range lines {
		if strings.HasPrefix(strings.TrimSpace(ln), "```") {
			if inShell && found {
				return block
			}
			inShell, block = strings.HasPrefix(strings.TrimSpace(ln), "```sh") && !inShell, nil
			continue
		}
		if !inShell {
			continue
		}
		if strings.HasPrefix(ln, first) {
			found = true
		}
		f := strings.Fields(ln)
		if len(f) == 0 || f[0] != "kiln" {
			continue
		}
		cmd := ln
		if i := strings.IndexAny(cmd, "#|>"); i >= 0 {
			cmd = cmd[:i]
		}
		if strings.ContainsAny(cmd, `'"\$<`) {
			t.Fatalf("README.md:%d: %q: quotes, variables or substitutions in the kiln part; teach readmeBlock to parse them", i+1, ln)
		}
		rl := readmeLine{where: "README.md:" + strconv.Itoa(i+1), text: strings.TrimSpace(ln)}
		for _, w := range strings.Fields(cmd)[1:] {
			if s, ok := subst[w]; ok {
				w = s
			}
			rl.args = append(rl.args, w)
		}
		if m := commentExit.FindStringSubmatch(ln); m != nil {
			rl.exit, _ = strconv.Atoi(m[1])
		}
		block = append(block, rl)
	}
	t.Fatalf("README.md has no sh block with a line starting %q", first)
	return nil
}

// runReadme runs one README line (in e.dir: its files, such as kiln.yaml
// or a support bundle, are relative to where the reader stands) and
// checks its exit code.
func (e *env) runReadme(t *testing.T, l readmeLine) result {
	t.Helper()
	r := e.kiln(l.args...)
	if r.code != l.exit {
		t.Fatalf("%s: %s\nran kiln %s: want exit %d, got:\n%s", l.where, l.text, strings.Join(l.args, " "), l.exit, r)
	}
	t.Logf("%s: exit %d: %s", l.where, r.code, l.text)
	return r
}

// The README's quick starts, run as a reader runs them, line by line, on
// the test's control plane (context kiln-a for the README's kiln-local,
// ci and customer-prod): the engineer's block, then the automation block
// with the support block run against its cluster before its destroy (the
// support block's prod1 and default/blog are the automation block's
// ci-42 and default/web). Each line must exit as its comment says (0
// unless "exit N"). The other guides' examples are parsed with the real
// command tree (internal/cli TestDocExamplesParse); the wizard's lines
// (`kiln inspect`, bare `bin/kiln`) are driven in tmux by the TUI tests.
func TestREADMEQuickStartsRun(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	dir := t.TempDir()
	e.dir = dir
	// The automation block's -c kiln.yaml: two tenants and the web stack
	// its project create names.
	cfg := `apiVersion: kiln.dev/v1alpha1
kind: ClusterConfig
spec:
  tenants: [default, staging]
  stacks:
    - {name: web, image: "nginx:1.27-alpine", port: 80}
`
	if err := os.WriteFile(filepath.Join(dir, "kiln.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}

	engineer := readmeBlock(t, "kiln create kube dev1", map[string]string{"kiln-local": "kiln-a"})
	cleanup(t, e, "dev1", "kiln-a")
	if len(engineer) < 6 {
		t.Fatalf("the engineer's quick start has %d kiln lines, want at least 6: %+v", len(engineer), engineer)
	}
	refused := false
	for _, l := range engineer {
		e.runReadme(t, l)
		refused = refused || l.exit == 3
	}
	if !refused {
		t.Error("the engineer's quick start no longer shows create refusing an installed platform (exit 3)")
	}
	waitNamespaceGone(t, clusterA.Client, "kiln-system")

	automation := readmeBlock(t, "kiln create kube ci-42", map[string]string{"ci": "kiln-a"})
	support := readmeBlock(t, "kiln list", map[string]string{"prod1": "ci-42", "customer-prod": "kiln-a", "default/blog": "default/web"})
	cleanup(t, e, "ci-42", "kiln-a")
	last := len(automation) - 1
	if len(automation) < 4 || automation[last].args[0] != "destroy" {
		t.Fatalf("the automation quick start should end with destroy: %+v", automation)
	}
	for _, l := range automation[:last] {
		r := e.runReadme(t, l)
		// What the block's jq reads: the project's state in the NDJSON.
		if l.args[0] == "status" {
			running := false
			for _, ev := range r.events(t) {
				running = running || (ev["type"] == "project" && ev["project"] == "web" && ev["state"] == "running")
			}
			if !running {
				t.Errorf("%s: no project event with web running:\n%s", l.where, r)
			}
		}
	}
	ran := 0
	for _, l := range support {
		if l.args[0] == "inspect" {
			t.Logf("%s: the wizard, not run here (the TUI's tmux tests drive it): %s", l.where, l.text)
			continue
		}
		r := e.runReadme(t, l)
		ran++
		if l.args[0] == "status" && !strings.Contains(r.stdout+r.stderr, "web") {
			t.Errorf("%s: status of ci-42 does not show the project web:\n%s", l.where, r)
		}
	}
	if ran < 4 {
		t.Errorf("ran %d lines of the support quick start, want at least 4", ran)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "*.tar.gz"))
	if len(matches) != 1 {
		t.Errorf("the support bundle line left %v in the reader's directory, want one .tar.gz", matches)
	}
	e.runReadme(t, automation[last])
}

package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// docExample is one kiln command line of a shell block of the docs.
type docExample struct {
	where string // FILE:LINE
	line  string // as written (continuations joined)
	args  []string
}

// shellFence opens a fenced block whose commands a reader copies.
var shellFence = regexp.MustCompile("^\\s*```\\s*(sh|bash|shell|console)\\b")

// placeholder is a word the reader fills in: <TAB>, <name>, <UTC time>.
var placeholder = regexp.MustCompile(`<[A-Za-z][A-Za-z0-9 _./-]*>`)

// substituted names a command run inside another line: source <(kiln …),
// TOKEN=$(kiln …).
var substituted = regexp.MustCompile(`[<$]\((?:bin/)?kiln\b([^)]*)\)`)

// docExamples returns every kiln command line in the sh, bash, shell and
// console blocks of file: lines starting with `kiln`, `$ kiln` or
// `bin/kiln` (continuations with a trailing backslash joined), and kiln
// run inside <(…) or $(…).
func docExamples(t *testing.T, file, name string) []docExample {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []docExample
	lines := strings.Split(string(data), "\n")
	inShell, inFence := false, false
	for i := 0; i < len(lines); i++ {
		ln := lines[i]
		if strings.HasPrefix(strings.TrimSpace(ln), "```") {
			if !inFence {
				inFence, inShell = true, shellFence.MatchString(ln)
			} else {
				inFence, inShell = false, false
			}
			continue
		}
		if !inShell {
			continue
		}
		start := i + 1
		for strings.HasSuffix(ln, "\\") && i+1 < len(lines) {
			i++
			ln = strings.TrimSuffix(ln, "\\") + " " + strings.TrimSpace(lines[i])
		}
		cmd := strings.TrimSpace(ln)
		cmd = strings.TrimPrefix(cmd, "$ ")
		var lineCmds []string
		if f := strings.Fields(cmd); len(f) > 0 && (f[0] == "kiln" || f[0] == "bin/kiln") {
			lineCmds = append(lineCmds, cmd)
		} else {
			for _, m := range substituted.FindAllStringSubmatch(cmd, -1) {
				lineCmds = append(lineCmds, "kiln"+m[1])
			}
		}
		for _, c := range lineCmds {
			words, err := shellWords(placeholder.ReplaceAllString(c, "x1"))
			if err != nil {
				t.Errorf("%s:%d: %q: %v", name, start, c, err)
				continue
			}
			out = append(out, docExample{where: fmt.Sprintf("%s:%d", name, start), line: c, args: words[1:]})
		}
	}
	return out
}

// shellWords splits a command line as a shell would, far enough for the
// docs' examples: quotes, and the end of the command at a comment, a
// pipe, a redirection, &, && or ;.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '"':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unterminated %c quote", c)
			}
			cur.WriteString(s[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case c == ' ' || c == '\t':
			flush()
		case c == '#' && !inWord, c == '|', c == '>', c == '<', c == '&', c == ';':
			// the end of kiln's command: a comment, pipe, redirection or
			// the next command. A digit before > (2>&1) is the
			// redirection's, not an argument.
			if c == '>' && inWord && cur.Len() == 1 && cur.String()[0] >= '0' && cur.String()[0] <= '9' {
				cur.Reset()
				inWord = false
			}
			flush()
			return words, nil
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words, nil
}

// docFiles are the README and the guides of docs/ (the generated
// reference is checked from the command tree itself, below).
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../../README.md"}, files...)
}

// Every command example in the README and the guides parses with kiln's
// real command tree: the command exists, takes every flag given (with a
// value where it needs one) and its number of arguments. Nothing is run.
// A placeholder (<TAB>, <name>) stands for a value.
func TestDocExamplesParse(t *testing.T) {
	n := 0
	for _, file := range docFiles(t) {
		name := strings.TrimPrefix(file, "../../")
		for _, ex := range docExamples(t, file, name) {
			n++
			if _, _, err := parseCommandLine(NewRoot(BuildInfo{}), ex.args, true); err != nil {
				t.Errorf("%s: %q: %v", ex.where, ex.line, err)
			}
		}
	}
	if n < 50 {
		t.Fatalf("only %d kiln examples found in the README and docs/: the extraction is wrong", n)
	}
	t.Logf("%d kiln examples parsed", n)
}

// The examples of every command's help (cobra's Example, printed by
// --help and in docs/reference/) parse with the real command tree too.
func TestCommandHelpExamplesParse(t *testing.T) {
	n := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		lines := strings.Split(c.Example, "\n")
		for i := 0; i < len(lines); i++ {
			ln := strings.TrimSpace(lines[i])
			for strings.HasSuffix(ln, "\\") && i+1 < len(lines) {
				i++
				ln = strings.TrimSuffix(ln, "\\") + " " + strings.TrimSpace(lines[i])
			}
			if f := strings.Fields(ln); len(f) == 0 || f[0] != "kiln" {
				continue
			}
			words, err := shellWords(placeholder.ReplaceAllString(ln, "x1"))
			if err == nil {
				_, _, err = parseCommandLine(NewRoot(BuildInfo{}), words[1:], true)
			}
			n++
			if err != nil {
				t.Errorf("%q --help, example line %d: %q: %v", c.CommandPath(), i+1, ln, err)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewRoot(BuildInfo{}))
	if n == 0 {
		t.Fatal("no command has a kiln example: the walk is wrong")
	}
}

// The extraction itself: continuations, prompts, comments, pipes,
// substitutions and placeholders.
func TestDocExamplesExtraction(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "x.md")
	src := "text kiln create kube nope\n" +
		"```sh\n" +
		"kiln create kube dev1 --context kind-dev1   # a comment\n" +
		"$ kiln status kube dev1 -o json | jq .\n" +
		"kiln gateway --listen 127.0.0.1:8080 \\\n  --domain d.test\n" +
		"source <(kiln completion bash)\n" +
		"kiln status kube <TAB>\n" +
		"kubectl get pods\n" +
		"```\n" +
		"```\nkiln not a shell block\n```\n" +
		"```console\nbin/kiln list 2>&1 | head\n```\n"
	if err := os.WriteFile(doc, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := docExamples(t, doc, "x.md")
	want := []struct {
		where string
		args  string
	}{
		{"x.md:3", "create kube dev1 --context kind-dev1"},
		{"x.md:4", "status kube dev1 -o json"},
		{"x.md:5", "gateway --listen 127.0.0.1:8080 --domain d.test"},
		{"x.md:7", "completion bash"},
		{"x.md:8", "status kube x1"},
		{"x.md:15", "list"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d examples %+v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		if got[i].where != w.where || strings.Join(got[i].args, " ") != w.args {
			t.Errorf("example %d: %s %q, want %s %q", i, got[i].where, got[i].args, w.where, w.args)
		}
	}
	root := NewRoot(BuildInfo{})
	if _, _, err := parseCommandLine(root, []string{"creat", "kube", "dev1"}, true); err == nil {
		t.Error("kiln creat parsed")
	}
	if _, _, err := parseCommandLine(NewRoot(BuildInfo{}), []string{"status", "kube", "dev1", "--no-such-flag"}, true); err == nil {
		t.Error("an unknown flag parsed")
	}
	if _, _, err := parseCommandLine(NewRoot(BuildInfo{}), []string{"help", "no-such-topic"}, true); err == nil {
		t.Error("help of no topic parsed")
	}
	if _, _, err := parseCommandLine(NewRoot(BuildInfo{}), []string{"help", "environment"}, true); err != nil {
		t.Errorf("kiln help environment: %v", err)
	}
}

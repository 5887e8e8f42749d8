package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// updateGolden rewrites testdata/golden from this run: go test -run
// TestEventGolden ./cmd/kiln -update-golden.
var updateGolden = flag.Bool("update-golden", false, "rewrite the golden NDJSON files of TestEventGolden")

// TestEventGolden records the NDJSON (-o json --headless) of a run of each
// command against a real control plane, masks what differs from run to
// run (times, durations, UIDs, key ids, temp paths, ports) and compares it
// with the committed files in testdata/golden: the §8 event schema is a
// contract, and a change to how events are made or printed must not change
// a byte of it.
func TestEventGolden(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	const name, kctx = "golden", "kiln-b"
	cleanup(t, e, name, kctx)
	cfg := writeConfig(t, projectConfig)
	next := writeConfig(t, strings.Replace(projectConfig, "proj.example.test", "next.example.test", 1))
	masks := newMasker(e, cfg, next)
	run := func(file string, code int, args ...string) {
		t.Helper()
		r := e.kiln(append(args, "-o", "json", "--headless")...)
		if r.code != code {
			t.Fatalf("%s: want exit %d, got:\n%s", file, code, r)
		}
		got := fmt.Sprintf("# kiln %s\n# exit %d\n%s", strings.Join(masks.args(args), " "), r.code, masks.ndjson(r.stdout))
		path := filepath.Join("testdata", "golden", file+".ndjson")
		if *updateGolden {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update-golden to write it)", err)
		}
		if got != string(want) {
			// The first differing line goes last: CI logs keep the tail.
			t.Errorf("%s: NDJSON differs from %s:\n--- got\n%s--- want\n%s%s", file, path, got, want, firstDiff(got, string(want)))
		}
	}
	kube := func(op string, extra ...string) []string {
		return append([]string{op, "kube", name, "--context", kctx}, extra...)
	}
	project := func(op string, extra ...string) []string {
		return append([]string{"project", op, "kube", name}, append(extra, "--context", kctx)...)
	}
	run("01-create", 0, kube("create", "-c", cfg)...)
	run("02-create-again-refused", 3, kube("create")...)
	run("03-create-continue", 0, kube("create", "--continue")...)
	run("04-wait", 0, kube("wait")...)
	run("05-status", 0, kube("status")...)
	run("06-project-create", 0, project("create", "default/blog", "--stack", "web")...)
	run("07-project-list", 0, project("list")...)
	// The controllers and the scheduler record their Events
	// asynchronously: under load, a project can be running before all
	// three are written, and inspect would show fewer than the file.
	waitEvents(t, clientFor(kctx), "kiln-tenant-default", "ScalingReplicaSet", "SuccessfulCreate", "Scheduled")
	run("08-project-inspect", 0, project("inspect", "default/blog")...)
	run("09-project-suspend", 0, project("suspend", "default/blog")...)
	run("10-project-start", 0, project("start", "default/blog")...)
	run("11-project-delete", 0, project("delete", "default/blog")...)
	run("12-upgrade-dry-run", 0, kube("upgrade", "-c", next, "--dry-run")...)
	run("13-rotate-key", 0, kube("rotate-key", "--yes")...)
	run("14-list", 0, "list", "kube", "--context", kctx)
	run("15-destroy", 0, kube("destroy", "--yes")...)
	run("16-bad-input", 2, "create", "kube", "Bad_Name", "--context", kctx)
}

// firstDiff names the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("--- first difference, line %d\n got: %s\nwant: %s\n", i+1, gl, wl)
		}
	}
	return ""
}

// waitEvents waits (bounded at two minutes) until namespace ns has an
// Event with each of the reasons.
func waitEvents(t *testing.T, cs kubernetes.Interface, ns string, reasons ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var seen map[string]bool
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		seen = map[string]bool{}
		for _, ev := range list.Items {
			seen[ev.Reason] = true
		}
		for _, r := range reasons {
			if !seen[r] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("events %v in %s: saw only %v: %v", reasons, ns, seen, err)
	}
}

// masker replaces what differs between two runs of the same commands.
type masker struct {
	literal []string // replaced by their names
	names   []string
	res     []*regexp.Regexp
	repl    []string
}

func newMasker(e *env, cfg, next string) *masker {
	m := &masker{}
	m.literal = []string{cfg, next, e.state, e.data, kubeconfigPath}
	m.names = []string{"$CONFIG", "$NEXT", "$STATE", "$DATA", "$KUBECONFIG"}
	add := func(re, repl string) {
		m.res = append(m.res, regexp.MustCompile(re))
		m.repl = append(m.repl, repl)
	}
	add(`"time":"[^"]*"`, `"time":"$$TIME"`)
	add(`"(elapsed_ms|[a-z_]*_ms|age_s)":[0-9]+`, `"$1":0`)
	// Pod names before durations: a pod's random suffix may end like
	// one (a "g", digits, then m: CI once got "blog-$POD-g$DUR").
	add(`\b(blog|kiln-gateway)-[a-z0-9]{8,10}(-[a-z0-9]{5})?\b`, `$1-$$POD`)
	add(`[0-9]+(\.[0-9]+)?(ms|µs|ns|s|m|h)\b`, `$$DUR`)
	add(`(\$DUR)+`, `$$DUR`)
	add(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`, `$$UID`)
	add(`127\.0\.0\.1:[0-9]+`, `127.0.0.1:$$PORT`)
	add(`\b[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z\b`, `$$TIMESTAMP`)
	add(`\b[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8}( UTC)?`, `$$TIMESTAMP`)
	add(`\bk-[0-9a-f]{6,}\b`, `$$KEYID`)
	add(`\b[0-9a-f]{16,}\b`, `$$HEX`)
	add(`/tmp/[A-Za-z0-9._/-]+`, `$$TMP`)
	add(`\bpid [0-9]+`, `pid $$PID`)
	add(`\b(pidns|start)=[0-9]+`, `$1=$$N`)
	add(`\bport 3[0-9]{4}\b`, `port $$NODEPORT`)
	add(`:3[0-9]{4}\b`, `:$$NODEPORT`)
	add(`\bsha256 [0-9a-f]{12}\b`, `sha256 $$HASH`)
	add(`destroyed-[0-9]{8}T[0-9]{6}Z`, `destroyed-$$STAMP`)
	return m
}

func (m *masker) line(s string) string {
	for i, l := range m.literal {
		if l != "" {
			s = strings.ReplaceAll(s, l, m.names[i])
		}
	}
	for i, re := range m.res {
		s = re.ReplaceAllString(s, m.repl[i])
	}
	return s
}

func (m *masker) args(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = m.line(a)
	}
	return out
}

// ndjson masks each line. Resource events report what a watch saw, and
// which intermediate states it saw (InProgress, Terminating) depends on
// timing: a run of consecutive resource lines is reduced to the last line
// of each object, sorted, so the file shows each object's final line byte
// for byte and stays the same from run to run.
func (m *masker) ndjson(out string) string {
	var b strings.Builder
	var run []string
	last := map[string]int{}
	flush := func() {
		var keep []string
		for i, l := range run {
			if last[resourceKey(l)] == i {
				keep = append(keep, l)
			}
		}
		sort.Strings(keep)
		for _, l := range keep {
			b.WriteString(l + "\n")
		}
		run, last = nil, map[string]int{}
	}
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if l == "" {
			continue
		}
		l = m.line(l)
		if strings.Contains(l, `"type":"resource"`) {
			last[resourceKey(l)] = len(run)
			run = append(run, l)
			continue
		}
		flush()
		b.WriteString(l + "\n")
	}
	flush()
	return b.String()
}

// resourceKey is the object a resource line reports on.
func resourceKey(l string) string {
	var ev struct{ Kind, Namespace, Name string }
	_ = json.Unmarshal([]byte(l), &ev)
	return ev.Kind + " " + ev.Namespace + "/" + ev.Name
}

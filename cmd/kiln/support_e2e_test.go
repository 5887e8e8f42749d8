package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// inspect shows the Kubernetes Events of the project's objects and pods,
// newest first, and its pods' statuses; logs prints every pod's log
// prefixed with the pod, --tail bounds it, -f follows a pod that starts
// later and ends with exit 0 on Ctrl-C.
func TestProjectInspectEventsAndLogs(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "why", "kiln-b")
	expect(t, e.kiln("create", "kube", "why", "--context", "kiln-b"), 0)
	expect(t, e.kiln("project", "create", "kube", "why", "default/app", "--context", "kiln-b"), 0)

	r := e.kiln("project", "inspect", "kube", "why", "default/app", "--context", "kiln-b", "-o", "json")
	expect(t, r, 0)
	ev := projectEvent(t, r)
	pods, _ := ev["pods"].([]any)
	if len(pods) != 1 {
		t.Fatalf("inspect pods = %v, want one pod", ev["pods"])
	}
	pod := pods[0].(map[string]any)
	podName := pod["name"].(string)
	if pod["phase"] != "Running" || pod["restarts"] != float64(0) || pod["last_termination"] != "" {
		t.Errorf("pod status %v", pod)
	}
	events, _ := ev["events"].([]any)
	reasons := map[string]bool{}
	var prev time.Time
	for i, x := range events {
		m := x.(map[string]any)
		reasons[m["reason"].(string)] = true
		last, err := time.Parse(time.RFC3339Nano, m["last_seen"].(string))
		if err != nil {
			t.Fatalf("event %v: last_seen: %v", m, err)
		}
		if i > 0 && last.After(prev) {
			t.Errorf("events not newest first: %v after %v", last, prev)
		}
		prev = last
		if m["count"].(float64) < 1 || m["object"] == "" || m["type"] == "" {
			t.Errorf("event lacks count/object/type: %v", m)
		}
	}
	for _, want := range []string{"ScalingReplicaSet", "SuccessfulCreate", "Scheduled"} {
		if !reasons[want] {
			t.Errorf("inspect events lack reason %s; have %v", want, reasons)
		}
	}
	r = e.kiln("project", "inspect", "kube", "why", "default/app", "--context", "kiln-b")
	expect(t, r, 0)
	for _, want := range []string{"RESTARTS", "LAST TERMINATION", podName, "REASON", "Scheduled", "ScalingReplicaSet"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("inspect text lacks %q:\n%s", want, r.stdout)
		}
	}

	marker := fmt.Sprintf("log-marker-%d", time.Now().UnixNano())
	if err := clusterB.AppendPodLog(marker+" one", marker+" two"); err != nil {
		t.Fatal(err)
	}
	logs := []string{"project", "logs", "kube", "why", "default/app", "--context", "kiln-b"}
	r = e.kiln(logs...)
	expect(t, r, 0)
	if !strings.Contains(r.stdout, "["+podName+"] "+marker+" one\n["+podName+"] "+marker+" two\n") {
		t.Errorf("logs lack the pod-prefixed lines:\n%s", r)
	}
	r = e.kiln(append(logs, "--tail", "1")...)
	expect(t, r, 0)
	if r.stdout != "["+podName+"] "+marker+" two\n" {
		t.Errorf("--tail 1 printed %q", r.stdout)
	}
	r = e.kiln(append(logs, "-o", "json", "--tail", "1")...)
	expect(t, r, 0)
	if l := r.last(t, "pod_log"); l["type"] != "pod_log" || l["pod"] != podName || l["container"] == "" || l["line"] != marker+" two" {
		t.Errorf("json log line %v", l)
	}
	if res := r.last(t, "result"); res["ok"] != true {
		t.Errorf("result %v", res)
	}

	// Follow: a new line, then a pod that starts later.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := e.command(ctx, nil, append(logs, "-f", "--tail", "0")...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	until := func(what string, ok func(string) bool) {
		t.Helper()
		// Lines written before the follower's stream opened are not shown
		// (--tail 0), and kwok answers a follow only once a line comes:
		// append until one comes through.
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				if err := clusterB.AppendPodLog(marker + " follow"); err != nil {
					t.Fatal(err)
				}
			case l, open := <-lines:
				if !open {
					t.Fatalf("follower ended before %s; stderr:\n%s", what, stderr.String())
				}
				if ok(l) {
					return
				}
			case <-ctx.Done():
				t.Fatalf("follower never printed %s", what)
			}
		}
	}
	until("the followed line", func(l string) bool { return l == "["+podName+"] "+marker+" follow" })
	cs := clientFor("kiln-b")
	if err := cs.CoreV1().Pods("kiln-tenant-default").Delete(ctx, podName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	until("a line of the replacement pod", func(l string) bool {
		return strings.HasPrefix(l, "[app-") && !strings.HasPrefix(l, "["+podName+"]")
	})
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("follower after Ctrl-C: %v\n%s", err, stderr.String())
	}
}

// projectTokens reads every token value in the cluster's project Secrets.
func projectTokens(t *testing.T, cs kubernetes.Interface, ns string) []string {
	t.Helper()
	list, err := cs.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		for _, v := range s.Data {
			if len(v) >= 16 {
				out = append(out, string(v))
			}
		}
	}
	return out
}

// untar reads a .tar.gz into name -> content.
func untar(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name[strings.Index(h.Name, "/")+1:]] = string(data)
	}
}

// A support bundle of a cluster with projects and rotated tokens holds
// versions, config, key ids, objects, events, pods, logs and Leases, and
// never a token, a key or a Secret's data.
func TestSupportBundle(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "bndl", "kiln-b")
	expect(t, e.kiln("create", "kube", "bndl", "--context", "kiln-b"), 0)
	cs := clientFor("kiln-b")
	var tokens []string
	for _, p := range []string{"default/app", "default/web"} {
		expect(t, e.kiln("project", "create", "kube", "bndl", p, "--context", "kiln-b"), 0)
		tokens = append(tokens, projectTokens(t, cs, "kiln-tenant-default")...)
	}
	expect(t, e.kiln("project", "rotate-token", "kube", "bndl", "default/app", "--context", "kiln-b"), 0)
	tokens = append(tokens, projectTokens(t, cs, "kiln-tenant-default")...)
	if err := clusterB.AppendPodLog("bundle-log-line"); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	cmd := e.command(context.Background(), nil, "support", "bundle", "kube", "bndl", "--context", "kiln-b", "-o", "json")
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	r := e.finish(cmd, cmd.Run(), &stdout, &stderr)
	expect(t, r, 0)
	matches, _ := filepath.Glob(filepath.Join(dir, "kiln-support-bndl-*Z.tar.gz"))
	if len(matches) != 1 {
		t.Fatalf("bundle files in the current dir: %v\n%s", matches, r)
	}
	path := matches[0]
	if msg := r.last(t, "result")["message"].(string); !strings.Contains(msg, path) {
		t.Errorf("result %q does not name %s", msg, path)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("bundle mode: %v %v", info.Mode(), err)
	}
	files := untar(t, path)
	for _, want := range []string{
		"index.txt", "versions.json", "cluster.json", "key-ids.json", "discovery.ndjson", "kiln-config.yaml",
		"projects.json", "leases.json", "events/kiln-tenant-default.json", "pods/kiln-tenant-default.json",
		"objects/kiln-system/ConfigMap/kiln-config.json", "objects/kiln-system/Deployment/kiln-gateway.json",
		"objects/kiln-tenant-default/Secret/app-auth.json", "objects/kiln-tenant-default/Deployment/web.json",
		"objects/kiln-tenant-default/Lease/kiln-project-app.json",
		"objects/kiln-system/Ingress/default.web.json", // the route
	} {
		if _, ok := files[want]; !ok {
			t.Errorf("bundle lacks %s; has %v", want, keys(files))
		}
	}
	for name := range files {
		if name != "index.txt" && !strings.Contains(files["index.txt"], name) {
			t.Errorf("index.txt does not list %s", name)
		}
	}
	// discovery.ndjson is this run's discovery as -o json prints it: the
	// same lines as the run's own stdout (DESIGN.md §8 schema).
	if disc := strings.Split(strings.TrimSpace(files["discovery.ndjson"]), "\n"); len(disc) == 0 || !strings.Contains(r.stdout, disc[0]) ||
		!strings.Contains(files["discovery.ndjson"], `"type":"discovery","clusters":[{"provider":"kube","name":"bndl","location":"kiln-b"`) {
		t.Errorf("discovery.ndjson is not the run's discovery NDJSON:\n%s\nstdout:\n%s", files["discovery.ndjson"], r.stdout)
	}
	if !strings.Contains(files["versions.json"], `"api_server": "v`) {
		t.Errorf("versions.json: %s", files["versions.json"])
	}
	if !strings.Contains(files["objects/kiln-tenant-default/Secret/app-auth.json"], `"keys": [`) {
		t.Errorf("secret summary: %s", files["objects/kiln-tenant-default/Secret/app-auth.json"])
	}
	if !strings.Contains(files["leases.json"], "kiln-project-app") || !strings.Contains(files["events/kiln-tenant-default.json"], "ScalingReplicaSet") {
		t.Errorf("leases or events missing:\n%s", files["leases.json"])
	}
	var haveLog bool
	for name, data := range files {
		if strings.HasPrefix(name, "logs/kiln-tenant-default/app-") && strings.Contains(data, "bundle-log-line") {
			haveLog = true
		}
	}
	if !haveLog {
		t.Errorf("no log of project app's pod with the log line; files %v", keys(files))
	}

	// --project and --file: only that project of the tenant.
	one := filepath.Join(dir, "one.tar.gz")
	expect(t, e.kiln("support", "bundle", "kube", "bndl", "--context", "kiln-b", "--project", "default/web", "--file", one), 0)
	oneFiles := untar(t, one)
	for _, want := range []string{"objects/kiln-tenant-default/Deployment/web.json", "objects/kiln-system/Ingress/default.web.json"} {
		if _, ok := oneFiles[want]; !ok {
			t.Errorf("--project bundle lacks %s: %v", want, keys(oneFiles))
		}
	}
	if _, ok := oneFiles["objects/kiln-tenant-default/Deployment/app.json"]; ok {
		t.Errorf("--project default/web bundle holds project app")
	}

	// Never a token, a key or a Secret's data.
	e.collectSecrets()
	outputsMu.Lock()
	for _, tok := range tokens {
		secrets[tok] = true
	}
	if len(secrets) < 4 {
		t.Errorf("only %d secrets collected to scan for", len(secrets))
	}
	for _, fs := range []map[string]string{files, oneFiles} {
		var all strings.Builder
		for name, data := range fs {
			all.WriteString(name + "\n" + data + "\n")
		}
		outputs = append(outputs, all.String())
		for s := range secrets {
			if strings.Contains(all.String(), base64.StdEncoding.EncodeToString([]byte(s))) {
				t.Errorf("bundle holds a token or key, base64-encoded")
			}
		}
	}
	outputsMu.Unlock()
	if leaks := secretLeaks(); len(leaks) > 0 {
		t.Errorf("secret leaks: %v", leaks)
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

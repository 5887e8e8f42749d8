package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnctl/kiln/internal/testenv/awsemu"
)

// logEvents reads an NDJSON log file.
func logEvents(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log file line is not JSON: %q", line)
		}
		out = append(out, m)
	}
	return out
}

func debugLines(evs []map[string]any) []string {
	var out []string
	for _, ev := range evs {
		if ev["type"] == "log" && ev["level"] == "debug" {
			out = append(out, ev["message"].(string))
		}
	}
	return out
}

// -v adds debug events for each API request; --log-file gets every event,
// debug included, whatever -o says, appended, mode 0600; neither ever holds
// a token or a key.
func TestVerboseAndLogFile(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "verb", "kiln-b")
	logFile := filepath.Join(t.TempDir(), "kiln.ndjson")

	r := e.kiln("create", "kube", "verb", "--context", "kiln-b", "-vv", "--log-file", logFile)
	expect(t, r, 0)
	if !strings.Contains(r.stderr, "debug: k8s GET /api/v1/namespaces/kiln-system") || !strings.Contains(r.stderr, "-> 200 (") {
		t.Errorf("-vv text output lacks API request lines:\n%s", r.stderr)
	}
	info, err := os.Stat(logFile)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("log file mode: %v %v", info, err)
	}
	first := logEvents(t, logFile)
	if first[len(first)-1]["type"] != "result" || len(debugLines(first)) == 0 {
		t.Errorf("log file does not end with the result or lacks debug events")
	}
	withQuery := false
	for _, l := range debugLines(first) {
		if strings.Contains(l, "?") && strings.HasPrefix(l, "k8s ") {
			withQuery = true
		}
	}
	if !withQuery {
		t.Errorf("log file lacks query strings of Kubernetes requests")
	}

	// Without -v the frontend shows no debug event; the file still gets them.
	r = e.kiln("project", "create", "kube", "verb", "default/app", "--context", "kiln-b", "-o", "json", "--log-file", logFile)
	expect(t, r, 0)
	for _, ev := range r.events(t) {
		if ev["level"] == "debug" {
			t.Fatalf("debug event without -v: %v", ev)
		}
	}
	all := logEvents(t, logFile)
	if len(all) <= len(first) || len(debugLines(all[len(first):])) == 0 {
		t.Errorf("second run not appended with its debug events")
	}
	r = e.kiln("project", "inspect", "kube", "verb", "default/app", "--context", "kiln-b", "-v")
	expect(t, r, 0)
	if strings.Contains(r.stderr, "?labelSelector") {
		t.Errorf("-v (one) shows query strings:\n%s", r.stderr)
	}
	if !strings.Contains(r.stderr, "debug: k8s GET /api/v1/namespaces/kiln-tenant-default/events") {
		t.Errorf("-v lacks the events request:\n%s", r.stderr)
	}
	r = e.kiln("project", "rotate-token", "kube", "verb", "default/app", "--context", "kiln-b", "-vv", "--log-file", logFile)
	expect(t, r, 0)

	data, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	e.collectSecrets()
	outputsMu.Lock()
	for _, tok := range projectTokens(t, clientFor("kiln-b"), "kiln-tenant-default") {
		secrets[tok] = true
	}
	outputs = append(outputs, string(data))
	outputsMu.Unlock()
	if leaks := secretLeaks(); len(leaks) > 0 {
		t.Errorf("secret leaks: %v", leaks)
	}
}

// AWS SDK requests are traced too, without headers, query strings or keys.
func TestVerboseAWSRequests(t *testing.T) {
	e, _ := awsEnv(t)
	logFile := filepath.Join(t.TempDir(), "aws.ndjson")
	r := e.aws("list", "aws", "-v", "--log-file", logFile)
	expect(t, r, 0)
	if !strings.Contains(r.stderr, "debug: aws GET ") || !strings.Contains(r.stderr, "-> 200 (") {
		t.Errorf("-v lacks AWS request lines:\n%s", r.stderr)
	}
	data, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{awsemu.SecretAccessKey, "Signature", "Authorization", "X-Amz-"} {
		if strings.Contains(string(data), bad) || strings.Contains(r.stderr, bad) {
			t.Errorf("AWS trace holds %q", bad)
		}
	}
}

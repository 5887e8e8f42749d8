package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// troubled is a kubeconfig like an engineer's: the real kiln-a, cluster B
// reached only through an exec credential plugin (kiln-b-exec), the dead
// kiln-dead, and contexts whose plugin sleeps (kiln-slow), hangs in a loop
// of children (kiln-hang), needs a login (kiln-login) or fails
// (kiln-fail), and one whose server accepts TCP and never answers
// (kiln-mute). Every plugin appends its context to ran; the slow ones
// write their pids to pids.
type troubled struct {
	kubeconfig, ran, pids string
	// env is where kiln-b-exec's plugin writes the environment it got.
	env string
}

func newTroubled(t *testing.T) *troubled {
	t.Helper()
	dir := t.TempDir()
	tr := &troubled{kubeconfig: filepath.Join(dir, "kubeconfig"), ran: filepath.Join(dir, "ran"), pids: filepath.Join(dir, "pids"), env: filepath.Join(dir, "env")}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c) // accepted, never answered
		}
	}()
	a, err := clientcmd.Load(clusterA.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	b, err := clientcmd.Load(clusterB.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	for k, v := range a.Clusters {
		cfg.Clusters[k] = v
	}
	for k, v := range a.AuthInfos {
		cfg.AuthInfos[k] = v
	}
	for k, v := range a.Contexts {
		cfg.Contexts[k] = v
	}
	plugin := func(name, body string) *clientcmdapi.AuthInfo {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("#!/bin/sh\necho "+name+" >>"+tr.ran+"\n"+body+"\n"), 0o700); err != nil {
			t.Fatal(err)
		}
		return &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
			APIVersion: "client.authentication.k8s.io/v1", Command: path, InteractiveMode: clientcmdapi.IfAvailableExecInteractiveMode,
		}}
	}
	add := func(name string, cluster *clientcmdapi.Cluster, user *clientcmdapi.AuthInfo) {
		cfg.Clusters[name], cfg.AuthInfos[name] = cluster, user
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	bCluster := b.Clusters[b.Contexts["kiln-b"].Cluster]
	bToken := b.AuthInfos[b.Contexts["kiln-b"].AuthInfo].Token
	add("kiln-b-exec", bCluster, plugin("exec", "env >"+tr.env+"\n"+fmt.Sprintf(`printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}'`, bToken)))
	nowhere := &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	add("kiln-dead", nowhere, &clientcmdapi.AuthInfo{Token: "unused"})
	add("kiln-slow", nowhere, plugin("slow", "sleep 600 & echo $$ $! >>"+tr.pids+"; wait"))
	add("kiln-hang", nowhere, plugin("hang", "echo $$ >>"+tr.pids+"; while :; do sleep 1; done"))
	add("kiln-login", nowhere, plugin("login", `echo "Error when retrieving token from sso: Token has expired and refresh failed" >&2; exit 255`))
	add("kiln-fail", nowhere, plugin("fail", `echo "error: profile dev not found" >&2; exit 2`))
	add("kiln-mute", &clientcmdapi.Cluster{Server: "https://" + ln.Addr().String(), InsecureSkipTLSVerify: true}, &clientcmdapi.AuthInfo{Token: "unused"})
	cfg.CurrentContext = "kiln-a"
	if err := clientcmd.WriteToFile(*cfg, tr.kubeconfig); err != nil {
		t.Fatal(err)
	}
	return tr
}

// runs is how many times each plugin ran so far.
func (tr *troubled) runs(t *testing.T) map[string]int {
	t.Helper()
	data, err := os.ReadFile(tr.ran)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, l := range strings.Fields(string(data)) {
		out[l]++
	}
	return out
}

// noPluginLeft fails if any slow plugin process (or its child) survived.
func (tr *troubled) noPluginLeft(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(tr.pids)
	if err != nil {
		t.Fatalf("the slow plugins never ran: %v", err)
	}
	for _, f := range strings.Fields(string(data)) {
		pid, _ := strconv.Atoi(f)
		stat, err := os.ReadFile("/proc/" + f + "/stat")
		if err == nil && len(strings.Fields(string(stat))) > 2 && strings.Fields(string(stat))[2] != "Z" {
			t.Errorf("credential plugin process %d is still running after kiln exited", pid)
		}
	}
}

// discovered returns the discovery event's clusters by location.
func discovered(t *testing.T, r result) (map[string]map[string]any, map[string]any) {
	t.Helper()
	disc := r.last(t, "discovery")
	out := map[string]map[string]any{}
	cl, _ := disc["clusters"].([]any)
	for _, c := range cl {
		m := c.(map[string]any)
		out[fmt.Sprint(m["location"])] = m
	}
	return out, disc
}

func TestDiscoveryIsBoundedNonInteractiveAndRemembered(t *testing.T) {
	skipShort(t)
	tr := newTroubled(t)
	e := newEnv(t)
	e.kubeconfig = tr.kubeconfig
	cleanup(t, e, "disc1", "kiln-a")

	// create searches every context, each within 3s: the troubled ones
	// are reported with a plain cause, and their plugins are killed.
	r := e.kiln("create", "kube", "disc1", "--context", "kiln-a", "--discovery-timeout", "3s", "-o", "json")
	expect(t, r, 0)
	locs, disc := discovered(t, r)
	want := map[string]string{
		"kiln-slow":  "credential plugin `slow` did not answer within 3s",
		"kiln-hang":  "credential plugin `hang` did not answer within 3s",
		"kiln-login": "needs login (run kubectl against it once)",
		"kiln-fail":  "credential plugin `fail` failed (exit 2): error: profile dev not found",
		"kiln-mute":  "TLS handshake did not complete within 3s",
		"kiln-dead":  "connection refused",
	}
	for ctx, cause := range want {
		l := locs[ctx]
		if l == nil || l["infra"] != "unreachable" || !strings.Contains(fmt.Sprint(l["error"]), cause) {
			t.Errorf("context %s: %v, want unreachable with %q", ctx, l, cause)
		}
		if _, ok := l["elapsed_ms"]; !ok {
			t.Errorf("context %s: no elapsed_ms: %v", ctx, l)
		}
	}
	// Cluster B, reached through its exec plugin run by kiln, is searched.
	if l := locs["kiln-b-exec"]; l == nil || l["infra"] != "present" || l["error"] != nil {
		t.Errorf("kiln-b-exec (exec plugin): %v, want reachable", l)
	}
	if disc["source"] != "discovery" || disc["elapsed_ms"] == nil {
		t.Errorf("discovery event: %v", disc)
	}
	var slowReport bool
	for _, ev := range r.events(t) {
		msg := fmt.Sprint(ev["message"])
		if ev["type"] == "log" && strings.Contains(msg, "slow: ") && strings.Contains(msg, "kiln-slow") && strings.Contains(msg, "--contexts") {
			slowReport = true
		}
	}
	if !slowReport {
		t.Errorf("no log names the slow contexts and how to leave them out:\n%s", r.stdout)
	}
	tr.noPluginLeft(t)
	before := tr.runs(t)
	if before["slow"] != 1 || before["exec"] < 1 {
		t.Errorf("plugin runs after create: %v", before)
	}

	// Commands about the cluster go to its remembered context: no other
	// context's plugin runs at all.
	for _, args := range [][]string{
		{"status", "kube", "disc1"},
		{"wait", "kube", "disc1"},
		{"project", "list", "kube", "disc1"},
	} {
		r := e.kiln(append(args, "-o", "json", "--discovery-timeout", "3s")...)
		expect(t, r, 0)
		locs, disc := discovered(t, r)
		if disc["source"] != "remembered" || len(locs) != 1 || locs["kiln-a"] == nil {
			t.Errorf("%v: discovery %v, want only the remembered kiln-a", args, disc)
		}
	}
	if after := tr.runs(t); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("commands about a remembered cluster ran other contexts' plugins: before %v, after %v", before, after)
	}

	// --contexts / KILN_CONTEXTS narrow a full discovery (here: a user with
	// no keyring entry and no token dir); the rest is reported skipped.
	other := newEnv(t)
	other.kubeconfig = tr.kubeconfig
	r = other.kilnWith([]string{"KILN_CONTEXTS=kiln-a,kiln-dead"}, "status", "kube", "disc1", "-o", "json")
	expect(t, r, 0)
	locs, disc = discovered(t, r)
	skipped := fmt.Sprint(disc["skipped"])
	if disc["source"] != "discovery" || len(locs) != 2 || !strings.Contains(skipped, "kiln-slow") || !strings.Contains(skipped, "kiln-b-exec") {
		t.Errorf("scoped discovery: %v", disc)
	}
	if after := tr.runs(t); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("contexts left out of discovery ran their plugins: before %v, after %v", before, after)
	}
	// create with --contexts says the NAME is unique only across them.
	r = e.kiln("create", "kube", "disc1", "--context", "kiln-a", "--contexts", "kiln-a", "--continue", "-o", "json")
	expect(t, r, 0)
	if d := r.last(t, "decision"); !strings.Contains(fmt.Sprint(d["reason"]), "unique only across the contexts searched") {
		t.Errorf("decision does not say uniqueness was checked only across the searched contexts: %v", d)
	}

	// Without a remembered location, status falls back to full discovery,
	// still bounded, and finds the cluster.
	r = other.kiln("status", "kube", "disc1", "--discovery-timeout", "3s", "-o", "json")
	expect(t, r, 0)
	if _, disc := discovered(t, r); disc["source"] != "discovery" {
		t.Errorf("fallback discovery: %v", disc)
	}
	if after := tr.runs(t); after["slow"] != before["slow"]+1 {
		t.Errorf("full discovery should run each plugin once more: before %v, after %v", before, after)
	}
	tr.noPluginLeft(t)

	// destroy, too, goes to the remembered context only.
	before = tr.runs(t)
	r = e.kiln("destroy", "kube", "disc1", "--yes", "-o", "json")
	expect(t, r, 0)
	if _, disc := discovered(t, r); disc["source"] != "remembered" {
		t.Errorf("destroy: discovery %v, want the remembered context", disc)
	}
	if after := tr.runs(t); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("destroy of a remembered cluster ran other contexts' plugins: before %v, after %v", before, after)
	}

	// Bad scope is bad input naming the flag.
	for _, args := range [][]string{
		{"status", "kube", "disc1", "--contexts", "nosuch"},
		{"status", "kube", "disc1", "--discovery-timeout", "0s"},
	} {
		r := other.kiln(args...)
		expect(t, r, 2)
		if !strings.Contains(r.stderr, args[len(args)-2]) {
			t.Errorf("%v: message does not name %s:\n%s", args, args[len(args)-2], r.stderr)
		}
	}
}

// A credential plugin that discovery runs gets the environment kubectl
// would give it, minus kiln's own secrets: the keyring passphrase is taken
// out of kiln's environment before any plugin runs (the plugin here dumps
// what it received).
func TestCredentialPluginsDoNotReceiveKilnSecrets(t *testing.T) {
	skipShort(t)
	tr := newTroubled(t)
	e := newEnv(t)
	e.kubeconfig = tr.kubeconfig
	r := e.kiln("list", "kube", "--contexts", "kiln-a,kiln-b-exec", "-o", "json")
	expect(t, r, 0)
	data, err := os.ReadFile(tr.env)
	if err != nil {
		t.Fatalf("the plugin did not run (%v):\n%s", err, r)
	}
	env := string(data)
	if strings.Contains(env, "KILN_KEYRING_PASSPHRASE") || strings.Contains(env, "e2e-passphrase") {
		t.Errorf("the credential plugin received kiln's keyring passphrase:\n%s", env)
	}
	// Everything else kubectl would pass is still there.
	for _, want := range []string{"XDG_STATE_HOME=" + e.state, "PATH="} {
		if !strings.Contains(env, want) {
			t.Errorf("the plugin's environment lacks %s:\n%s", want, env)
		}
	}
}

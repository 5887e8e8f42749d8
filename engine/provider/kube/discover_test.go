package kube

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kilnctl/kiln/engine/failure"
)

// silent accepts TCP connections and never writes a byte: a server behind
// a broken proxy, or a firewall that accepts and drops.
func silent(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // held open, never answered
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// script writes an executable shell script named name.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(data))
	return len(f) > 2 && f[2] != "Z"
}

func execUser(cmd string, mode clientcmdapi.ExecInteractiveMode) *clientcmdapi.AuthInfo {
	return &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1", Command: cmd, InteractiveMode: mode,
	}}
}

func TestDiscoveryBoundsEveryContextWithAPlainCause(t *testing.T) {
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	ran := filepath.Join(dir, "ran")
	mute := silent(t)
	cfg := clientcmdapi.NewConfig()
	add := func(name, server string, user *clientcmdapi.AuthInfo) {
		cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
		cfg.AuthInfos[name] = user
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	never := clientcmdapi.NeverExecInteractiveMode
	// Each plugin records that it ran; the slow ones record their pids
	// (the script's and its child's) to prove they were killed.
	add("slow", "https://"+mute, execUser(script(t, dir, "slow", `echo slow >>`+ran+`; sleep 600 & echo $$ $! >>`+pids+`; wait`), never))
	add("login", "https://"+mute, execUser(script(t, dir, "login", `echo login >>`+ran+`; echo "error: the SSO session has expired; run aws sso login" >&2; exit 255`), never))
	add("fail", "https://"+mute, execUser(script(t, dir, "fail", `echo fail >>`+ran+`; echo "boom: no such profile" >&2; exit 3`), never))
	add("always", "https://"+mute, execUser(script(t, dir, "always", `echo always >>`+ran), clientcmdapi.AlwaysExecInteractiveMode))
	add("stdin", "https://"+mute, execUser(script(t, dir, "prompt", `echo stdin >>`+ran+`; read answer; echo "$KUBERNETES_EXEC_INFO" >`+filepath.Join(dir, "info")+`; echo "no terminal to ask on" >&2; exit 1`), never))
	add("tls", "https://"+mute, &clientcmdapi.AuthInfo{Token: "x"})
	add("plain", "http://"+mute, &clientcmdapi.AuthInfo{Token: "x"})
	add("refused", "https://127.0.0.1:1", &clientcmdapi.AuthInfo{Token: "x"})
	kc := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}

	p := &Provider{Kubeconfig: kc, Timeout: 3 * time.Second}
	locs, err := p.Discover(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"slow":    "credential plugin `slow` did not answer within 3s",
		"login":   "needs login (run kubectl against it once)",
		"fail":    "credential plugin `fail` failed (exit 3): boom: no such profile",
		"always":  "needs login (credential plugin `always` always asks for a terminal",
		"stdin":   "needs login",
		"tls":     "TLS handshake did not complete within 3s",
		"plain":   "the server accepted the connection but did not answer within 3s",
		"refused": "connection refused by https://127.0.0.1:1",
	}
	for _, l := range locs {
		if l.Err == nil || !strings.Contains(l.Err.Error(), want[l.Name]) {
			t.Errorf("context %s: error %v, want it to say %q", l.Name, l.Err, want[l.Name])
		}
		if l.Infra != "unreachable" || l.Skipped {
			t.Errorf("context %s: %+v", l.Name, l)
		}
	}
	// Never interactive: the "Always" plugin was not run at all; the one
	// that read stdin got end of file at once and was told so.
	data, _ := os.ReadFile(ran)
	if strings.Contains(string(data), "always") {
		t.Error("a plugin with interactiveMode Always was run during discovery")
	}
	info, err := os.ReadFile(filepath.Join(dir, "info"))
	if err != nil || !strings.Contains(string(info), `"interactive":false`) || !strings.Contains(string(info), `"apiVersion":"client.authentication.k8s.io/v1"`) {
		t.Errorf("KUBERNETES_EXEC_INFO = %s (%v), want interactive false and the kubeconfig's apiVersion", info, err)
	}
	// The slow plugin and its child were killed, not left behind.
	data, err = os.ReadFile(pids)
	if err != nil {
		t.Fatal(err)
	}
	// The group was sent SIGKILL; the script was waited for, its child
	// (in the same group) dies when the kernel gets to it, which on a
	// loaded machine can be after Discover returned: wait for that, up
	// to a bound far beyond any scheduling delay.
	for _, f := range strings.Fields(string(data)) {
		pid, _ := strconv.Atoi(f)
		deadline := time.Now().Add(30 * time.Second)
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("plugin process %d is still running 30s after discovery", pid)
		}
	}
}

func TestDiscoveryScope(t *testing.T) {
	cfg := clientcmdapi.NewConfig()
	for _, n := range []string{"a", "b", "c"} {
		cfg.Clusters[n] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
		cfg.AuthInfos[n] = &clientcmdapi.AuthInfo{Token: "x"}
		cfg.Contexts[n] = &clientcmdapi.Context{Cluster: n, AuthInfo: n}
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}
	// --contexts a plus the named context c are searched; b is skipped.
	p := &Provider{Kubeconfig: kc, Context: "c", Only: []string{"a"}, Timeout: time.Second}
	locs, err := p.Discover(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, l := range locs {
		got[l.Name] = l.Skipped
		if l.Skipped && l.Err != nil {
			t.Errorf("skipped context %s was inspected: %v", l.Name, l.Err)
		}
	}
	if len(got) != 3 || got["a"] || !got["b"] || got["c"] {
		t.Errorf("skipped = %v, want only b", got)
	}
	p = &Provider{Kubeconfig: kc, Only: []string{"a", "nosuch"}}
	_, err = p.Discover(context.Background(), "x")
	if failure.Of(err) != failure.Input || !strings.Contains(err.Error(), "--contexts") || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("unknown context in --contexts: %v (kind %v), want input naming --contexts and the context", err, failure.Of(err))
	}
}

// Only the context the user named, with Interactive set (a person at the
// terminal), is handed to client-go's own exec path when its plugin needs a
// login; every other context stays with kiln's non-interactive run.
func TestOnlyTheNamedContextMayAskForALogin(t *testing.T) {
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	cfg := clientcmdapi.NewConfig()
	for _, n := range []string{"named", "other"} {
		cfg.Clusters[n] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
		cfg.AuthInfos[n] = execUser(script(t, dir, "sso-"+n, `echo `+n+` >>`+ran+`; exit 1`), clientcmdapi.AlwaysExecInteractiveMode)
		cfg.Contexts[n] = &clientcmdapi.Context{Cluster: n, AuthInfo: n}
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}
	p := &Provider{Kubeconfig: kc, Context: "named", Interactive: true, Timeout: 3 * time.Second}
	other := p.InspectLocation(context.Background(), "x", "other")
	if other.Err == nil || !strings.Contains(other.Err.Error(), "needs login") {
		t.Errorf("other context: %v, want needs login without prompting", other.Err)
	}
	t.Logf("other: %v", other.Err)
	// The named one went on to client-go's interactive path: without a
	// terminal here, client-go refuses an Always plugin itself.
	named := p.InspectLocation(context.Background(), "x", "named")
	t.Logf("named: %v", named.Err)
	if named.Err == nil || !strings.Contains(named.Err.Error(), "exec plugin cannot support interactive mode") {
		t.Errorf("named context: %v, want client-go's interactive path to have been taken", named.Err)
	}
	if data, _ := os.ReadFile(ran); strings.Contains(string(data), "other") {
		t.Error("the plugin of a context the user did not name was run although it always asks for a terminal")
	}
}

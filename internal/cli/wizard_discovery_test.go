package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kilnctl/kiln/tui"
	"github.com/kilnctl/kiln/tui/tuitest"
)

// The wizard's home screen discovers through the same bounded,
// non-interactive path as the commands: a context whose plugin hangs, and
// one whose plugin always wants a terminal, come back as plain causes
// within the bound, and the second plugin never runs.
func TestWizardDiscoveryIsBoundedAndNeverInteractive(t *testing.T) {
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	plugin := func(name, body string, mode clientcmdapi.ExecInteractiveMode) *clientcmdapi.AuthInfo {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("#!/bin/sh\necho "+name+" >>"+ran+"\n"+body+"\n"), 0o700); err != nil {
			t.Fatal(err)
		}
		return &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1beta1", Command: path, InteractiveMode: mode}}
	}
	cfg := clientcmdapi.NewConfig()
	nowhere := &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	for name, user := range map[string]*clientcmdapi.AuthInfo{
		"hang":  plugin("hang", "sleep 600", clientcmdapi.IfAvailableExecInteractiveMode),
		"sso":   plugin("sso", "read code", clientcmdapi.AlwaysExecInteractiveMode),
		"other": {Token: "x"},
	} {
		cfg.Clusters[name], cfg.AuthInfos[name] = nowhere, user
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}
	b := &wizardBackend{g: &globals{kubeconfig: kc, discoveryTO: time.Second}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rows, err := b.Clusters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[r.Location] = r.Err
	}
	for loc, want := range map[string]string{
		"hang":  "credential plugin `hang` did not answer within 1s",
		"sso":   "needs login",
		"other": "connection refused",
	} {
		if !strings.Contains(got[loc], want) {
			t.Errorf("home row %s: %q, want %q", loc, got[loc], want)
		}
	}
	if data, _ := os.ReadFile(ran); strings.Contains(string(data), "sso") {
		t.Error("the wizard ran a plugin that always asks for a terminal")
	}

	// The home screen lists them; the first (hang, selected) shows its cause.
	h := tuitest.Start(t, &tuitest.Backend{Contexts: []string{"hang", "other", "sso"}, Current: "other", List: rows}, tui.Options{})
	h.WaitFor(t, "did not answer within 1s")
}

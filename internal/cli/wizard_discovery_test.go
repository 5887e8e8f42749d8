package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kilnctl/kiln/engine"
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
	b := &wizardOps{g: &globals{kubeconfig: kc, discoveryTO: time.Second}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rows, err := b.Clusters(ctx, nil)
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

// failingProvider cannot search at all (no AWS credentials, say).
type failingProvider struct{ memProvider }

func (p *failingProvider) Name() string { return "aws" }
func (p *failingProvider) Discover(context.Context, string) ([]engine.Location, error) {
	return nil, errors.New("credentials: no AWS credentials found")
}

// The home screen searches every provider the machine is set up for, in
// parallel: kube's clusters are listed, and an AWS that cannot be searched
// is one row saying why, not a failed home screen. Without AWS set up, AWS
// is never asked.
func TestWizardHomeSearchesEveryConfiguredProvider(t *testing.T) {
	asked := map[string]int{}
	var mu sync.Mutex
	newOps := func(g *globals) *wizardOps {
		return &wizardOps{g: g, newProvider: func(name, location string) (engine.Provider, error) {
			mu.Lock()
			asked[name]++
			mu.Unlock()
			if name == "aws" {
				return &failingProvider{}, nil
			}
			return &memProvider{}, nil
		}}
	}
	ctx := context.Background()
	t.Setenv("HOME", t.TempDir())
	for _, v := range []string{"AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"} {
		t.Setenv(v, "")
	}
	rows, err := newOps(&globals{}).Clusters(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if asked["aws"] != 0 {
		t.Fatalf("AWS searched on a machine without AWS set up")
	}
	if len(rows) != 2 || rows[0].Name != "other" {
		t.Fatalf("kube rows: %+v", rows)
	}

	g := &globals{region: "eu-west-1"}
	rows, err = newOps(g).Clusters(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	last := rows[len(rows)-1]
	if asked["aws"] != 1 || last.Provider != "aws" || last.Platform != "?" || !strings.Contains(last.Err, "no AWS credentials") {
		t.Fatalf("want kube's rows then one aws row with its error, got %+v", rows)
	}
	if rows[0].Name != "other" {
		t.Fatalf("kube rows lost: %+v", rows)
	}

	// A shared config file is enough to count as set up.
	cfg := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(cfg, []byte("[default]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"AWS_CONFIG_FILE": cfg}
	if !awsConfigured(&globals{}, func(k string) string { return env[k] }) {
		t.Fatal("AWS_CONFIG_FILE naming an existing file: not counted as set up")
	}
	env["AWS_CONFIG_FILE"] = filepath.Join(t.TempDir(), "missing")
	if awsConfigured(&globals{}, func(k string) string { return env[k] }) {
		t.Fatal("a missing config file counted as AWS set up")
	}
}

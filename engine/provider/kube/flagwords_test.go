package kube

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnctl/kiln/engine/input"
)

// TestStdinUnavailableMessageInFrontendWords: the message client-go gives
// when a context's credential plugin wants the terminal names the context
// input as the frontend words it: --context in the CLI, no flag for a
// frontend with its own Namer (issue #29 item 2).
func TestStdinUnavailableMessageInFrontendWords(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "config")
	const cfg = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/false, interactiveMode: IfAvailable}
contexts:
- name: other
  context: {cluster: c, user: u}
current-context: other
`
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	msg := func(p *Provider) string {
		rc, _, err := p.restConfig("other", false)
		if err != nil {
			t.Fatal(err)
		}
		if rc.ExecProvider == nil || !rc.ExecProvider.StdinUnavailable {
			t.Fatalf("the other context's plugin has the terminal: %+v", rc.ExecProvider)
		}
		return rc.ExecProvider.StdinUnavailableMessage
	}
	if got, want := msg(New(kc, "mine")), "kiln gives a credential plugin the terminal only for the context named with --context"; got != want {
		t.Errorf("CLI message %q, want %q", got, want)
	}
	p := New(kc, "mine")
	p.TakeNamer(func(in input.Input) string { return "the " + string(in) + " field" })
	if got := msg(p); strings.Contains(got, "--") || !strings.HasSuffix(got, "the context field") {
		t.Errorf("wizard message %q: a flag, or not the frontend's word", got)
	}
}

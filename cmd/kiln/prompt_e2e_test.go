package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnctl/kiln/creds"
)

// TestTerminalPromptAsksOnce: `kiln create kube NAME` at a terminal, on a
// cluster whose platform is installed, asks y/N once; after "y" it takes
// the cluster lock, re-reads the platform, finds nothing changed and
// continues without asking again (it used to ask a second time while
// holding the lock).
func TestTerminalPromptAsksOnce(t *testing.T) {
	skipShort(t)
	needTmux(t)
	const name = "prompt1"
	e := newEnv(t)
	cleanup(t, e, name, "kiln-a")
	expect(t, e.kiln("create", "kube", name, "--context", "kiln-a"), 0)
	before, err := creds.Load(e.tokenDir(name))
	if err != nil {
		t.Fatal(err)
	}

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	x := &tmux{t: t, socket: filepath.Join(t.TempDir(), "tmux.sock"), session: "kiln"}
	t.Cleanup(func() { _, _ = x.run("kill-server") })
	// The shell keeps the pane open after kiln exits, showing its exit code.
	kiln := fmt.Sprintf("env KILN_E2E_AS_KILN=1 TERM=xterm-256color XDG_STATE_HOME=%q XDG_DATA_HOME=%q KILN_KEYRING_PASSPHRASE=e2e-passphrase %q create kube %s --context kiln-a --kubeconfig %q --keyring-backend file",
		e.state, e.data, exe, name, kubeconfigPath)
	x.must("new-session", "-d", "-s", x.session, "-x", "200", "-y", "50", "sh", "-c", kiln+`; echo "kiln exited with $?"; sleep 600`)

	const prompt = "Continue with existing credentials? [y/N]"
	x.waitFor(time.Minute, prompt)
	x.text("y")
	x.keys("Enter")

	// Wait until kiln exits or asks a second time (then it waits for input
	// and would never exit).
	var screen string
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, _ := x.run("capture-pane", "-p", "-J", "-S", "-5000", "-t", x.session)
		screen = out
		if strings.Contains(screen, "kiln exited with") || strings.Count(screen, prompt) > 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kiln neither exited nor asked again; screen:\n%s", screen)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := strings.Count(screen, prompt); n != 1 {
		t.Errorf("asked %d times, want once:\n%s", n, screen)
		// Answer no, so kiln releases the lock before the cleanup (its
		// exit-3 screen ends the wait).
		x.text("n")
		x.keys("Enter")
		x.waitFor(time.Minute, "kiln exited with")
		t.FailNow()
	}
	if !strings.Contains(screen, "kiln exited with 0") {
		t.Fatalf("kiln did not exit 0 after the answer:\n%s", screen)
	}
	after, err := creds.Load(e.tokenDir(name))
	if err != nil {
		t.Fatal(err)
	}
	if after.Manifest.KeyID != before.Manifest.KeyID {
		t.Errorf("continue changed the key: %s -> %s", before.Manifest.KeyID, after.Manifest.KeyID)
	}
}

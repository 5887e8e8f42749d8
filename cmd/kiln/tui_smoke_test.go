package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilnctl/kiln/engine/platform"
)

// tmux drives one detached tmux server on a private socket in the test's
// temp dir, so nothing collides with the user's tmux or another run.
type tmux struct {
	t       *testing.T
	socket  string
	session string
}

func (x *tmux) run(args ...string) (string, error) {
	out, err := exec.Command("tmux", append([]string{"-S", x.socket, "-f", "/dev/null"}, args...)...).CombinedOutput()
	return string(out), err
}

func (x *tmux) must(args ...string) {
	x.t.Helper()
	if out, err := x.run(args...); err != nil {
		x.t.Fatalf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// keys sends tmux key names (Enter, Tab, Right, q).
func (x *tmux) keys(keys ...string) {
	x.must(append([]string{"send-keys", "-t", x.session}, keys...)...)
}

// text types s literally.
func (x *tmux) text(s string) { x.must("send-keys", "-t", x.session, "-l", s) }

func (x *tmux) screen() string {
	out, _ := x.run("capture-pane", "-p", "-t", x.session)
	return out
}

// waitFor polls the pane until it shows every one of want; the screen is
// the only thing a terminal user sees, so polling it is the test. A screen
// showing a failed result ends the wait early.
func (x *tmux) waitFor(d time.Duration, want ...string) string {
	x.t.Helper()
	deadline := time.Now().Add(d)
	for {
		s := x.screen()
		all := true
		for _, w := range want {
			all = all && strings.Contains(s, w)
		}
		if all {
			return s
		}
		if strings.Contains(s, "(exit ") {
			x.t.Fatalf("the wizard shows a failure while waiting for %q:\n%s", want, s)
		}
		if time.Now().After(deadline) {
			x.t.Fatalf("the pane never showed %q within %s; last screen:\n%s", want, d, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestWizardSmokeInTmux runs the kiln binary's wizard in a real terminal
// (a detached tmux session), creates a cluster on kiln-b through the
// create form, waits for the final screen's ✓, opens the inspect screen of
// the new cluster, quits with q, and checks the platform really exists.
func TestWizardSmokeInTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed: the terminal smoke test needs it (apt-get install tmux)")
	}
	if clusterB == nil {
		t.Skip("no control plane (-short)")
	}
	const name = "smoke1"
	e := newEnv(t)
	cleanup(t, e, name, "kiln-b")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	x := &tmux{t: t, socket: filepath.Join(t.TempDir(), "tmux.sock"), session: "kiln"}
	t.Cleanup(func() { _, _ = x.run("kill-server") })
	// The test binary is kiln with KILN_E2E_AS_KILN=1 (see harness_test.go).
	cmd := fmt.Sprintf("env KILN_E2E_AS_KILN=1 TERM=xterm-256color KUBECONFIG=%q XDG_STATE_HOME=%q XDG_DATA_HOME=%q KILN_KEYRING_PASSPHRASE=smoke %q --kubeconfig %q --keyring-backend file",
		kubeconfigPath, e.state, e.data, exe, kubeconfigPath)
	x.must("new-session", "-d", "-s", x.session, "-x", "100", "-y", "30", cmd)

	// Home: discovery over kiln-a, kiln-b and the unreachable kiln-dead.
	x.waitFor(30*time.Second, "Kiln clusters", "[n] new cluster", "kiln-dead")
	x.keys("n")
	x.waitFor(10*time.Second, "New kiln cluster")
	x.text(name)
	x.waitFor(10*time.Second, "✓ valid name")
	x.keys("Tab") // the context, kiln-a (the kubeconfig's current)
	x.waitFor(10*time.Second, "‹ kiln-a ›")
	x.keys("Right")
	x.waitFor(10*time.Second, "‹ kiln-b ›")
	x.keys("Enter", "Enter") // past the config file to the button
	x.keys("Enter")
	final := x.waitFor(3*time.Minute, "✓ cluster "+name+" is ready", "Next")
	for _, want := range []string{"Token dir     " + e.tokenDir(name), "Kube context  kiln-b", "kiln status kube " + name} {
		if !strings.Contains(final, want) {
			t.Errorf("final screen lacks %q:\n%s", want, final)
		}
	}

	// Back home, the new cluster is listed with a trusted token dir; the
	// inspect screen reads it live.
	x.keys("q")
	x.waitFor(30*time.Second, name, "trusted")
	x.keys("i")
	x.waitFor(30*time.Second, "Cluster "+name, "✓ platform ready", "Projects (0)")
	x.keys("Escape")
	x.waitFor(30*time.Second, "Kiln clusters")
	x.keys("q")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := x.run("has-session", "-t", x.session); err != nil {
			break // kiln exited, and its session with it
		}
		if time.Now().After(deadline) {
			t.Fatalf("kiln did not exit on q; screen:\n%s", x.screen())
		}
		time.Sleep(100 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cm, err := clusterB.Client.CoreV1().ConfigMaps("kiln-system").Get(ctx, "kiln-config", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("kiln-system/kiln-config after the wizard's create: %v", err)
	}
	if got := cm.Labels[platform.LabelCluster]; got != name {
		t.Errorf("kiln-config labelled for cluster %q, want %q", got, name)
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnctl/kiln/internal/testenv/testhooks"
)

// A destroy cancelled in the wizard (Ctrl-C, confirmed) after it removed
// the tenant namespaces says what it did and what is left, and how to
// finish — d here, or the CLI command it names; the home screen lists the
// cluster as partly removed; d from the reopened run destroys it again,
// asking again, and finishes (issue #24).
func TestWizardInterruptedDestroyInTmux(t *testing.T) {
	needTmux(t)
	skipShort(t)
	const name, kctx = "wizcut", "kiln-b"
	e := newEnv(t)
	cleanup(t, e, name, kctx)
	cs := clusterB.Client
	expect(t, e.kiln("create", "kube", name, "--context", kctx, "--headless"), 0)
	expect(t, e.kiln("project", "create", "kube", name, "default/site", "--context", kctx, "--headless"), 0)

	release := filepath.Join(t.TempDir(), "release")
	x := startWizardWith(t, e, 100, 30, testhooks.PauseEnv+"=after-tenants-delete", testhooks.PauseFileEnv+"="+release)
	t.Cleanup(func() { _ = os.WriteFile(release, nil, 0o600) })
	x.waitFor(30*time.Second, "Kiln clusters", "> kube   "+name)
	x.keys("d")
	x.waitFor(30*time.Second, "Type the cluster name to confirm")
	x.text(name)
	x.keys("Enter")
	waitFile(t, release+".reached") // the tenant namespaces are being deleted
	x.keys("C-c")
	x.waitFor(10*time.Second, "Cancel the running destroy?")
	x.keys("y")
	x.waitFor(10*time.Second, "cancelling")
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	scr := x.waitScreen(time.Minute, "○ cancelled", "d destroy again")
	t.Logf("the cancelled destroy:\n%s", scr)
	flat := strings.ReplaceAll(folded(scr), "- ", "-")
	for _, want := range []string{"partly removed", "left: ", "namespace kiln-system", "Run `d destroy` again", "Press d to run destroy again"} {
		if !strings.Contains(flat, want) {
			t.Errorf("the cancelled destroy's screen lacks %q:\n%s", want, scr)
		}
	}
	if strings.Contains(scr, "✗") {
		t.Errorf("a confirmed cancel is shown as a failure:\n%s", scr)
	}
	// The wizard speaks wizard: the way to finish is its key, not a
	// command line (issue #28).
	if loc := cliWords.FindStringIndex(scr); loc != nil {
		t.Errorf("the cancelled destroy names the CLI (%q):\n%s", scr[loc[0]:loc[1]], scr)
	}

	// Home: the cluster is partly removed, never absent.
	x.keys("Escape")
	// (The list shown before is kept, marked refreshing, until the
	// live read lands.)
	home := x.waitFor(30*time.Second, "Kiln clusters", "> kube   "+name, "partly-removed")
	if row := lineWith(home, "> kube   "+name); !strings.Contains(row, "partly-removed") {
		t.Errorf("home lists %s as %q, want partly-removed:\n%s", name, row, home)
	}

	// The last run, then d: destroy again, asked again, finishes.
	x.keys("l")
	x.waitFor(10*time.Second, "d destroy again")
	x.keys("d")
	x.waitFor(30*time.Second, "Type the cluster name to confirm")
	x.text(name)
	x.keys("Enter")
	x.waitFor(2*time.Minute, "✓ cluster "+name+" destroyed")
	waitNamespaceGone(t, cs, "kiln-system")
	waitNamespaceGone(t, cs, "kiln-tenant-default")
}

// lineWith is the first line of screen containing s ("" if none).
func lineWith(screen, s string) string {
	for _, l := range strings.Split(screen, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnctl/kiln/internal/testenv/testhooks"
)

// testhooksPkg is the package that holds the crash and pause hooks.
const testhooksPkg = "github.com/kilnctl/kiln/internal/testenv/testhooks"

// TestReleaseBuildHasNoTestHooks builds kiln as `make build` and goreleaser
// do (no build tags) and proves the crash and pause hooks are not in it:
// no build of cmd/kiln for any released OS imports internal/testenv/testhooks, the
// binary does not contain the hooks' variable names, and a create run with
// KILN_TEST_CRASH_AT and KILN_TEST_PAUSE_AT at points it passes is neither
// killed nor held. The same variables do kill the test binary there, so the
// points are real.
func TestReleaseBuildHasNoTestHooks(t *testing.T) {
	skipShort(t)
	for _, goos := range []string{"linux", "darwin", "windows"} {
		cmd := exec.CommandContext(t.Context(), "go", "list", "-deps", ".")
		cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps for %s: %v", goos, err)
		}
		if !strings.Contains(string(out), "github.com/kilnctl/kiln/engine\n") {
			t.Fatalf("go list -deps for %s does not list the engine: %s", goos, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == testhooksPkg {
				t.Errorf("kiln for %s imports %s: the release binary would carry the test hooks", goos, testhooksPkg)
			}
		}
	}

	bin := filepath.Join(t.TempDir(), "kiln")
	// As .goreleaser.yaml (and `make build`, whose cache this then
	// reuses) builds it: without cgo, paths trimmed.
	build := exec.CommandContext(t.Context(), "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kiln: %v\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{testhooks.CrashEnv, testhooks.PauseEnv, testhooks.PauseFileEnv, testhooks.HostEnv} {
		if bytes.Contains(data, []byte(name)) {
			t.Errorf("the release binary contains %q", name)
		}
	}

	const context, name = "kiln-a", "release-hooks"
	e := newEnv(t)
	cleanup(t, e, name, context)
	// Control: the test binary (kiln with the hooks) is killed at after-lock.
	r := e.kilnWith([]string{testhooks.CrashEnv + "=after-lock"}, "create", "kube", name, "--context", context, "-o", "json")
	if !r.killed {
		t.Fatalf("the test binary was not killed at after-lock:\n%s", r)
	}
	// The release binary passes after-namespace (where it would pause on a
	// release file that never comes) and after-lock (where it would die),
	// and finishes the create.
	release := filepath.Join(t.TempDir(), "release")
	rel := &env{t: t, state: e.state, data: e.data, exe: bin}
	r = rel.kilnWith([]string{
		testhooks.CrashEnv + "=after-lock",
		testhooks.PauseEnv + "=after-namespace",
		testhooks.PauseFileEnv + "=" + release,
	}, "create", "kube", name, "--context", context, "--continue", "-o", "json")
	expect(t, r, 0)
	if !strings.Contains(r.stdout, "holding lock") {
		t.Errorf("the release binary's create did not take the lock (so never reached after-lock):\n%s", r)
	}
	if _, err := os.Stat(release + ".reached"); err == nil {
		t.Errorf("the release binary reported reaching the pause point")
	}
}

package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kilnctl/kiln/creds"
)

// The token dir's filesystem full (issue #26, item 4): rotate-key, which
// stages the new key in the token dir before the cluster is told
// anything, fails with exit 1 naming the directory and "no space left on
// device"; the committed token dir and kiln-auth are as they were (one
// key, the same); once there is room again the same rotate-key finishes.
// The state dir is a tmpfs mounted for the test and filled to the last
// page (needs root; CI runs as root).
func TestFullDiskUnderTheTokenDir(t *testing.T) {
	skipShort(t)
	if os.Geteuid() != 0 {
		skipUnless(t, false, "mounting a tmpfs needs root")
	}
	const kctx, name = "kiln-a", "fulldisk"
	e := newEnv(t)
	if err := os.MkdirAll(e.state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", e.state, "tmpfs", 0, "size=1m,mode=0700"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(e.state, syscall.MNT_DETACH) })
	cleanup(t, e, name, kctx)
	expect(t, e.kiln("create", "kube", name, "--context", kctx, "--headless"), 0)
	before, err := creds.Load(e.tokenDir(name))
	if err != nil {
		t.Fatal(err)
	}
	cs := clientFor(kctx)

	filler := filepath.Join(e.state, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	page := make([]byte, 4096)
	for {
		if _, err := f.Write(page); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	f.Close()

	r := e.kiln("rotate-key", "kube", name, "--context", kctx, "--yes", "--headless")
	expect(t, r, 1)
	if out := r.stdout + r.stderr; !strings.Contains(out, "no space left on device") || !strings.Contains(out, e.tokenDir(name)) {
		t.Errorf("rotate-key on a full disk does not say so, naming the token dir:\n%s", r)
	}
	after, err := creds.Load(e.tokenDir(name))
	if err != nil {
		t.Fatalf("the committed token dir no longer loads after rotate-key failed on a full disk: %v", err)
	}
	if after.Manifest.KeyID != before.Manifest.KeyID || after.Manifest.State != "committed" {
		t.Errorf("token dir after the failed rotate-key: key %s (%s), want %s committed", after.Manifest.KeyID, after.Manifest.State, before.Manifest.KeyID)
	}
	if keys := authKeys(t, cs); len(keys) != 1 || keys[before.Manifest.KeyID] == "" {
		t.Errorf("kiln-auth after the failed rotate-key trusts %v, want only %s", keyIDs(keys), before.Manifest.KeyID)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	expect(t, e.kiln("rotate-key", "kube", name, "--context", kctx, "--yes", "--headless"), 0)
	rotated, err := creds.Load(e.tokenDir(name))
	if err != nil {
		t.Fatal(err)
	}
	if keys := authKeys(t, cs); len(keys) != 1 || keys[rotated.Manifest.KeyID] == "" || rotated.Manifest.KeyID == before.Manifest.KeyID {
		t.Errorf("after rotate-key with room again: kiln-auth trusts %v, token dir key %s (before %s)", keyIDs(keys), rotated.Manifest.KeyID, before.Manifest.KeyID)
	}
}

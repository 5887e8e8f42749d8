package creds

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A full disk while a token dir is written (issue #26, item 4): the write
// fails naming the directory and the cause, the committed dir it was to
// replace is intact and still loads, and nothing half-written is left
// beside it — the next write starts clean. The filesystem is a tmpfs of
// six pages, mounted for the test (needs root; CI runs as root).
func TestWriteOnAFullDiskLeavesTheCommittedDir(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI: mounting a small tmpfs needs root")
		}
		t.Skip("mounting a small tmpfs needs root")
	}
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=24k,mode=0700"); err != nil {
		t.Fatalf("mount tmpfs as root: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(mnt, syscall.MNT_DETACH) })
	dir := filepath.Join(mnt, "kube", "dev1", "tokens")

	small, err := NewTokenDir("dev1", "kube", "ctx", testKey(), []string{"default"}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	small.Manifest.State = StateCommitted
	if err := Write(dir, small); err != nil {
		t.Fatalf("the first, small token dir does not fit either: %v", err)
	}
	big, err := NewTokenDir("dev1", "kube", "ctx", testKey(), []string{"default", "a", "b", "c", "d", "e"}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	werr := Write(dir, big)
	if !errors.Is(werr, syscall.ENOSPC) || !strings.Contains(werr.Error(), dir) {
		t.Fatalf("write on a full disk: %v, want ENOSPC naming %s", werr, dir)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatalf("the committed token dir no longer loads after the failed write: %v", err)
	}
	if got.Manifest.State != StateCommitted || len(got.Manifest.Tenants) != 1 || got.Tokens["default"] != small.Tokens["default"] {
		t.Errorf("after the failed write the dir holds %s with tenants %v", got.Manifest.State, got.Manifest.Tenants)
	}
	t.Logf("the failed write: %v", werr)
	entries, err := os.ReadDir(filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != filepath.Base(dir) {
			t.Errorf("left beside the token dir after the failed write: %s", e.Name())
		}
	}
}

package creds

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kilnctl/kiln/engine/failure"
)

// trustedOf is kiln-auth's content for a cluster that trusts td's key.
func trustedOf(t *testing.T, td *TokenDir) map[string]string {
	t.Helper()
	pemBytes, err := PublicKeyPEM(td.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{td.Manifest.KeyID: string(pemBytes)}
}

func TestCommitRefusesAKeyTheClusterDoesNotTrust(t *testing.T) {
	td := newTestDir(t)
	dir := writeTestDir(t, td)
	other := otherKey()
	otherID := mustKeyID(t, other)
	otherPEM, err := PublicKeyPEM(&other.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	for name, trusted := range map[string]map[string]string{
		"nothing trusted":      nil,
		"another key":          {otherID: string(otherPEM)},
		"right id, wrong key":  {td.Manifest.KeyID: string(otherPEM)},
		"right id, broken PEM": {td.Manifest.KeyID: "not a key"},
	} {
		t.Run(name, func(t *testing.T) {
			err := Commit(dir, trusted)
			if err == nil {
				t.Fatal("committed a directory whose key the cluster does not trust")
			}
			if !strings.Contains(err.Error(), td.Manifest.KeyID) || !strings.Contains(err.Error(), "nothing was committed") {
				t.Errorf("error does not name the key and say nothing was committed: %v", err)
			}
			if got := snapshot(t, dir); !equalSnapshots(got, before) {
				t.Error("the refused commit changed the directory")
			}
		})
	}
	// The right key commits.
	if err := Commit(dir, trustedOf(t, td)); err != nil {
		t.Fatal(err)
	}
}

func equalSnapshots(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !bytes.Equal(b[k], v) {
			return false
		}
	}
	return true
}

// Flock locks belong to open file descriptions, so two LockDir calls in
// one process contend exactly like two processes.
func TestLockDirIsExclusiveAndNamesTheHolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "tokens")
	first, err := LockDir(dir, "kiln create dev1 by me@host-a pid 1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = LockDir(dir, "kiln create dev1 by me@host-a pid 2")
	if failure.Of(err) != failure.Locked || !strings.Contains(err.Error(), "host-a pid 1") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second lock: want locked naming the holder and the dir, got %v: %v", failure.Of(err), err)
	}
	var fe *failure.Error
	if !errors.As(err, &fe) || fe.Holder != "kiln create dev1 by me@host-a pid 1" || fe.Since.IsZero() {
		t.Errorf("the locked failure's fields = %+v, want the holder and since", fe)
	}
	if mode(t, LockPath(dir)) != 0o600 {
		t.Errorf("lock file mode %o, want 0600", mode(t, LockPath(dir)))
	}
	if err := first.Unlock(); err != nil {
		t.Fatal(err)
	}
	again, err := LockDir(dir, "third")
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	_ = again.Unlock()
}

func TestLockDirConcurrent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tokens")
	var won, lost atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	locks := make([]*DirLock, 16)
	for i := range locks {
		wg.Go(func() {
			<-start
			l, err := LockDir(dir, "racer")
			switch {
			case err == nil:
				won.Add(1)
				locks[i] = l
			case failure.Of(err) == failure.Locked:
				lost.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	if won.Load() != 1 || lost.Load() != 15 {
		t.Fatalf("%d won, %d lost; want exactly one winner", won.Load(), lost.Load())
	}
	for _, l := range locks {
		_ = l.Unlock()
	}
}

// A holder killed with SIGKILL leaves no stale lock: the kernel drops it.
func TestLockDirDiesWithItsProcess(t *testing.T) {
	if os.Getenv("KILN_CREDS_LOCK_CHILD") != "" {
		if _, err := LockDir(os.Getenv("KILN_CREDS_LOCK_CHILD"), "child"); err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString("locked\n")
		select {}
	}
	dir := filepath.Join(t.TempDir(), "tokens")
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockDirDiesWithItsProcess$")
	cmd.Env = append(os.Environ(), "KILN_CREDS_LOCK_CHILD="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	if _, err := out.Read(buf); err != nil || string(buf) != "locked\n" {
		t.Fatalf("child did not lock: %q %v", buf, err)
	}
	if _, err := LockDir(dir, "parent"); failure.Of(err) != failure.Locked {
		t.Fatalf("while the child holds it: want exit 4, got %v", err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	l, err := LockDir(dir, "parent")
	if err != nil {
		t.Fatalf("after the holder was killed: %v", err)
	}
	_ = l.Unlock()
}

// A lock file planted as a symlink (or a hard link) to another file is
// refused, and the file it points to is left exactly as it was: the
// holder record is never written through it.
func TestLockDirRefusesAPlantedLink(t *testing.T) {
	for _, kind := range []string{"symlink", "hardlink"} {
		t.Run(kind, func(t *testing.T) {
			base := t.TempDir()
			dir := filepath.Join(base, "state", "tokens")
			if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
				t.Fatal(err)
			}
			victim := filepath.Join(base, "victim")
			const content = "do not truncate me\n"
			if err := os.WriteFile(victim, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			var err error
			if kind == "symlink" {
				err = os.Symlink(victim, LockPath(dir))
			} else {
				err = os.Link(victim, LockPath(dir))
			}
			if err != nil {
				t.Fatal(err)
			}
			l, err := LockDir(dir, "kiln create dev1 by me@host-a pid 1")
			if err == nil {
				_ = l.Unlock()
				t.Fatal("LockDir took a planted link")
			}
			if !strings.Contains(err.Error(), LockPath(dir)) {
				t.Errorf("error does not name the lock file: %v", err)
			}
			if got, _ := os.ReadFile(victim); string(got) != content {
				t.Errorf("the link's target was changed to %q", got)
			}
		})
	}
}

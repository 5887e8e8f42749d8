package main

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kilnctl/kiln/creds"
)

// copyDir copies a token dir with its permissions (a copy a consumer kept).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// trustedDir checks the invariant of a rotation: the committed token dir
// holds a key kiln-auth trusts. It returns the dir.
func trustedDir(t *testing.T, cs kubernetes.Interface, dir string) *creds.TokenDir {
	t.Helper()
	td, err := creds.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	keys := authKeys(t, cs)
	if _, ok := keys[td.Manifest.KeyID]; !ok || td.Manifest.State != creds.StateCommitted {
		t.Fatalf("token dir key %s (%s) is not trusted by kiln-auth %v", td.Manifest.KeyID, td.Manifest.State, keys)
	}
	return td
}

func keyIDs(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// waitWith runs kiln wait on a machine whose only token dir is dir.
func waitWith(t *testing.T, name, kctx, dir string) result {
	t.Helper()
	other := newEnv(t)
	return other.kiln("wait", "kube", name, "--context", kctx, "--token-dir", dir, "--timeout", "1m")
}

func TestRotateKey(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	const name, kctx = "rot", "kiln-a"
	cleanup(t, e, name, kctx)
	cs := clusterA.Client
	ctx := context.Background()
	expect(t, e.kiln("create", "kube", name, "--context", kctx, "-c", writeConfig(t, twoTenants)), 0)
	dir := e.tokenDir(name)
	first := trustedDir(t, cs, dir)
	copy1 := filepath.Join(t.TempDir(), "tokens")
	copyDir(t, dir, copy1)

	t.Run("without --yes headless: exit 3, nothing changed", func(t *testing.T) {
		before := world(t, cs)
		r := e.kiln("rotate-key", "kube", name, "--context", kctx, "--headless")
		expect(t, r, 3)
		if !strings.Contains(r.stderr, "--yes") {
			t.Errorf("advice missing:\n%s", r.stderr)
		}
		if after := world(t, cs); !reflect.DeepEqual(before, after) {
			t.Errorf("unconfirmed rotate-key changed the cluster")
		}
		if _, err := os.Stat(creds.RotationPath(dir)); err == nil {
			t.Errorf("unconfirmed rotate-key staged a key")
		}
	})

	var second *creds.TokenDir
	t.Run("rotate: new key trusted alone, tokens re-signed, old copies stop verifying", func(t *testing.T) {
		r := e.kiln("rotate-key", "kube", name, "--context", kctx, "--yes", "-o", "json")
		expect(t, r, 0)
		keys := authKeys(t, cs)
		second = trustedDir(t, cs, dir)
		if len(keys) != 1 || second.Manifest.KeyID == first.Manifest.KeyID {
			t.Fatalf("kiln-auth %v, token dir key %s (was %s)", keyIDs(keys), second.Manifest.KeyID, first.Manifest.KeyID)
		}
		if second.Previous != nil || len(second.Tokens) != 2 {
			t.Errorf("previous key kept after the rotation ended, or tokens lost: %d", len(second.Tokens))
		}
		for tenant, tok := range second.Tokens {
			if tok == first.Tokens[tenant] {
				t.Errorf("token of %s not re-signed", tenant)
			}
		}
		if _, err := os.Stat(creds.RotationPath(dir)); err == nil {
			t.Errorf("staged rotation left behind")
		}
		expect(t, e.kiln("wait", "kube", name, "--context", kctx, "--timeout", "1m"), 0)
		r = waitWith(t, name, kctx, copy1)
		expect(t, r, 1)
		if !strings.Contains(r.stderr, "untrusted") || !strings.Contains(r.stderr, first.Manifest.KeyID) {
			t.Errorf("wait with the old token dir should say its key is not trusted:\n%s", r.stderr)
		}
	})

	t.Run("--keep-old keeps both trusted until --finish", func(t *testing.T) {
		copy2 := filepath.Join(t.TempDir(), "tokens")
		copyDir(t, dir, copy2)
		r := e.kiln("rotate-key", "kube", name, "--context", kctx, "--yes", "--keep-old", "1h", "-o", "json")
		expect(t, r, 0)
		third := trustedDir(t, cs, dir)
		if keys := authKeys(t, cs); len(keys) != 2 || keys[second.Manifest.KeyID] == "" {
			t.Fatalf("kiln-auth during --keep-old: %v", keyIDs(keys))
		}
		if third.Previous == nil {
			t.Errorf("the old key is not kept in the token dir during --keep-old")
		}
		expect(t, waitWith(t, name, kctx, copy2), 0)
		// Run again: the rotation under way is reported, never a second one.
		before := authKeys(t, cs)
		r = e.kiln("rotate-key", "kube", name, "--context", kctx, "--yes", "-o", "json")
		expect(t, r, 0)
		if res := r.last(t, "result"); !strings.Contains(res["message"].(string), "stays trusted until") {
			t.Errorf("result = %v", res)
		}
		if after := authKeys(t, cs); !reflect.DeepEqual(before, after) {
			t.Errorf("a rerun during --keep-old changed kiln-auth")
		}
		expect(t, e.kiln("rotate-key", "kube", name, "--context", kctx, "--finish", "--yes"), 0)
		if keys := authKeys(t, cs); len(keys) != 1 || keys[third.Manifest.KeyID] == "" {
			t.Errorf("kiln-auth after --finish: %v", keyIDs(keys))
		}
		if td := trustedDir(t, cs, dir); td.Previous != nil {
			t.Errorf("previous key kept after --finish")
		}
		expect(t, waitWith(t, name, kctx, copy2), 1)
		r = e.kiln("rotate-key", "kube", name, "--context", kctx, "--finish", "--yes", "-o", "json")
		expect(t, r, 0)
		if res := r.last(t, "result"); !strings.Contains(res["message"].(string), "nothing to finish") {
			t.Errorf("result = %v", res)
		}
	})

	t.Run("a later operation after the deadline removes the old key", func(t *testing.T) {
		for _, op := range [][]string{{"create", "--continue"}, {"upgrade", "--yes"}} {
			expect(t, e.kiln("rotate-key", "kube", name, "--context", kctx, "--yes", "--keep-old", "1h"), 0)
			cm, err := cs.CoreV1().ConfigMaps("kiln-system").Get(ctx, "kiln-auth", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// The deadline has passed (as if an hour went by).
			cm.Annotations["kiln.dev/rotation-old-key-expires"] = time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
			if _, err := cs.CoreV1().ConfigMaps("kiln-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			expect(t, e.kiln(op[0], "kube", name, "--context", kctx, op[1]), 0)
			td := trustedDir(t, cs, dir)
			if keys := authKeys(t, cs); len(keys) != 1 {
				t.Errorf("kiln-auth after the deadline and %s: %v", op[0], keyIDs(keys))
			}
			// The next rotate-key tidies the token dir, starting nothing new.
			expect(t, e.kiln("rotate-key", "kube", name, "--context", kctx, "--yes"), 0)
			if after := trustedDir(t, cs, dir); after.Previous != nil || after.Manifest.KeyID != td.Manifest.KeyID {
				t.Errorf("tidy: key %s (was %s), previous kept %v", after.Manifest.KeyID, td.Manifest.KeyID, after.Previous != nil)
			}
		}
	})
}

// rotateCrashPoints are the checkpoints of rotate-key where the crash hook
// kills kiln.
var rotateCrashPoints = []string{
	"after-plan", "rotate-after-lock", "rotate-after-staged", "rotate-after-trust-both",
	"rotate-after-swap", "after-credentials", "rotate-after-retire", "rotate-after-end",
}

func TestKilledRotateKeyConverges(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	const name, kctx = "rotcrash", "kiln-b"
	cleanup(t, e, name, kctx)
	cs := clusterB.Client
	expect(t, e.kiln("create", "kube", name, "--context", kctx), 0)
	dir := e.tokenDir(name)
	run := func(t *testing.T, point string, extra ...string) {
		before := trustedDir(t, cs, dir).Manifest.KeyID
		args := append([]string{"rotate-key", "kube", name, "--context", kctx, "--yes", "-o", "json"}, extra...)
		r := e.kilnWith([]string{"KILN_TEST_CRASH_AT=" + point}, args...)
		if !r.killed {
			t.Fatalf("kiln was not killed at %s:\n%s", point, r)
		}
		// At the instant of the kill the cluster trusts the key of the
		// committed token dir.
		atKill := trustedDir(t, cs, dir)
		next := ""
		if staged, err := creds.LoadRotation(dir); err != nil {
			t.Fatal(err)
		} else if staged != nil {
			next = staged.Manifest.KeyID
		} else if atKill.Manifest.KeyID != before {
			next = atKill.Manifest.KeyID
			if atKill.Previous == nil && len(authKeys(t, cs)) == 1 {
				// Killed after the last step: the rotation had ended, so
				// the rerun is a new rotation, as asked.
				next = ""
			}
		}
		r = e.kiln(args...)
		expect(t, r, 0)
		td := trustedDir(t, cs, dir)
		if td.Manifest.KeyID == before {
			t.Fatalf("not rotated: still key %s", before)
		}
		if next != "" && td.Manifest.KeyID != next {
			t.Errorf("the rerun started a second rotation: key %s, the interrupted one had %s", td.Manifest.KeyID, next)
		}
		if len(extra) == 0 {
			if keys := authKeys(t, cs); len(keys) != 1 || td.Previous != nil {
				t.Errorf("rotation not finished: kiln-auth %v, previous kept %v", keyIDs(keys), td.Previous != nil)
			}
		}
		if _, err := os.Stat(creds.RotationPath(dir)); err == nil {
			t.Errorf("staged rotation left behind")
		}
		expect(t, e.kiln("wait", "kube", name, "--context", kctx, "--timeout", "1m"), 0)
	}
	for _, point := range rotateCrashPoints {
		t.Run(point, func(t *testing.T) { run(t, point) })
	}
	t.Run("rotate-after-keep-old", func(t *testing.T) {
		run(t, "rotate-after-keep-old", "--keep-old", "1h")
		expect(t, e.kiln("rotate-key", "kube", name, "--context", kctx, "--finish", "--yes"), 0)
		if keys := authKeys(t, cs); len(keys) != 1 {
			t.Errorf("kiln-auth after --finish: %v", keyIDs(keys))
		}
	})
}

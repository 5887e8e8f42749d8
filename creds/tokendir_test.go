package creds

import (
	"bytes"
	"crypto/rsa"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kilnctl/kiln/engine/failure"
)

func newTestDir(t *testing.T, tenants ...string) *TokenDir {
	t.Helper()
	if len(tenants) == 0 {
		tenants = []string{"default", "staging"}
	}
	td, err := NewTokenDir("dev1", "kube", "kind-dev1", testKey(), tenants, testNow)
	if err != nil {
		t.Fatal(err)
	}
	return td
}

// writeTestDir writes a fresh token directory under a temp parent (which
// does not exist yet, to exercise parent creation) and returns its path.
func writeTestDir(t *testing.T, td *TokenDir) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state", "kiln", "kube", "dev1", "tokens")
	if err := Write(dir, td); err != nil {
		t.Fatal(err)
	}
	return dir
}

func assertSameDir(t *testing.T, got, want *TokenDir) {
	t.Helper()
	if !reflect.DeepEqual(got.Manifest, want.Manifest) {
		t.Errorf("manifest = %+v, want %+v", got.Manifest, want.Manifest)
	}
	if !got.Key.Equal(want.Key) {
		t.Error("signing key differs")
	}
	if !reflect.DeepEqual(got.Tokens, want.Tokens) {
		t.Error("tokens differ")
	}
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestNewTokenDir(t *testing.T) {
	td := newTestDir(t)
	m := td.Manifest
	if m.State != StatePending || m.KeyID != mustKeyID(t, testKey()) || m.Cluster != "dev1" ||
		m.Provider != "kube" || m.Location != "kind-dev1" || !m.CreatedAt.Equal(testNow.Truncate(time.Second)) {
		t.Fatalf("manifest = %+v", m)
	}
	trusted := map[string]*rsa.PublicKey{m.KeyID: &testKey().PublicKey}
	for tenant, err := range Verify(td, trusted) {
		if err != nil {
			t.Errorf("tenant %s: %v", tenant, err)
		}
	}
	if len(td.Tokens) != 2 {
		t.Fatalf("%d tokens, want 2", len(td.Tokens))
	}

	bad := []struct {
		name                        string
		cluster, provider, location string
		tenants                     []string
	}{
		{"no tenants", "dev1", "kube", "x", nil},
		{"duplicate tenant", "dev1", "kube", "x", []string{"a", "a"}},
		{"path in tenant", "dev1", "kube", "x", []string{"../etc"}},
		{"dot tenant", "dev1", "kube", "x", []string{"."}},
		{"bad cluster", "Dev_1", "kube", "x", []string{"a"}},
		{"no location", "dev1", "kube", "", []string{"a"}},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			if _, err := NewTokenDir(c.cluster, c.provider, c.location, testKey(), c.tenants, testNow); failure.Of(err) != failure.Input {
				t.Fatalf("err = %v, want exit code 2", err)
			}
		})
	}
}

func TestVerifyAgainstClusterKeys(t *testing.T) {
	td := newTestDir(t)
	otherID := mustKeyID(t, otherKey())
	res := Verify(td, map[string]*rsa.PublicKey{otherID: &otherKey().PublicKey})
	if len(res) != 2 {
		t.Fatalf("Verify returned %d results, want one per tenant", len(res))
	}
	for tenant, err := range res {
		if !errors.Is(err, ErrUntrustedKey) {
			t.Errorf("tenant %s: err = %v, want ErrUntrustedKey", tenant, err)
		}
	}
}

func TestWriteLoadRoundTrip(t *testing.T) {
	td := newTestDir(t)
	dir := writeTestDir(t, td)
	if td.Path != dir {
		t.Errorf("Path = %q, want %q", td.Path, dir)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	assertSameDir(t, got, td)
	if got.Path != dir {
		t.Errorf("loaded Path = %q", got.Path)
	}

	// Layout and permissions (contract).
	want := map[string]fs.FileMode{
		dir:                                      0o700,
		filepath.Join(dir, ManifestFile):         0o600,
		filepath.Join(dir, SigningKeyFile):       0o600,
		filepath.Join(dir, TokensDir):            0o700,
		filepath.Join(dir, TokensDir, "default"): 0o600,
		filepath.Join(dir, TokensDir, "staging"): 0o600,
		filepath.Dir(dir):                        0o700, // created parents
		filepath.Dir(filepath.Dir(dir)):          0o700,
	}
	for path, perm := range want {
		if got := mode(t, path); got != perm {
			t.Errorf("%s: mode %04o, want %04o", path, got, perm)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(dir))
	if len(entries) != 1 {
		t.Errorf("parent holds %d entries, want only the token directory (no temp or backup left)", len(entries))
	}

	// The files hold what the contract says.
	tok, _ := os.ReadFile(filepath.Join(dir, TokensDir, "staging"))
	if string(tok) != td.Tokens["staging"] {
		t.Error("tokens/staging is not the compact JWS")
	}
	keyPEM, _ := os.ReadFile(filepath.Join(dir, SigningKeyFile))
	if !bytes.HasPrefix(keyPEM, []byte("-----BEGIN PRIVATE KEY-----")) {
		t.Error("signing-key.pem is not PKCS#8")
	}
	manifest, _ := os.ReadFile(filepath.Join(dir, ManifestFile))
	for _, field := range []string{`"cluster": "dev1"`, `"provider": "kube"`, `"location": "kind-dev1"`,
		`"key_id": "sha256:`, `"state": "pending"`, `"created_at": "2026-01-02T03:04:05Z"`, `"tenants": [`} {
		if !bytes.Contains(manifest, []byte(field)) {
			t.Errorf("manifest.json lacks %s:\n%s", field, manifest)
		}
	}
}

func TestWriteRejectsInconsistentDir(t *testing.T) {
	td := newTestDir(t)
	td.Tokens["staging"] = td.Tokens["default"] // sub says default
	dir := filepath.Join(t.TempDir(), "tokens")
	if err := Write(dir, td); err == nil {
		t.Fatal("wrote a directory Load would reject")
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a failed Write left the directory behind")
	}
}

func TestCommitChangesOnlyState(t *testing.T) {
	td := newTestDir(t)
	dir := writeTestDir(t, td)
	before := snapshot(t, dir)
	if err := Commit(dir, trustedOf(t, td)); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Manifest.State != StateCommitted {
		t.Fatalf("state = %q", got.Manifest.State)
	}
	wantManifest := td.Manifest
	wantManifest.State = StateCommitted
	if !reflect.DeepEqual(got.Manifest, wantManifest) {
		t.Errorf("manifest = %+v, want %+v", got.Manifest, wantManifest)
	}
	after := snapshot(t, dir)
	for path, data := range before {
		if path == ManifestFile {
			continue
		}
		if !bytes.Equal(after[path], data) {
			t.Errorf("%s changed", path)
		}
	}
	if len(after) != len(before) {
		t.Errorf("files: %d before, %d after (manifest.json.tmp left?)", len(before), len(after))
	}
	if mode(t, filepath.Join(dir, ManifestFile)) != 0o600 {
		t.Error("manifest.json lost mode 0600")
	}
	// Committing again is a no-op.
	if err := Commit(dir, trustedOf(t, td)); err != nil {
		t.Fatal(err)
	}
	if again := snapshot(t, dir); !reflect.DeepEqual(again, after) {
		t.Error("second Commit changed the directory")
	}
}

// snapshot maps each file under dir (relative path) to its content.
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		data, err := os.ReadFile(path)
		out[rel] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCommitRefusesInvalidDir(t *testing.T) {
	dir := writeTestDir(t, newTestDir(t))
	if err := os.Remove(filepath.Join(dir, TokensDir, "staging")); err != nil {
		t.Fatal(err)
	}
	err := Commit(dir, nil)
	if failure.Of(err) != failure.Input {
		t.Fatalf("Commit of a broken directory: kind %v, err %v", failure.Of(err), err)
	}
}

// Rewriting over an existing directory, interrupted after each step. The
// steps are the ones Write runs; a crash between them leaves exactly what
// running them one by one leaves.
func TestRewriteCrashPoints(t *testing.T) {
	oldTD := newTestDir(t, "default")
	newTD := newTestDir(t, "default", "staging", "prod")
	newTD.Manifest.Location = "kind-dev1-new" // tell them apart

	cases := []struct {
		name  string
		steps int // how many of stage, aside, install ran
		want  *TokenDir
	}{
		{"crash while staging", 1, oldTD},
		{"crash after moving the old dir aside", 2, oldTD},
		{"crash after installing the new dir", 3, newTD},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeTestDir(t, oldTD)
			if err := prepare(dir); err != nil {
				t.Fatal(err)
			}
			tmp, err := stage(dir, newTD)
			if err != nil {
				t.Fatal(err)
			}
			if c.steps == 1 {
				// Simulate the crash mid-stage: a temp dir without manifest.
				if err := os.Remove(filepath.Join(tmp, ManifestFile)); err != nil {
					t.Fatal(err)
				}
			}
			if c.steps >= 2 {
				if moved, err := aside(dir); err != nil || !moved {
					t.Fatalf("aside: %v, %v", moved, err)
				}
				if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
					t.Fatal("DIR still exists after aside")
				}
			}
			if c.steps >= 3 {
				if err := install(tmp, dir); err != nil {
					t.Fatal(err)
				}
			}

			got, err := Load(dir)
			if err != nil {
				t.Fatalf("Load after crash: %v", err)
			}
			assertSameDir(t, got, c.want)
			if _, err := os.Stat(backupPath(dir)); c.steps == 2 && !errors.Is(err, fs.ErrNotExist) {
				t.Error("Load restored the backup but left it in place")
			}

			// The next Write cleans up every leftover and succeeds.
			third := newTestDir(t, "qa")
			if err := Write(dir, third); err != nil {
				t.Fatal(err)
			}
			got, err = Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			assertSameDir(t, got, third)
			entries, _ := os.ReadDir(filepath.Dir(dir))
			if len(entries) != 1 {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Errorf("leftovers after the next Write: %v", names)
			}
		})
	}
}

// Write over an existing directory whose backup name is taken by a stale
// backup (crash after install) and with a leftover temp dir.
func TestWriteOverExisting(t *testing.T) {
	first := newTestDir(t, "default")
	dir := writeTestDir(t, first)
	if err := os.MkdirAll(filepath.Join(backupPath(dir), "junk"), 0o700); err != nil {
		t.Fatal(err)
	}
	second := newTestDir(t, "default", "staging")
	second.Manifest.State = StateCommitted
	if err := Write(dir, second); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	assertSameDir(t, got, second)
	if _, err := os.Stat(backupPath(dir)); !errors.Is(err, fs.ErrNotExist) {
		t.Error("stale backup survived")
	}
}

// A directory name with glob metacharacters must not confuse the sweep of
// leftover temp directories.
func TestWriteOddDirName(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "to[k]*ens")
	for i := 0; i < 2; i++ {
		if err := Write(dir, newTestDir(t)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := stage(dir, newTestDir(t)); err != nil { // leftover temp
		t.Fatal(err)
	}
	if err := Write(dir, newTestDir(t)); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(dir)); len(entries) != 1 {
		t.Errorf("%d entries left in the parent, want 1", len(entries))
	}
	if _, err := Load(dir); err != nil {
		t.Fatal(err)
	}
}

func TestAddTenants(t *testing.T) {
	td := newTestDir(t, "default")
	dir := writeTestDir(t, td)
	if err := Commit(dir, trustedOf(t, td)); err != nil {
		t.Fatal(err)
	}
	later := testNow.Add(time.Hour)
	got, err := AddTenants(dir, []string{"default", "staging"}, later)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	assertSameDir(t, loaded, got)
	if loaded.Tokens["default"] != td.Tokens["default"] {
		t.Error("existing token was re-signed")
	}
	if loaded.Manifest.State != StateCommitted {
		t.Error("state was not kept")
	}
	if !reflect.DeepEqual(loaded.Manifest.Tenants, []string{"default", "staging"}) {
		t.Errorf("tenants = %v", loaded.Manifest.Tenants)
	}
	if _, err := AddTenants(dir, []string{"../x"}, later); failure.Of(err) != failure.Input {
		t.Errorf("bad tenant name: err = %v, want exit code 2", err)
	}
	// Nothing missing: nothing written.
	before := snapshot(t, dir)
	if _, err := AddTenants(dir, []string{"staging"}, later.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(snapshot(t, dir), before) {
		t.Error("AddTenants with nothing to add rewrote the directory")
	}
}

func TestMoveAside(t *testing.T) {
	dir := writeTestDir(t, newTestDir(t))
	moved, err := MoveAside(dir, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if want := dir + ".destroyed-20260102T030405Z"; moved != want {
		t.Fatalf("moved to %s, want %s", moved, want)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("directory still there")
	}
	if _, err := Load(moved); err != nil {
		t.Fatalf("moved directory is not intact: %v", err)
	}
	// A second destroy in the same second does not overwrite the first.
	dir2 := filepath.Join(filepath.Dir(dir), "tokens")
	if err := Write(dir2, newTestDir(t)); err != nil {
		t.Fatal(err)
	}
	moved2, err := MoveAside(dir2, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if moved2 == moved {
		t.Fatal("second MoveAside reused the name")
	}
	if _, err := MoveAside(dir, testNow); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("MoveAside of a missing dir: %v", err)
	}
}

// Each corruption of the on-disk directory makes Load fail with exit code 2,
// a message naming the file, and no secret material in the message.
func TestLoadRejectsBadContent(t *testing.T) {
	other := otherKey()
	otherPEM, _ := PrivateKeyPEM(other)
	otherID := mustKeyID(t, other)

	type fixture struct {
		dir string
		td  *TokenDir
	}
	write := func(t *testing.T, path string, data []byte) {
		t.Helper()
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	editManifest := func(t *testing.T, f fixture, from, to string) {
		t.Helper()
		p := filepath.Join(f.dir, ManifestFile)
		data, _ := os.ReadFile(p)
		if !bytes.Contains(data, []byte(from)) {
			t.Fatalf("manifest has no %q", from)
		}
		write(t, p, bytes.Replace(data, []byte(from), []byte(to), 1))
	}
	var planted []string // extra secrets a case writes to disk
	cases := []struct {
		name     string
		corrupt  func(t *testing.T, f fixture)
		file     string // path relative to dir named in the message; "." = dir
		contains string
	}{
		{"manifest not JSON", func(t *testing.T, f fixture) {
			write(t, filepath.Join(f.dir, ManifestFile), []byte(`{"cluster": "dev1",`))
		}, ManifestFile, "not valid JSON"},
		{"manifest missing field", func(t *testing.T, f fixture) {
			editManifest(t, f, `"key_id"`, `"kid"`)
		}, ManifestFile, `missing field "key_id"`},
		{"manifest unknown field", func(t *testing.T, f fixture) {
			editManifest(t, f, `"cluster"`, `"extra": 1, "cluster"`)
		}, ManifestFile, `unknown field "extra"`},
		{"manifest unknown state", func(t *testing.T, f fixture) {
			editManifest(t, f, `"pending"`, `"done"`)
		}, ManifestFile, `state "done" is unknown`},
		{"manifest bad created_at", func(t *testing.T, f fixture) {
			editManifest(t, f, `"2026-01-02T03:04:05Z"`, `"yesterday"`)
		}, ManifestFile, `created_at "yesterday" is not an RFC 3339 time`},
		{"manifest missing", func(t *testing.T, f fixture) {
			os.Remove(filepath.Join(f.dir, ManifestFile))
		}, ManifestFile, "missing"},
		{"signing key missing", func(t *testing.T, f fixture) {
			os.Remove(filepath.Join(f.dir, SigningKeyFile))
		}, SigningKeyFile, "missing"},
		{"signing key unparsable", func(t *testing.T, f fixture) {
			p := filepath.Join(f.dir, SigningKeyFile)
			data, _ := os.ReadFile(p)
			write(t, p, data[:len(data)/2])
		}, SigningKeyFile, "parse private key"},
		{"key id mismatch", func(t *testing.T, f fixture) {
			write(t, filepath.Join(f.dir, SigningKeyFile), otherPEM)
		}, ManifestFile, "does not match the signing key"},
		{"token of another cluster", func(t *testing.T, f fixture) {
			tok, err := SignToken(f.td.Key, f.td.Manifest.KeyID, "prod", "default", testNow)
			if err != nil {
				t.Fatal(err)
			}
			planted = append(planted, tok)
			write(t, filepath.Join(f.dir, TokensDir, "default"), []byte(tok))
		}, filepath.Join(TokensDir, "default"), `iss claim is not "kiln:dev1"`},
		{"token of another tenant", func(t *testing.T, f fixture) {
			write(t, filepath.Join(f.dir, TokensDir, "default"), []byte(f.td.Tokens["staging"]))
		}, filepath.Join(TokensDir, "default"), `sub claim is not "default"`},
		{"token with another kid", func(t *testing.T, f fixture) {
			tok, err := SignToken(other, otherID, "dev1", "default", testNow)
			if err != nil {
				t.Fatal(err)
			}
			planted = append(planted, tok)
			write(t, filepath.Join(f.dir, TokensDir, "staging"), []byte(tok))
		}, filepath.Join(TokensDir, "staging"), "signed with key " + otherID},
		{"token tampered", func(t *testing.T, f fixture) {
			write(t, filepath.Join(f.dir, TokensDir, "default"), []byte(tamper(f.td.Tokens["default"])))
		}, filepath.Join(TokensDir, "default"), "signature does not verify"},
		{"token missing", func(t *testing.T, f fixture) {
			os.Remove(filepath.Join(f.dir, TokensDir, "staging"))
		}, filepath.Join(TokensDir, "staging"), "missing"},
		{"token not listed", func(t *testing.T, f fixture) {
			write(t, filepath.Join(f.dir, TokensDir, "ghost"), []byte(f.td.Tokens["default"]))
		}, filepath.Join(TokensDir, "ghost"), "not listed"},
		{"tokens dir missing", func(t *testing.T, f fixture) {
			os.RemoveAll(filepath.Join(f.dir, TokensDir))
		}, TokensDir, "missing"},
		{"token is a symlink", func(t *testing.T, f fixture) {
			p := filepath.Join(f.dir, TokensDir, "default")
			real := filepath.Join(filepath.Dir(f.dir), "elsewhere")
			os.Rename(p, real)
			os.Symlink(real, p)
		}, filepath.Join(TokensDir, "default"), "symbolic link"},
		{"manifest is a symlink", func(t *testing.T, f fixture) {
			p := filepath.Join(f.dir, ManifestFile)
			real := filepath.Join(filepath.Dir(f.dir), "manifest-elsewhere")
			os.Rename(p, real)
			os.Symlink(real, p)
		}, ManifestFile, "symbolic link"},
		{"token hard-linked elsewhere", func(t *testing.T, f fixture) {
			p := filepath.Join(f.dir, TokensDir, "default")
			if err := os.Link(p, filepath.Join(filepath.Dir(f.dir), "hardlink")); err != nil {
				t.Fatal(err)
			}
		}, filepath.Join(TokensDir, "default"), "2 hard links"},
		{"dir owned by another user", func(t *testing.T, f fixture) {
			chownOrSkip(t, f.dir)
		}, ".", "owned by uid 65534, not by you"},
		{"tokens dir owned by another user", func(t *testing.T, f fixture) {
			chownOrSkip(t, filepath.Join(f.dir, TokensDir))
		}, TokensDir, "owned by uid 65534"},
		{"signing key owned by another user", func(t *testing.T, f fixture) {
			chownOrSkip(t, filepath.Join(f.dir, SigningKeyFile))
		}, SigningKeyFile, "owned by uid 65534"},
		{"parent writable by others", func(t *testing.T, f fixture) {
			os.Chmod(filepath.Dir(f.dir), 0o777)
		}, ".", "writable by group or others (mode 0777)"},
		{"dir too open", func(t *testing.T, f fixture) {
			os.Chmod(f.dir, 0o755)
		}, ".", "too open"},
		{"tokens dir too open", func(t *testing.T, f fixture) {
			os.Chmod(filepath.Join(f.dir, TokensDir), 0o750)
		}, TokensDir, "too open"},
		{"manifest too open", func(t *testing.T, f fixture) {
			os.Chmod(filepath.Join(f.dir, ManifestFile), 0o644)
		}, ManifestFile, "too open"},
		{"signing key too open", func(t *testing.T, f fixture) {
			os.Chmod(filepath.Join(f.dir, SigningKeyFile), 0o640)
		}, SigningKeyFile, "chmod 600"},
		{"token too open", func(t *testing.T, f fixture) {
			os.Chmod(filepath.Join(f.dir, TokensDir, "staging"), 0o604)
		}, filepath.Join(TokensDir, "staging"), "too open"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			td := newTestDir(t)
			f := fixture{dir: writeTestDir(t, td), td: td}
			planted = nil
			c.corrupt(t, f)
			_, err := Load(f.dir)
			if err == nil {
				t.Fatal("Load accepted it")
			}
			if code := failure.Of(err); code != failure.Input {
				t.Errorf("kind %v, want input: %v", code, err)
			}
			msg := err.Error()
			if want := filepath.Join(f.dir, c.file); !strings.Contains(msg, want+":") {
				t.Errorf("message does not name %s: %s", want, msg)
			}
			if !strings.Contains(msg, c.contains) {
				t.Errorf("message does not say %q: %s", c.contains, msg)
			}
			// Everything secret that is on disk, plus what was planted.
			secrets := secretsOf(t, []*rsa.PrivateKey{td.Key, other}, append(planted, td.Tokens["default"], td.Tokens["staging"])...)
			for _, data := range snapshot(t, f.dir) {
				if len(data) > 20 {
					secrets = append(secrets, string(data))
				}
			}
			assertNoSecrets(t, msg, secrets)
		})
	}
}

func TestLoadMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nope")
	_, err := Load(dir)
	if failure.Of(err) != failure.Input || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("err = %v (kind %v)", err, failure.Of(err))
	}
}

func TestDefaultDir(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	cases := []struct {
		xdg, want string
	}{
		{"/xdg/state", "/xdg/state/kiln/aws/dev1/tokens"},
		{"", "/home/u/.local/state/kiln/aws/dev1/tokens"},
		{"relative/state", "/home/u/.local/state/kiln/aws/dev1/tokens"}, // invalid per XDG: ignored
	}
	for _, c := range cases {
		t.Setenv("XDG_STATE_HOME", c.xdg)
		got, err := DefaultDir("aws", "dev1")
		if err != nil || got != c.want {
			t.Errorf("XDG_STATE_HOME=%q: DefaultDir = %q, %v; want %q", c.xdg, got, err, c.want)
		}
	}
	for _, bad := range [][2]string{{"aws", "../x"}, {"", "dev1"}, {"aws", "a/b"}} {
		if _, err := DefaultDir(bad[0], bad[1]); failure.Of(err) != failure.Input {
			t.Errorf("DefaultDir(%q, %q): err = %v, want exit code 2", bad[0], bad[1], err)
		}
	}
}

// chownOrSkip gives path to uid/gid 65534 (nobody), as another user's
// file would be; only root can.
func chownOrSkip(t *testing.T, path string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI runs the creds tests as root, to give a file to another user")
		}
		t.Skip("needs root to give a file to another user")
	}
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
}

// A sticky parent that anyone may write to (like /tmp) cannot be used to
// replace another user's directory: it is accepted.
func TestLoadAcceptsAStickyWorldWritableParent(t *testing.T) {
	td := newTestDir(t)
	dir := writeTestDir(t, td)
	if err := os.Chmod(filepath.Dir(dir), 0o777|fs.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err != nil {
		t.Fatalf("Load refused a token dir under a sticky parent: %v", err)
	}
}

package creds

import (
	"crypto/rsa"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/kilnctl/kiln/engine/failure"
)

// exerciseStore runs Put/Get/List/Delete against s and leaves exactly one
// entry, kiln/kube/dev1 pointing at td, for callers that inspect the
// backend afterwards.
func exerciseStore(t *testing.T, s *Store, td *TokenDir) {
	t.Helper()
	a := Entry{Provider: "kube", Name: "dev1", TokenDir: td.Path, KeyID: td.Manifest.KeyID, Location: "kind-dev1"}
	b := Entry{Provider: "aws", Name: "prod", TokenDir: "/var/lib/kiln/prod/tokens", KeyID: mustKeyID(t, otherKey()), Location: "eu-west-1"}
	c := Entry{Provider: "kube", Name: "a-cluster", TokenDir: "/x/tokens", KeyID: td.Manifest.KeyID, Location: "ctx"}

	if _, ok, err := s.Get("kube", "dev1"); err != nil || ok {
		t.Fatalf("Get before Put: ok=%v err=%v", ok, err)
	}
	for _, e := range []Entry{a, b, c} {
		if err := s.Put(e); err != nil {
			t.Fatal(err)
		}
	}
	got, ok, err := s.Get("kube", "dev1")
	if err != nil || !ok || got != a {
		t.Fatalf("Get = %+v, %v, %v; want %+v", got, ok, err, a)
	}
	// Put replaces.
	a.Location = "kind-dev1-moved"
	if err := s.Put(a); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.Get("kube", "dev1"); got != a {
		t.Fatalf("after replace: %+v", got)
	}
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if want := []Entry{b, c, a}; !reflect.DeepEqual(list, want) {
		t.Fatalf("List = %+v\nwant %+v", list, want)
	}
	if err := s.Delete("kube", "dev1"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Get("kube", "dev1"); err != nil || ok {
		t.Fatalf("Get after Delete: ok=%v err=%v", ok, err)
	}
	if err := s.Delete("kube", "dev1"); err != nil {
		t.Fatalf("Delete of a missing entry: %v", err)
	}
	list, err = s.List()
	if err != nil || !reflect.DeepEqual(list, []Entry{b, c}) {
		t.Fatalf("List after Delete = %+v, %v", list, err)
	}
	// Leave a known state: only a.
	for _, e := range list {
		if err := s.Delete(e.Provider, e.Name); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(a); err != nil {
		t.Fatal(err)
	}

	// Bad input is exit code 2 and names the field.
	for _, bad := range []Entry{
		{Provider: "kube", Name: "../x", TokenDir: "/t", KeyID: a.KeyID, Location: "l"},
		{Provider: "kube", Name: "x", TokenDir: "relative/t", KeyID: a.KeyID, Location: "l"},
		{Provider: "kube", Name: "x", TokenDir: "/t", KeyID: "sha256:nope", Location: "l"},
	} {
		if err := s.Put(bad); err == nil {
			t.Errorf("Put(%+v) accepted", bad)
		}
	}
	if _, _, err := s.Get("kube", "a/b"); failure.Of(err) != failure.Input || !strings.Contains(err.Error(), "name") {
		t.Errorf("Get with a bad name: %v", err)
	}
}

func writeKeyringTestDir(t *testing.T) *TokenDir {
	t.Helper()
	td := newTestDir(t)
	writeTestDir(t, td)
	return td
}

func TestFileStore(t *testing.T) {
	t.Setenv(PassphraseEnv, "correct horse battery staple")
	fileDir := filepath.Join(t.TempDir(), "keyring")
	s, err := OpenStore(StoreOptions{Backend: BackendFile, FileDir: fileDir})
	if err != nil {
		t.Fatal(err)
	}
	if s.Backend() != BackendFile {
		t.Fatalf("Backend = %q", s.Backend())
	}
	td := writeKeyringTestDir(t)
	exerciseStore(t, s, td)

	if m := mode(t, fileDir); m != 0o700 {
		t.Errorf("keyring dir mode %04o, want 0700", m)
	}
	files := snapshot(t, fileDir)
	if len(files) != 1 {
		t.Fatalf("keyring dir holds %d files, want 1", len(files))
	}
	secrets := secretsOf(t, []*rsa.PrivateKey{td.Key}, td.Tokens["default"], td.Tokens["staging"])
	for name, data := range files {
		if name != "kiln%2Fkube%2Fdev1" {
			t.Errorf("unexpected keyring file %q", name)
		}
		assertNoSecretText(t, string(data), secrets)
		if strings.Contains(string(data), "PRIVATE KEY") {
			t.Error("keyring file holds a private key")
		}
		// The file backend encrypts the whole item, so not even the path
		// is readable.
		if strings.Contains(string(data), td.Path) {
			t.Error("keyring file holds the token dir path in clear text")
		}
	}

	// A second store on the same directory reads what the first wrote.
	s2, err := OpenStore(StoreOptions{Backend: BackendFile, FileDir: fileDir})
	if err != nil {
		t.Fatal(err)
	}
	if e, ok, err := s2.Get("kube", "dev1"); err != nil || !ok || e.TokenDir != td.Path {
		t.Fatalf("reopened Get = %+v, %v, %v", e, ok, err)
	}

	// Wrong passphrase: bad input, says so.
	t.Setenv(PassphraseEnv, "wrong")
	s3, _ := OpenStore(StoreOptions{Backend: BackendFile, FileDir: fileDir})
	if _, _, err := s3.Get("kube", "dev1"); failure.Of(err) != failure.Input || !strings.Contains(err.Error(), "wrong passphrase") {
		t.Fatalf("wrong passphrase: %v", err)
	}
}

func TestFileStorePassphraseSources(t *testing.T) {
	fileDir := filepath.Join(t.TempDir(), "keyring")
	e := Entry{Provider: "kube", Name: "dev1", TokenDir: "/t/tokens", KeyID: mustKeyID(t, testKey()), Location: "ctx"}

	// No env, no callback: a clear bad-input error naming the remedies.
	t.Setenv(PassphraseEnv, "")
	s, err := OpenStore(StoreOptions{Backend: BackendFile, FileDir: fileDir})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Put(e)
	if failure.Of(err) != failure.Input || !strings.Contains(err.Error(), PassphraseEnv) || !strings.Contains(err.Error(), "--keyring-backend") {
		t.Fatalf("no passphrase: %v", err)
	}

	// The callback is asked once per store, and only when needed.
	calls := 0
	ask := func(prompt string) (string, error) {
		calls++
		if !strings.Contains(prompt, fileDir) {
			t.Errorf("prompt %q does not name the keyring directory", prompt)
		}
		return "from-prompt", nil
	}
	s, err = OpenStore(StoreOptions{Backend: BackendFile, FileDir: fileDir, Passphrase: ask})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Get("kube", "dev1"); err != nil || ok || calls != 0 {
		t.Fatalf("Get of a missing entry prompted (%d) or failed: %v", calls, err)
	}
	if err := s.Put(e); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := s.Get("kube", "dev1"); err != nil || !ok || got != e {
		t.Fatalf("Get = %+v, %v, %v", got, ok, err)
	}
	if calls != 1 {
		t.Fatalf("passphrase asked %d times, want 1", calls)
	}

	// The environment wins over the callback.
	t.Setenv(PassphraseEnv, "from-prompt")
	s, _ = OpenStore(StoreOptions{Backend: BackendFile, FileDir: fileDir, Passphrase: func(string) (string, error) {
		return "", errors.New("must not be called")
	}})
	if _, ok, err := s.Get("kube", "dev1"); err != nil || !ok {
		t.Fatalf("Get with env passphrase: %v, %v", ok, err)
	}
}

func TestOpenStoreBadBackend(t *testing.T) {
	cases := []string{"gnome", "KEYCHAIN", "pass"}
	if runtime.GOOS != "darwin" {
		cases = append(cases, BackendKeychain)
	}
	if runtime.GOOS != "windows" {
		cases = append(cases, BackendWinCred)
	}
	for _, b := range cases {
		_, err := OpenStore(StoreOptions{Backend: b, FileDir: t.TempDir()})
		if failure.Of(err) != failure.Input || !strings.Contains(err.Error(), "--keyring-backend") {
			t.Errorf("backend %q: err = %v, want exit 2 naming --keyring-backend", b, err)
		}
	}
}

func TestOpenStoreAutoWithoutSecretService(t *testing.T) {
	if os.Getenv("KILN_TEST_SECRET_SERVICE") != "" {
		t.Skip("a Secret Service is running (see TestSecretServiceStore)")
	}
	if runtime.GOOS != "linux" {
		t.Skip("auto picks the OS keyring on " + runtime.GOOS)
	}
	t.Setenv(PassphraseEnv, "p")
	dir := filepath.Join(t.TempDir(), "keyring")
	s, err := OpenStore(StoreOptions{Backend: BackendAuto, FileDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if s.Backend() != BackendFile || !strings.Contains(s.Reason(), dir) {
		t.Fatalf("auto chose %q (%s), want the file backend at %s", s.Backend(), s.Reason(), dir)
	}
}

func TestDefaultKeyringDir(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	t.Setenv("XDG_DATA_HOME", "/xdg/data")
	if got, err := DefaultKeyringDir(); err != nil || got != "/xdg/data/kiln/keyring" {
		t.Errorf("DefaultKeyringDir = %q, %v", got, err)
	}
	t.Setenv("XDG_DATA_HOME", "")
	if got, err := DefaultKeyringDir(); err != nil || got != "/home/u/.local/share/kiln/keyring" {
		t.Errorf("DefaultKeyringDir = %q, %v", got, err)
	}
}

package creds

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The AWS account is an optional manifest field: written when set, absent
// otherwise, and a directory written before kiln recorded it loads as it
// did; a value that is not an account id is refused, naming the field.
func TestManifestAccountIsOptional(t *testing.T) {
	td := newTestDir(t)
	dir := writeTestDir(t, td)
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), `"account"`) {
		t.Errorf("a manifest without an account names one:\n%s", data)
	}
	if got, err := Load(dir); err != nil || got.Manifest.Account != "" {
		t.Fatalf("load without account: %v %+v", err, got)
	}

	td.Manifest.Account = "123456789012"
	if err := Write(dir, td); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil || got.Manifest.Account != "123456789012" {
		t.Fatalf("load with account: %v %+v", err, got)
	}

	for _, bad := range []string{"12345", "12345678901x"} {
		m := strings.Replace(string(mustRead(t, filepath.Join(dir, ManifestFile))), `"123456789012"`, `"`+bad+`"`, 1)
		if _, err := parseManifest([]byte(m)); err == nil || !strings.Contains(err.Error(), "account") {
			t.Errorf("account %q: want an error naming account, got %v", bad, err)
		}
	}
}

// MoveAsideAs keeps the directory's mode and names the reason.
func TestMoveAsideAsKeepsMode(t *testing.T) {
	td := newTestDir(t)
	dir := writeTestDir(t, td)
	aside, err := MoveAsideAs(dir, "foreign", td.Manifest.CreatedAt)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(aside), filepath.Base(dir)+".foreign-") {
		t.Errorf("moved to %s", aside)
	}
	if got := mode(t, aside); got != 0o700 {
		t.Errorf("%s: mode %04o, want 0700", aside, got)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still there: %v", dir, err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

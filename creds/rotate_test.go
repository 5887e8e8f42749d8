package creds

import (
	"os"
	"testing"
)

func TestPreviousKeyRoundTripAndRotationStaging(t *testing.T) {
	td := newTestDir(t)
	dir := writeTestDir(t, td)
	if got, err := LoadRotation(dir); err != nil || got != nil {
		t.Fatalf("LoadRotation without one = %v, %v", got, err)
	}
	key, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	next, err := NewTokenDir("dev1", "kube", "kind-dev1", key, td.Manifest.Tenants, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(RotationPath(dir), next); err != nil {
		t.Fatal(err)
	}
	staged, err := LoadRotation(dir)
	if err != nil || staged == nil || staged.Manifest.KeyID != next.Manifest.KeyID {
		t.Fatalf("LoadRotation = %v, %v", staged, err)
	}
	// The swap: the new key, the old one kept as previous.
	staged.Previous = td.Key
	if err := Write(dir, staged); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Manifest.KeyID != next.Manifest.KeyID || got.Previous == nil || !got.Previous.Equal(td.Key) {
		t.Fatalf("after swap: key %s, previous kept %v", got.Manifest.KeyID, got.Previous != nil)
	}
	if fi, err := os.Stat(dir + "/" + PreviousKeyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("previous key file: %v %v", fi, err)
	}
	if err := DiscardRotation(dir); err != nil {
		t.Fatal(err)
	}
	if got, err := LoadRotation(dir); err != nil || got != nil {
		t.Fatalf("LoadRotation after discard = %v, %v", got, err)
	}
	// The end: the previous key dropped.
	got.Previous = nil
	if err := Write(dir, got); err != nil {
		t.Fatal(err)
	}
	if got, err = Load(dir); err != nil || got.Previous != nil {
		t.Fatalf("previous key still there: %v", err)
	}
}

func TestRemoveTenants(t *testing.T) {
	dir := writeTestDir(t, newTestDir(t, "default", "staging"))
	td, err := RemoveTenants(dir, []string{"staging"})
	if err != nil {
		t.Fatal(err)
	}
	if td.Manifest.HasTenant("staging") || len(td.Tokens) != 1 {
		t.Fatalf("tenants %v, %d tokens", td.Manifest.Tenants, len(td.Tokens))
	}
	if got, err := Load(dir); err != nil || len(got.Tokens) != 1 || got.Manifest.Tenants[0] != "default" {
		t.Fatalf("reloaded: %v", err)
	}
	if _, err := RemoveTenants(dir, []string{"default"}); err == nil {
		t.Fatal("removing the last tenant succeeded")
	}
}

//go:build linux

package creds

import (
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/99designs/keyring"
	"github.com/godbus/dbus"
)

// The Secret Service tests talk to a real gnome-keyring. Run them with
//
//	hack/with-secret-service.sh env KILN_TEST_SECRET_SERVICE=1 go test ./creds/ -run SecretService -v
//
// which starts a private session bus and an unlocked daemon whose keyring
// lives in a temp dir.
func requireSecretService(t *testing.T) {
	t.Helper()
	if os.Getenv("KILN_TEST_SECRET_SERVICE") != "1" {
		t.Skip("set KILN_TEST_SECRET_SERVICE=1 and run under hack/with-secret-service.sh to test against a real Secret Service")
	}
}

// secretOf reads the stored secret of the item whose "profile" attribute is
// key straight from the Secret Service, bypassing the keyring library, and
// returns it with the item's object path.
func secretOf(t *testing.T, key string) (dbus.ObjectPath, []byte) {
	t.Helper()
	conn, err := dbus.SessionBus()
	if err != nil {
		t.Fatal(err)
	}
	svc := conn.Object(ssName, ssPath)
	var out dbus.Variant
	var session dbus.ObjectPath
	if err := svc.Call(ssService+".OpenSession", 0, "plain", dbus.MakeVariant("")).Store(&out, &session); err != nil {
		t.Fatal(err)
	}
	var unlocked, locked []dbus.ObjectPath
	if err := svc.Call(ssService+".SearchItems", 0, map[string]string{"profile": key}).Store(&unlocked, &locked); err != nil {
		t.Fatal(err)
	}
	if len(unlocked) != 1 || len(locked) != 0 {
		t.Fatalf("items for %s: unlocked %v, locked %v; want one unlocked", key, unlocked, locked)
	}
	var secret struct {
		Session     dbus.ObjectPath
		Params      []byte
		Value       []byte
		ContentType string
	}
	if err := conn.Object(ssName, unlocked[0]).Call("org.freedesktop.Secret.Item.GetSecret", 0, session).Store(&secret); err != nil {
		t.Fatal(err)
	}
	return unlocked[0], secret.Value
}

func TestSecretServiceStore(t *testing.T) {
	requireSecretService(t)
	t.Setenv(PassphraseEnv, "") // auto must not need it

	auto, err := OpenStore(StoreOptions{Backend: BackendAuto})
	if err != nil {
		t.Fatal(err)
	}
	if auto.Backend() != BackendSecretService {
		t.Fatalf("auto chose %q (%s), want secret-service", auto.Backend(), auto.Reason())
	}

	s, err := OpenStore(StoreOptions{Backend: BackendSecretService})
	if err != nil {
		t.Fatal(err)
	}
	if s.Backend() != BackendSecretService {
		t.Fatalf("Backend = %q", s.Backend())
	}
	t.Logf("store: %s", s.Reason())

	// Another application's item in the same collection is not listed.
	other, err := keyring.Open(keyring.Config{
		AllowedBackends:         []keyring.BackendType{keyring.SecretServiceBackend},
		ServiceName:             "other-app",
		LibSecretCollectionName: "login",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Set(keyring.Item{Key: "other-app/thing", Data: []byte("x"), Label: "other-app/thing"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Remove("other-app/thing") })

	td := writeKeyringTestDir(t)
	exerciseStore(t, s, td) // leaves kiln/kube/dev1

	// What the daemon holds is the JSON of the contract and nothing secret.
	path, value := secretOf(t, "kiln/kube/dev1")
	if !strings.HasPrefix(string(path), ssCollPrefix+"login/") {
		t.Errorf("item %s is not in the default (login) collection", path)
	}
	// The library stores the JSON of its whole Item, our value base64'd in
	// Data.
	var item keyring.Item
	if err := json.Unmarshal(value, &item); err != nil {
		t.Fatalf("stored secret is not a keyring item: %v", err)
	}
	secrets := secretsOf(t, []*rsa.PrivateKey{td.Key}, td.Tokens["default"], td.Tokens["staging"])
	assertNoSecretText(t, string(value), secrets)
	assertNoSecrets(t, string(item.Data), secrets)
	want := fmt.Sprintf(`{"token_dir":%q,"key_id":%q,"location":"kind-dev1-moved"}`, td.Path, td.Manifest.KeyID)
	if string(item.Data) != want {
		t.Errorf("stored value = %s\nwant %s", item.Data, want)
	}

	// A second store (a later kiln run) sees the entry.
	s2, err := OpenStore(StoreOptions{Backend: BackendSecretService})
	if err != nil {
		t.Fatal(err)
	}
	if e, ok, err := s2.Get("kube", "dev1"); err != nil || !ok || e.TokenDir != td.Path {
		t.Fatalf("Get from a new store = %+v, %v, %v", e, ok, err)
	}
	if err := s2.Delete("kube", "dev1"); err != nil {
		t.Fatal(err)
	}
	if list, err := s.List(); err != nil || len(list) != 0 {
		t.Fatalf("List after deleting everything = %+v, %v", list, err)
	}
}

// A locked default collection cannot be unlocked without a display: kiln
// must fail promptly with a clear error (explicit backend) or fall back to
// the file keyring (auto), never hang on the prompt.
func TestSecretServiceLockedCollection(t *testing.T) {
	requireSecretService(t)
	conn, err := dbus.SessionBus()
	if err != nil {
		t.Fatal(err)
	}
	login := dbus.ObjectPath(ssCollPrefix + "login")
	var lockedObjs []dbus.ObjectPath
	var prompt dbus.ObjectPath
	if err := conn.Object(ssName, ssPath).Call(ssService+".Lock", 0, []dbus.ObjectPath{login}).Store(&lockedObjs, &prompt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unlockWithEmptyPassword(t, conn, login) })

	start := time.Now()
	_, err = OpenStore(StoreOptions{Backend: BackendSecretService})
	if err == nil {
		t.Fatal("opened a locked collection without a prompt")
	}
	t.Logf("explicit secret-service, locked: %v", err)
	if !strings.Contains(err.Error(), "unlock") || !strings.Contains(err.Error(), `"login"`) {
		t.Errorf("error does not explain the locked collection: %v", err)
	}
	if d := time.Since(start); d > unlockTimeout/2 {
		t.Errorf("took %s to give up", d)
	}

	t.Setenv(PassphraseEnv, "p")
	dir := filepath.Join(t.TempDir(), "keyring")
	s, err := OpenStore(StoreOptions{Backend: BackendAuto, FileDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if s.Backend() != BackendFile || !strings.Contains(s.Reason(), "Secret Service not usable") {
		t.Fatalf("auto with a locked collection: %s (%s), want file with a reason", s.Backend(), s.Reason())
	}
}

// unlockWithEmptyPassword unlocks a gnome-keyring collection created by
// hack/with-secret-service.sh, whose password is the "\n" it pipes in
// (gnome-keyring-daemon --unlock does not strip the newline), through
// gnome-keyring's private interface, which needs no prompt.
func unlockWithEmptyPassword(t *testing.T, conn *dbus.Conn, coll dbus.ObjectPath) {
	t.Helper()
	var out dbus.Variant
	var session dbus.ObjectPath
	svc := conn.Object(ssName, ssPath)
	if err := svc.Call(ssService+".OpenSession", 0, "plain", dbus.MakeVariant("")).Store(&out, &session); err != nil {
		t.Error(err)
		return
	}
	secret := struct {
		Session     dbus.ObjectPath
		Params      []byte
		Value       []byte
		ContentType string
	}{session, []byte{}, []byte("\n"), "text/plain"}
	const iface = "org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface"
	if err := svc.Call(iface+".UnlockWithMasterPassword", 0, coll, secret).Err; err != nil {
		t.Errorf("unlock %s again: %v", coll, err)
	}
}

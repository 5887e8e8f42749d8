package creds

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/99designs/keyring"

	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/input"
)

// The keyring remembers which token directory belongs to which cluster
// (DESIGN.md §6). It holds locations and key ids only, never a token or a
// key: the keyring is a hint, and every directory it names is checked
// against the keys the cluster trusts before use.

// KeyringService is the service name of kiln's keyring items.
const KeyringService = "kiln"

// PassphraseEnv holds the passphrase of the encrypted file keyring, for
// automation that has no OS keyring and no terminal.
const PassphraseEnv = "KILN_KEYRING_PASSPHRASE"

// Keyring backend names, as accepted by --keyring-backend.
const (
	BackendAuto          = "auto"
	BackendSecretService = "secret-service"
	BackendKeychain      = "keychain"
	BackendWinCred       = "wincred"
	BackendFile          = "file"
)

// Backends lists the names OpenStore accepts, for flag help.
var Backends = []string{BackendAuto, BackendSecretService, BackendKeychain, BackendWinCred, BackendFile}

const itemPrefix = "kiln/"

// opTimeout bounds one keyring operation. The Secret Service backend waits
// for prompt answers without a deadline (an unlock dialog nobody answers);
// a CLI must fail instead of hanging.
const opTimeout = 30 * time.Second

// Entry says where the token directory of cluster PROVIDER/NAME is.
type Entry struct {
	Provider string
	Name     string
	TokenDir string
	KeyID    string
	Location string
}

// entryValue is the stored JSON of an Entry (contract).
type entryValue struct {
	TokenDir string `json:"token_dir"`
	KeyID    string `json:"key_id"`
	Location string `json:"location"`
}

// StoreOptions configures OpenStore.
type StoreOptions struct {
	// Backend is one of Backends; "" means auto.
	Backend string
	// FileDir is where the file backend keeps its items; default
	// DefaultKeyringDir().
	FileDir string
	// Passphrase asks for the file backend's passphrase when
	// KILN_KEYRING_PASSPHRASE is unset (the CLI passes a terminal prompt).
	// It is called at most once, on first use.
	Passphrase func(prompt string) (string, error)
	// EnvPassphrase is KILN_KEYRING_PASSPHRASE as the process started
	// with it: the CLI takes it out of the environment at start (see
	// TakeEnvPassphrase), so no child process — a kubeconfig credential
	// plugin run during discovery — inherits it.
	EnvPassphrase string
}

// TakeEnvPassphrase returns KILN_KEYRING_PASSPHRASE and removes it from the
// process environment, so that nothing kiln starts afterwards inherits it.
func TakeEnvPassphrase() string {
	p := os.Getenv(PassphraseEnv)
	_ = os.Unsetenv(PassphraseEnv)
	return p
}

// Store is kiln's view of the OS keyring (or of the encrypted file that
// replaces it).
type Store struct {
	ring    keyring.Keyring
	backend string
	reason  string
}

// OpenStore opens the keyring backend opts.Backend names. auto uses the OS
// keyring when one is usable (Keychain on macOS, Credential Manager on
// Windows, a running Secret Service with an unlocked default collection on
// Linux) and otherwise the encrypted file backend; Reason says why.
func OpenStore(opts StoreOptions) (*Store, error) {
	switch opts.Backend {
	case "", BackendAuto:
		return openAuto(opts)
	case BackendSecretService:
		if !backendLinked(keyring.SecretServiceBackend) {
			return nil, input.New(failure.Input, input.KeyringBackend, opts.Backend, "{input} %s: not available: %s", opts.Backend, secretServiceMissing())
		}
		return openSecretService(opts, true)
	case BackendKeychain:
		return openOSKeyring(opts, keyring.KeychainBackend)
	case BackendWinCred:
		return openOSKeyring(opts, keyring.WinCredBackend)
	case BackendFile:
		return openFile(opts, "")
	default:
		return nil, input.New(failure.Input, input.KeyringBackend, opts.Backend, "{input}: unknown backend %q (want one of %s)", opts.Backend, strings.Join(Backends, ", "))
	}
}

func openAuto(opts StoreOptions) (*Store, error) {
	switch runtime.GOOS {
	case "darwin":
		if backendLinked(keyring.KeychainBackend) {
			return openOSKeyring(opts, keyring.KeychainBackend)
		}
	case "windows":
		if backendLinked(keyring.WinCredBackend) {
			return openOSKeyring(opts, keyring.WinCredBackend)
		}
	}
	if !backendLinked(keyring.SecretServiceBackend) {
		return openFile(opts, "no OS keyring: "+secretServiceMissing())
	}
	s, err := openSecretService(opts, false)
	if err != nil {
		// The Secret Service is there but unusable (no default collection,
		// locked and the unlock prompt was dismissed, not running). The
		// keyring is only a hint, so fall back rather than fail, and say why.
		return openFile(opts, "Secret Service not usable: "+err.Error())
	}
	return s, nil
}

func openOSKeyring(opts StoreOptions, kind keyring.BackendType) (*Store, error) {
	if !backendLinked(kind) {
		return nil, input.New(failure.Input, input.KeyringBackend, string(kind), "{input} %s: not available on %s", kind, runtime.GOOS)
	}
	ring, err := openRing(kind, keyring.Config{
		// Without this macOS asks for permission on every kiln run.
		KeychainTrustApplication: true,
	})
	if err != nil {
		return nil, err
	}
	return &Store{ring: ring, backend: string(kind)}, nil
}

// openRing is the one place kiln opens a keyring library backend: kind
// alone, under kiln's service name, with cfg's backend-specific settings.
func openRing(kind keyring.BackendType, cfg keyring.Config) (keyring.Keyring, error) {
	cfg.AllowedBackends = []keyring.BackendType{kind}
	cfg.ServiceName = KeyringService
	ring, err := keyring.Open(cfg)
	if err != nil {
		return nil, fmt.Errorf("open keyring backend %s: %w", kind, err)
	}
	return ring, nil
}

func openSecretService(opts StoreOptions, explicit bool) (*Store, error) {
	collection, err := secretServiceCollection(explicit)
	if err != nil {
		return nil, fmt.Errorf("open keyring backend %s: %w", BackendSecretService, err)
	}
	ring, err := openRing(keyring.SecretServiceBackend, keyring.Config{
		// The default collection ("login" on desktops). Left empty, the
		// library would use a collection named after the service and try
		// to create it, which needs a password prompt (see
		// secretservice_linux.go).
		LibSecretCollectionName: collection,
	})
	if err != nil {
		return nil, err
	}
	return &Store{ring: ring, backend: BackendSecretService,
		reason: fmt.Sprintf("Secret Service collection %q", collection)}, nil
}

func openFile(opts StoreOptions, fallback string) (*Store, error) {
	dir := opts.FileDir
	if dir == "" {
		var err error
		if dir, err = DefaultKeyringDir(); err != nil {
			return nil, fmt.Errorf("open keyring backend file: %w", err)
		}
	}
	dir = filepath.Clean(dir)
	if err := mkdirAllSync(dir, dirPerm); err != nil {
		return nil, fmt.Errorf("open keyring backend file: %w", err)
	}
	ring, err := openRing(keyring.FileBackend, keyring.Config{
		FileDir:          dir,
		FilePasswordFunc: filePassphrase(dir, opts.EnvPassphrase, opts.Passphrase),
	})
	if err != nil {
		return nil, err
	}
	reason := "encrypted file keyring at " + dir
	if fallback != "" {
		reason = fallback + "; using the " + reason
	}
	return &Store{ring: ring, backend: BackendFile, reason: reason}, nil
}

// filePassphrase returns the file backend's passphrase source: the
// environment first (automation), then the caller's prompt.
func filePassphrase(dir, taken string, ask func(string) (string, error)) keyring.PromptFunc {
	return func(prompt string) (string, error) {
		if taken != "" {
			return taken, nil
		}
		if p := os.Getenv(PassphraseEnv); p != "" {
			return p, nil
		}
		if ask == nil {
			return "", input.New(failure.Input, input.KeyringBackend, dir, "the file keyring at %s needs a passphrase: set %s or choose another {input:keyring-backend}", dir, PassphraseEnv)
		}
		p, err := ask(prompt)
		if err != nil {
			return "", fmt.Errorf("read keyring passphrase: %w", err)
		}
		if p == "" {
			return "", failure.BadInput("the file keyring at %s needs a non-empty passphrase (or set %s)", dir, PassphraseEnv)
		}
		return p, nil
	}
}

func backendLinked(kind keyring.BackendType) bool {
	return slices.Contains(keyring.AvailableBackends(), kind)
}

// Backend returns the backend in use: "secret-service", "keychain",
// "wincred" or "file".
func (s *Store) Backend() string { return s.backend }

// Reason says where entries are kept and, when auto fell back to the file
// backend, why the OS keyring was not used. It is meant for a log line.
func (s *Store) Reason() string { return s.reason }

func itemKey(provider, name string) string { return itemPrefix + provider + "/" + name }

// parseItemKey splits "kiln/PROVIDER/NAME"; ok is false for anything else,
// including other applications' items in a shared collection.
func parseItemKey(key string) (provider, name string, ok bool) {
	rest, found := strings.CutPrefix(key, itemPrefix)
	if !found {
		return "", "", false
	}
	provider, name, found = strings.Cut(rest, "/")
	if !found || checkName("provider", provider) != nil || checkName("name", name) != nil {
		return "", "", false
	}
	return provider, name, true
}

func checkEntryNames(op, provider, name string) error {
	if err := checkName("provider", provider); err != nil {
		return failure.BadInput("%s: %w", op, err)
	}
	if err := checkName("name", name); err != nil {
		return failure.BadInput("%s: %w", op, err)
	}
	return nil
}

// Get returns the entry of cluster PROVIDER/NAME; ok is false when there is
// none.
func (s *Store) Get(provider, name string) (Entry, bool, error) {
	op := fmt.Sprintf("keyring get %s (%s)", itemKey(provider, name), s.backend)
	if err := checkEntryNames(op, provider, name); err != nil {
		return Entry{}, false, err
	}
	var item keyring.Item
	err := s.do(func() (err error) {
		item, err = s.ring.Get(itemKey(provider, name))
		return err
	})
	if errors.Is(err, keyring.ErrKeyNotFound) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, s.opError(op, err)
	}
	e, err := decodeEntry(provider, name, item.Data)
	if err != nil {
		return Entry{}, false, fmt.Errorf("%s: %w", op, err)
	}
	return e, true, nil
}

// Put stores e, replacing an entry of the same cluster.
func (s *Store) Put(e Entry) error {
	op := fmt.Sprintf("keyring put %s (%s)", itemKey(e.Provider, e.Name), s.backend)
	if err := checkEntryNames(op, e.Provider, e.Name); err != nil {
		return err
	}
	if err := e.validate(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	data, err := json.Marshal(entryValue{TokenDir: e.TokenDir, KeyID: e.KeyID, Location: e.Location})
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	key := itemKey(e.Provider, e.Name)
	item := keyring.Item{
		Key:         key,
		Data:        data,
		Label:       key,
		Description: "kiln token directory location (no secrets)",
	}
	if err := s.do(func() error { return s.ring.Set(item) }); err != nil {
		return s.opError(op, err)
	}
	return nil
}

// Delete removes the entry of cluster PROVIDER/NAME; a missing entry is not
// an error.
func (s *Store) Delete(provider, name string) error {
	op := fmt.Sprintf("keyring delete %s (%s)", itemKey(provider, name), s.backend)
	if err := checkEntryNames(op, provider, name); err != nil {
		return err
	}
	err := s.do(func() error { return s.ring.Remove(itemKey(provider, name)) })
	// The file backend reports a missing item as a missing file.
	if err == nil || errors.Is(err, keyring.ErrKeyNotFound) || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return s.opError(op, err)
}

// List returns every kiln entry, sorted by provider then name.
func (s *Store) List() ([]Entry, error) {
	op := fmt.Sprintf("keyring list (%s)", s.backend)
	var keys []string
	err := s.do(func() (err error) {
		keys, err = s.ring.Keys()
		return err
	})
	if err != nil {
		return nil, s.opError(op, err)
	}
	var out []Entry
	for _, k := range keys {
		provider, name, ok := parseItemKey(k)
		if !ok {
			continue
		}
		e, found, err := s.Get(provider, name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		if found { // deleted since Keys: skip
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int {
		return strings.Compare(a.Provider+"/"+a.Name, b.Provider+"/"+b.Name)
	})
	return slices.CompactFunc(out, func(a, b Entry) bool { // one item per key
		return a.Provider == b.Provider && a.Name == b.Name
	}), nil
}

func (e Entry) validate() error {
	switch {
	case e.TokenDir == "":
		return errors.New("token_dir is empty")
	case !filepath.IsAbs(e.TokenDir):
		// The keyring outlives the working directory it was written from.
		return fmt.Errorf("token_dir %q is not an absolute path", e.TokenDir)
	case !ValidKeyID(e.KeyID):
		return fmt.Errorf("key_id %q is not sha256:<64 lowercase hex digits>", e.KeyID)
	case e.Location == "":
		return errors.New("location is empty")
	}
	return nil
}

func decodeEntry(provider, name string, data []byte) (Entry, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var v entryValue
	if err := dec.Decode(&v); err != nil {
		return Entry{}, fmt.Errorf("stored value is not valid: %w", err)
	}
	e := Entry{Provider: provider, Name: name, TokenDir: v.TokenDir, KeyID: v.KeyID, Location: v.Location}
	if err := e.validate(); err != nil {
		return Entry{}, fmt.Errorf("stored value is not valid: %w", err)
	}
	return e, nil
}

// do runs one backend operation with a deadline (see opTimeout). On timeout
// the operation's goroutine is abandoned; it is blocked on D-Bus and holds
// nothing kiln needs.
func (s *Store) do(op func() error) error {
	done := make(chan error, 1)
	go func() { done <- op() }()
	timer := time.NewTimer(opTimeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		return fmt.Errorf("no answer from the keyring after %s (is an unlock prompt waiting?)", opTimeout)
	}
}

// opError adds a hint for the failures people actually hit.
func (s *Store) opError(op string, err error) error {
	if failure.Of(err) != failure.Failed {
		return fmt.Errorf("%s: %w", op, err) // already classified (passphrase missing)
	}
	if s.backend == BackendFile && strings.Contains(err.Error(), "integrity check failed") {
		return failure.BadInput("%s: cannot decrypt the item: wrong passphrase (%s)?", op, PassphraseEnv)
	}
	return fmt.Errorf("%s: %w", op, err)
}

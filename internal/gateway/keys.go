package gateway

import (
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/kilnctl/kiln/creds"
)

// KeysFile is the file of the mounted kiln-auth ConfigMap the gateway
// reads (the ConfigMap's key keys.json, DESIGN.md §5).
const KeysFile = "keys.json"

// TenantsFile is the tenant table beside it (creds.TenantsFile): which
// token ids of which tenants are current, and the platform id every token
// must carry as aud. Absent on a platform no kiln with tables has touched.
const TenantsFile = creds.TenantsFile

// maxCached bounds the verified-token cache of one key set. Past it, new
// tokens are verified every time rather than evicting: the cache only
// saves CPU, and an unbounded one would be memory an attacker could fill
// with valid tokens of their own tenant.
const maxCached = 10000

// MinKeyBits is the shortest RSA key the gateway trusts.
const MinKeyBits = 2048

// keySet is one version of keys.json, parsed, with the tokens verified
// against it. A reload builds a new keySet, so a token verified against
// an old set (perhaps with a key removed since) is never accepted from the
// cache of the new one.
type keySet struct {
	keys map[string]*rsa.PublicKey
	ids  []string
	// v is the verifier over keys and the tenant table (creds.Verifier,
	// the same rules kiln's own token checks use).
	v *creds.Verifier

	mu    sync.RWMutex
	cache map[[sha256.Size]byte]string // SHA-256 of the token -> tenant
}

func newKeySet(keys map[string]*rsa.PublicKey, table *creds.TenantTable, cluster string) *keySet {
	ids := make([]string, 0, len(keys))
	for id := range keys {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	v := &creds.Verifier{Keys: keys, Table: table, Cluster: cluster}
	return &keySet{keys: keys, ids: ids, v: v, cache: map[[sha256.Size]byte]string{}}
}

// verify returns the tenant token names when it verifies against the set.
// The cache is keyed by a hash of the whole token, not its signature
// segment alone: the signature covers header and payload, but a lookup by
// signature would accept any payload pasted in front of a cached one.
// verifyBytes is verify of a token still in a read buffer: a token in the
// cache costs no copy; one that is not is copied once, for the verifier.
func (s *keySet) verifyBytes(token []byte) (string, error) {
	sum := sha256.Sum256(token)
	s.mu.RLock()
	tenant, ok := s.cache[sum]
	s.mu.RUnlock()
	if ok {
		return tenant, nil
	}
	return s.verify(string(token))
}

func (s *keySet) verify(token string) (string, error) {
	// Hashed in place: Sum256 neither keeps nor changes its argument, and
	// a copy of the token per request was the cache's one allocation.
	sum := sha256.Sum256(unsafe.Slice(unsafe.StringData(token), len(token)))
	s.mu.RLock()
	tenant, ok := s.cache[sum]
	s.mu.RUnlock()
	if ok {
		return tenant, nil
	}
	tenant, _, err := s.v.Verify(token)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	if len(s.cache) < maxCached {
		s.cache[sum] = tenant
	}
	s.mu.Unlock()
	return tenant, nil
}

// keyStore holds the current key set and keeps it in step with the file.
//
// kubelet updates a ConfigMap volume atomically: the files are written to
// a new timestamped directory, a `..data` symlink is swapped to it with a
// rename, and keys.json itself is a symlink through `..data`. Watching
// keys.json's inode would miss that swap, so the store watches the
// directory (fsnotify: the rename shows up as an event there) and reads
// keys.json through its symlinks on every event, and also polls every
// interval as a safety net for filesystems that deliver no events. A
// reload happens only when the bytes changed.
type keyStore struct {
	dir      string
	cluster  string
	interval time.Duration
	log      *slog.Logger
	metrics  *metrics

	cur atomic.Pointer[keySet]
	// broken: the last read of keys.json failed; the gateway is not
	// ready until a read succeeds (the Service stops sending it traffic
	// while its keys may lag behind kiln-auth: a key removed there may
	// still be in the set in force).
	broken atomic.Bool
	// Loader goroutine only: the last bytes parsed and the last failure.
	digest  [sha256.Size]byte
	seen    bool
	lastErr string
	// hadTable: a tenant table was loaded. From then on a tenants.json
	// that disappears is a failed load, not a return to accepting
	// legacy tokens (which removed tenants may still hold).
	hadTable bool
}

func newKeyStore(dir, cluster string, interval time.Duration, log *slog.Logger, m *metrics) *keyStore {
	return &keyStore{dir: dir, cluster: cluster, interval: interval, log: log, metrics: m}
}

// current is the key set in force, nil before the first good load.
func (k *keyStore) current() *keySet { return k.cur.Load() }

// load reads keys.json and swaps the key set if the file changed. A file
// that cannot be read or parsed keeps the set in force: a half-written or
// broken ConfigMap must not revoke every token, and kubelet's swap never
// shows a half-written file.
func (k *keyStore) load() {
	// Both files from one version of the volume: with kubelet's layout
	// ..data is resolved and both are read from its target, so a swap
	// between the two reads cannot pair one version's keys with another's
	// table; if ..data moved meanwhile (kubelet removes the old version's
	// directory right after the swap), they are read again.
	var data, tdata []byte
	var err, terr error
	path, tpath := filepath.Join(k.dir, KeysFile), filepath.Join(k.dir, TenantsFile)
	for range 3 {
		dir := k.dataDir()
		data, err = os.ReadFile(filepath.Join(dir, KeysFile))
		tdata, terr = os.ReadFile(filepath.Join(dir, TenantsFile))
		if k.dataDir() == dir {
			break
		}
	}
	if err != nil {
		k.fail(fmt.Errorf("read %s: %w", path, err))
		return
	}
	err = terr
	switch {
	case errors.Is(err, fs.ErrNotExist) && !k.hadTable:
		tdata = nil // no table: legacy tokens only
	case errors.Is(err, fs.ErrNotExist):
		k.fail(fmt.Errorf("%s is gone, but a tenant table was loaded before: keeping it", tpath))
		return
	case err != nil:
		k.fail(fmt.Errorf("read %s: %w", tpath, err))
		return
	}
	h := sha256.New()
	h.Write(data)
	h.Write([]byte{0})
	h.Write(tdata)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	if k.seen && sum == k.digest {
		return
	}
	k.seen, k.digest = true, sum
	keys, err := creds.ParseTrustedKeys(data)
	if err != nil {
		k.fail(fmt.Errorf("%s: %w", path, err))
		return
	}
	var table *creds.TenantTable
	if tdata != nil {
		if table, err = creds.ParseTenantTable(tdata); err != nil {
			k.fail(fmt.Errorf("%s: %w", tpath, err))
			return
		}
		k.hadTable = true
	}
	for id, pub := range keys {
		if pub.N.BitLen() < MinKeyBits {
			// A key too weak to trust is left out, said once per load.
			k.log.Error("key refused: RSA key shorter than the minimum", "key_id", id, "bits", pub.N.BitLen(), "min_bits", MinKeyBits)
			delete(keys, id)
		}
	}
	k.lastErr = ""
	k.broken.Store(false)
	set := newKeySet(keys, table, k.cluster)
	k.cur.Store(set)
	k.metrics.keyReload(true, len(keys))
	if table != nil {
		k.log.Info("keys loaded", "file", path, "key_ids", set.ids, "tenant_table", true, "tenants", len(table.Tenants), "legacy_tokens", table.Legacy)
	} else {
		k.log.Info("keys loaded", "file", path, "key_ids", set.ids, "tenant_table", false)
	}
}

// fail counts and logs a failed load once per distinct failure (the poll
// would otherwise repeat it every interval).
func (k *keyStore) fail(err error) {
	k.broken.Store(true)
	if err.Error() == k.lastErr {
		return
	}
	k.lastErr = err.Error()
	k.metrics.keyReload(false, -1)
	k.log.Error("keys not loaded; the keys in force stay, and the gateway is not ready until keys.json reads again", "error", k.lastErr)
}

// dataDir is the directory holding the files of the volume's current
// version: ..data resolved when the directory has kubelet's layout, else
// the directory itself (local mode, plain files).
func (k *keyStore) dataDir() string {
	target, err := os.Readlink(filepath.Join(k.dir, "..data"))
	if err != nil {
		return k.dir
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(k.dir, target)
	}
	return target
}

// run reloads on every change until ctx ends.
func (k *keyStore) run(ctx context.Context) {
	watchDirs(ctx, []string{k.dir}, k.interval, k.log, "keys", k.load)
}

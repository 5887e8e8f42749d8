package creds

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kilnctl/kiln/engine/failure"
)

// How Write replaces a token directory DIR atomically, and how a crash at
// any instant is recovered. Only directory renames change what DIR is, and
// rename is atomic:
//
//	step                                   state after a crash here
//	1. stage: write .DIR.new-XXXX, fsync   DIR old and complete; the temp dir
//	   every file and directory            is ignored by Load and swept by the
//	                                       next Write
//	2. aside: rename DIR -> .DIR.old,      DIR missing, .DIR.old complete:
//	   fsync parent                        Load renames it back (old state)
//	3. install: rename temp -> DIR,        DIR new and complete; .DIR.old is
//	   fsync parent                        ignored by Load and removed by the
//	                                       next Write
//	4. finish: remove .DIR.old
//
// So Load always sees the old complete directory or the new complete one.
// The backup is only ever created by renaming a complete DIR, and only
// removed while DIR exists, so "DIR missing, backup present" always means
// the backup is complete.
//
// Writers of one DIR are not run concurrently (the engine serializes
// operations per cluster); if they were, the loser fails cleanly instead of
// corrupting anything, because every step checks what it renames.

const (
	tempInfix   = ".new-"
	backupInfix = ".old"
)

// tempPattern is the os.MkdirTemp pattern of DIR's temp directories.
func tempPattern(dir string) string { return "." + filepath.Base(dir) + tempInfix + "*" }

// backupPath is where step 2 moves the previous DIR.
func backupPath(dir string) string {
	return filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+backupInfix)
}

// Write writes td to dir as one unit, replacing what is there (see the
// table above). Parent directories are created 0700. On success td.Path is
// dir.
func Write(dir string, td *TokenDir) error {
	dir = filepath.Clean(dir)
	if err := td.validate(); err != nil {
		return fmt.Errorf("write token directory %s: %w", dir, err)
	}
	if err := prepare(dir); err != nil {
		return fmt.Errorf("write token directory %s: %w", dir, err)
	}
	tmp, err := stage(dir, td)
	if err != nil {
		return fmt.Errorf("write token directory %s: %w", dir, err)
	}
	if err := swapIn(dir, tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("write token directory %s: %w", dir, err)
	}
	td.Path = dir
	return nil
}

// prepare creates the parent, settles whatever an interrupted Write left
// behind (restores a backup when DIR is missing, removes a stale backup
// when DIR exists) and sweeps leftover temp directories.
func prepare(dir string) error {
	parent := filepath.Dir(dir)
	if err := mkdirAllSync(parent, dirPerm); err != nil {
		return fmt.Errorf("create parent directory: %w", err)
	}
	if err := recoverDir(dir); err != nil {
		return err
	}
	// DIR now exists or there is no backup; either way a backup is stale.
	if err := os.RemoveAll(backupPath(dir)); err != nil {
		return fmt.Errorf("remove stale backup: %w", err)
	}
	// Read the directory rather than glob: DIR's name may contain glob
	// metacharacters.
	entries, err := os.ReadDir(parent)
	if err != nil {
		return err
	}
	prefix := "." + filepath.Base(dir) + tempInfix
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
			if err := os.RemoveAll(filepath.Join(parent, e.Name())); err != nil {
				return fmt.Errorf("remove leftover temp directory: %w", err)
			}
		}
	}
	return nil
}

// stage is step 1: it writes td into a new sibling temp directory, fsyncs
// every file and directory in it, and returns its path.
func stage(dir string, td *TokenDir) (tmp string, err error) {
	manifest, err := td.Manifest.marshal()
	if err != nil {
		return "", err
	}
	keyPEM, err := PrivateKeyPEM(td.Key)
	if err != nil {
		return "", err
	}
	// MkdirTemp creates the directory 0700, so nothing is ever readable by
	// others, not even for an instant.
	staged, err := os.MkdirTemp(filepath.Dir(dir), tempPattern(dir))
	if err != nil {
		return "", fmt.Errorf("create temp directory: %w", err)
	}
	// Removed on failure by its own name: every failing return sets the
	// named result tmp to "" (seen with a full disk, where the leftover
	// kept the space the next write needed).
	tmp = staged
	defer func() {
		if err != nil {
			_ = os.RemoveAll(staged)
		}
	}()
	if err := os.Chmod(tmp, dirPerm); err != nil {
		return "", err
	}
	if err := writeFileSync(filepath.Join(tmp, SigningKeyFile), keyPEM, filePerm); err != nil {
		return "", fmt.Errorf("write %s: %w", SigningKeyFile, err)
	}
	if td.Previous != nil {
		prevPEM, err := PrivateKeyPEM(td.Previous)
		if err != nil {
			return "", err
		}
		if err := writeFileSync(filepath.Join(tmp, PreviousKeyFile), prevPEM, filePerm); err != nil {
			return "", fmt.Errorf("write %s: %w", PreviousKeyFile, err)
		}
	}
	tokensDir := filepath.Join(tmp, TokensDir)
	if err := mkdirSync(tokensDir, dirPerm); err != nil {
		return "", err
	}
	for _, t := range td.Manifest.Tenants {
		if err := writeFileSync(filepath.Join(tokensDir, t), []byte(td.Tokens[t]), filePerm); err != nil {
			return "", fmt.Errorf("write token of tenant %q: %w", t, err)
		}
	}
	if err := syncDir(tokensDir); err != nil {
		return "", err
	}
	// The manifest last: a staged directory with a manifest is complete.
	if err := writeFileSync(filepath.Join(tmp, ManifestFile), manifest, filePerm); err != nil {
		return "", fmt.Errorf("write %s: %w", ManifestFile, err)
	}
	if err := syncDir(tmp); err != nil {
		return "", err
	}
	return tmp, nil
}

// swapIn runs steps 2 to 4.
func swapIn(dir, tmp string) error {
	moved, err := aside(dir)
	if err != nil {
		return err
	}
	if err := install(tmp, dir); err != nil {
		if moved {
			// Put the old directory back so DIR is never left missing by a
			// failure we saw (a crash is handled by recoverDir).
			if rerr := os.Rename(backupPath(dir), dir); rerr == nil {
				_ = syncDir(filepath.Dir(dir))
			}
		}
		return err
	}
	return finish(dir)
}

// aside is step 2: it renames an existing DIR to its backup name and
// reports whether there was one to move.
func aside(dir string) (bool, error) {
	ok, err := exists(dir)
	if err != nil || !ok {
		return false, err
	}
	if err := os.Rename(dir, backupPath(dir)); err != nil {
		return false, fmt.Errorf("move previous directory aside: %w", err)
	}
	return true, syncDir(filepath.Dir(dir))
}

// install is step 3: it renames the staged directory to DIR.
func install(tmp, dir string) error {
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("rename temp directory into place: %w", err)
	}
	return syncDir(filepath.Dir(dir))
}

// finish is step 4: it removes the backup. A failure here leaves DIR new
// and complete, and the next Write removes the backup.
func finish(dir string) error {
	if err := os.RemoveAll(backupPath(dir)); err != nil {
		return fmt.Errorf("remove previous directory: %w", err)
	}
	return nil
}

// recoverDir restores the backup of an interrupted Write: if DIR is missing
// and its backup exists, the backup is the last complete directory.
func recoverDir(dir string) error {
	ok, err := exists(dir)
	if err != nil || ok {
		return err
	}
	backup := backupPath(dir)
	fi, err := os.Lstat(backup)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return nil
	}
	if err := os.Rename(backup, dir); err != nil {
		return fmt.Errorf("restore %s from interrupted write: %w", dir, err)
	}
	return syncDir(filepath.Dir(dir))
}

// Commit marks the token directory dir committed: kiln now knows the
// cluster trusts its key. trusted is what the cluster's kiln-auth holds,
// read back just before (key id -> PEM public key). The directory is loaded
// and checked first, and nothing is committed unless the key on disk is
// one of trusted — by id and by the public key itself — so a directory
// replaced or rewritten since kiln applied its key is never committed.
// Only manifest.json changes, replaced atomically (write manifest.json.tmp,
// fsync, rename, fsync the directory). Committing a committed directory
// does nothing (after the same check).
func Commit(dir string, trusted map[string]string) error {
	td, err := Load(dir)
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if err := checkTrusted(td, trusted); err != nil {
		return fmt.Errorf("commit token directory %s: %w; nothing was committed", td.Path, err)
	}
	if td.Manifest.State == StateCommitted {
		return nil
	}
	td.Manifest.State = StateCommitted
	data, err := td.Manifest.marshal()
	if err != nil {
		return fmt.Errorf("commit token directory %s: %w", td.Path, err)
	}
	if err := replaceFileSync(filepath.Join(td.Path, ManifestFile), data, filePerm); err != nil {
		return fmt.Errorf("commit token directory %s: %w", td.Path, err)
	}
	return nil
}

// checkTrusted reports whether the signing key of td is one of trusted.
func checkTrusted(td *TokenDir, trusted map[string]string) error {
	id := td.Manifest.KeyID
	pemText, ok := trusted[id]
	if !ok {
		ids := make([]string, 0, len(trusted))
		for k := range trusted {
			ids = append(ids, k)
		}
		slices.Sort(ids)
		return fmt.Errorf("its key %s is not one the cluster trusts (kiln-auth has %s)", id, strings.Join(ids, ", "))
	}
	pub, err := ParsePublicKeyPEM([]byte(pemText))
	if err != nil {
		return fmt.Errorf("kiln-auth key %s: %w", id, err)
	}
	if !pub.Equal(td.PublicKey()) {
		return fmt.Errorf("kiln-auth's key listed as %s is not the public half of the signing key on disk", id)
	}
	return nil
}

// AddTenants signs tokens for those of tenants the directory dir does not
// have yet, with its existing key, and rewrites the directory atomically
// (Write). Existing tokens, the key and the state are kept. It returns the
// updated directory; when nothing is missing nothing is written.
func AddTenants(dir string, tenants []string, now time.Time) (*TokenDir, error) {
	td, err := Load(dir)
	if err != nil {
		return nil, fmt.Errorf("add tenants: %w", err)
	}
	for i, t := range tenants {
		if err := checkName(fmt.Sprintf("tenants[%d]", i), t); err != nil {
			return nil, failure.BadInput("add tenants to %s: %w", td.Path, err)
		}
	}
	iat := now.UTC().Truncate(time.Second)
	added := false
	for _, t := range tenants {
		if td.Manifest.HasTenant(t) {
			continue
		}
		tok, err := SignToken(td.Key, td.Manifest.KeyID, td.Manifest.Cluster, t, iat)
		if err != nil {
			return nil, fmt.Errorf("add tenants to %s: %w", td.Path, err)
		}
		td.Manifest.Tenants = append(td.Manifest.Tenants, t)
		td.Tokens[t] = tok
		added = true
	}
	if !added {
		return td, nil
	}
	if err := Write(td.Path, td); err != nil {
		return nil, fmt.Errorf("add tenants: %w", err)
	}
	return td, nil
}

// MoveAside renames the token directory dir to a sibling
// DIR.destroyed-<UTC timestamp> and returns the new path. It never deletes:
// the key may still be trusted somewhere, and a destroyed cluster's tokens
// are the only way to prove that.
func MoveAside(dir string, now time.Time) (string, error) {
	return MoveAsideAs(dir, "destroyed", now)
}

// MoveAsideAs is MoveAside to DIR.WHY-<UTC timestamp> (MoveAside's why is
// "destroyed"; a create moves a directory made for another account or
// location to DIR.foreign-<time>). The directory keeps its mode (0700).
func MoveAsideAs(dir, why string, now time.Time) (string, error) {
	dir = filepath.Clean(dir)
	if err := recoverDir(dir); err != nil {
		return "", fmt.Errorf("move token directory aside: %w", err)
	}
	if ok, err := exists(dir); err != nil {
		return "", fmt.Errorf("move token directory aside: %w", err)
	} else if !ok {
		return "", fmt.Errorf("move token directory aside: %s: %w", dir, errNotExist)
	}
	base := dir + "." + why + "-" + now.UTC().Format("20060102T150405Z")
	// rename(2) silently replaces an empty directory, so look before
	// renaming; a second destroy within the same second gets a suffix.
	for i := 0; ; i++ {
		dst := base
		if i > 0 {
			dst = fmt.Sprintf("%s-%d", base, i)
		}
		taken, err := exists(dst)
		if err != nil {
			return "", fmt.Errorf("move token directory aside: %w", err)
		}
		if taken {
			continue
		}
		if err := os.Rename(dir, dst); err != nil {
			return "", fmt.Errorf("move token directory aside: %w", err)
		}
		if err := syncDir(filepath.Dir(dir)); err != nil {
			return "", fmt.Errorf("move token directory aside: %w", err)
		}
		return dst, nil
	}
}

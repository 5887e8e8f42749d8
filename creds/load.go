package creds

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/kilnctl/kiln/engine/failure"
)

// Load reads the token directory dir and checks all of it: permissions,
// the manifest (every field present and valid, nothing unknown), the
// signing key and that its id is the manifest's key_id, and that every
// tenant's token is signed by that key for that cluster and tenant. Files in
// tokens/ that the manifest does not list are rejected too: the directory is
// written as one unit, so anything extra was put there by hand.
//
// A problem with the on-disk content is bad input (exit code 2); the error
// names the file and what is wrong, and never contains token or key text.
// A missing directory is also bad input and satisfies
// errors.Is(err, fs.ErrNotExist).
//
// Load first finishes what an interrupted Write left behind: if dir is
// missing but its backup (the previous complete directory) exists, the
// backup is renamed back to dir. Leftover temp directories are ignored.
func Load(dir string) (*TokenDir, error) {
	dir = filepath.Clean(dir)
	if err := recoverDir(dir); err != nil {
		return nil, fmt.Errorf("load token directory: %w", err)
	}
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, failure.BadInput("load token directory: %s: %w", dir, errNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("load token directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, badContent(dir, "not a directory")
	}
	if err := checkPerm(dir, fi.Mode(), dirPerm); err != nil {
		return nil, err
	}
	if err := checkOwner(dir, fi, false); err != nil {
		return nil, err
	}
	if err := checkParent(dir); err != nil {
		return nil, err
	}

	manifestPath := filepath.Join(dir, ManifestFile)
	data, err := readPrivateFile(manifestPath)
	if err != nil {
		return nil, err
	}
	m, err := parseManifest(data)
	if err != nil {
		return nil, badContent(manifestPath, "%w", err)
	}

	keyPath := filepath.Join(dir, SigningKeyFile)
	data, err = readPrivateFile(keyPath)
	if err != nil {
		return nil, err
	}
	key, err := ParsePrivateKeyPEM(data)
	if err != nil {
		return nil, badContent(keyPath, "%w", err)
	}
	keyID, err := KeyID(&key.PublicKey)
	if err != nil {
		return nil, badContent(keyPath, "%w", err)
	}
	if keyID != m.KeyID {
		return nil, badContent(manifestPath, "key_id %s does not match the signing key in %s, whose id is %s", m.KeyID, keyPath, keyID)
	}

	tokens, err := loadTokens(filepath.Join(dir, TokensDir), m, &key.PublicKey)
	if err != nil {
		return nil, err
	}
	td := &TokenDir{Path: dir, Manifest: *m, Key: key, Tokens: tokens}
	// A rotation under way keeps the key it replaces (optional file).
	prevPath := filepath.Join(dir, PreviousKeyFile)
	if _, err := os.Lstat(prevPath); err == nil {
		data, err := readPrivateFile(prevPath)
		if err != nil {
			return nil, err
		}
		if td.Previous, err = ParsePrivateKeyPEM(data); err != nil {
			return nil, badContent(prevPath, "%w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("load token directory: %w", err)
	}
	return td, nil
}

// loadTokens reads and verifies tokens/TENANT for every tenant of m.
func loadTokens(tokensDir string, m *Manifest, pub *rsa.PublicKey) (map[string]string, error) {
	fi, err := os.Lstat(tokensDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, badContent(tokensDir, "missing")
	}
	if err != nil {
		return nil, fmt.Errorf("load token directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, badContent(tokensDir, "not a directory")
	}
	if err := checkPerm(tokensDir, fi.Mode(), dirPerm); err != nil {
		return nil, err
	}
	if err := checkOwner(tokensDir, fi, false); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(tokensDir)
	if err != nil {
		return nil, fmt.Errorf("load token directory: %w", err)
	}
	for _, e := range entries {
		if !m.HasTenant(e.Name()) {
			return nil, badContent(filepath.Join(tokensDir, e.Name()),
				"unexpected file: tenant is not listed in %s", ManifestFile)
		}
	}

	trusted := map[string]*rsa.PublicKey{m.KeyID: pub}
	tokens := make(map[string]string, len(m.Tenants))
	for _, tenant := range m.Tenants {
		path := filepath.Join(tokensDir, tenant)
		data, err := readPrivateFile(path)
		if err != nil {
			return nil, err
		}
		// Tolerate a trailing newline from hand editing; Write adds none.
		tok := strings.TrimSpace(string(data))
		kid, err := TokenKeyID(tok)
		if err != nil {
			return nil, badContent(path, "%w", err)
		}
		if kid != m.KeyID {
			return nil, badContent(path, "token is signed with key %s, but the directory's key is %s", kid, m.KeyID)
		}
		if err := VerifyToken(tok, trusted, m.Cluster, tenant); err != nil {
			return nil, badContent(path, "%w", err)
		}
		tokens[tenant] = tok
	}
	return tokens, nil
}

// errNotExist is the cause of Load's error for a missing directory.
var errNotExist = fmt.Errorf("does not exist (%w)", fs.ErrNotExist)

// badContent classifies a problem with on-disk content as bad input
// (exit code 2), naming the file. Callers must pass only descriptions,
// never file content.
func badContent(path, format string, args ...any) error {
	return failure.BadInput("load token directory: %s: %w", path, fmt.Errorf(format, args...))
}

// readPrivateFile reads a regular file that must be readable by its owner
// only, like ssh's StrictModes: it is opened without following a symlink
// (everything in a token directory is written by kiln, so a link means the
// directory was tampered with) and checked on the open descriptor — a
// regular file, owned by this user, one link, mode 0600 — so nothing can be
// swapped in between the check and the read.
func readPrivateFile(path string) ([]byte, error) {
	f, err := openNoFollow(path, os.O_RDONLY, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, badContent(path, "missing")
	case isSymlinkRefusal(err):
		return nil, badContent(path, "is a symbolic link; kiln writes none in a token directory")
	case err != nil:
		return nil, fmt.Errorf("load token directory: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("load token directory: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, badContent(path, "not a regular file")
	}
	if err := checkPerm(path, fi.Mode(), filePerm); err != nil {
		return nil, err
	}
	if err := checkOwner(path, fi, true); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxPrivateFile+1))
	if err != nil {
		return nil, fmt.Errorf("load token directory: %w", err)
	}
	if len(data) > maxPrivateFile {
		return nil, badContent(path, "larger than %d bytes; kiln writes none so large", maxPrivateFile)
	}
	return data, nil
}

// maxPrivateFile bounds what readPrivateFile reads: kiln's largest file
// (a manifest with many tenants) is a few KiB.
const maxPrivateFile = 1 << 20

// checkOwner refuses a file or directory that this user does not own
// (kiln run as another user must not trust someone else's directory, even
// at mode 0700), or, with single, a file with other hard links (a link
// planted to another file).
func checkOwner(path string, fi fs.FileInfo, single bool) error {
	uid, links, ok := ownership(fi)
	if !ok {
		return nil
	}
	if me := currentUID(); uid != me {
		return badContent(path, "owned by uid %d, not by you (uid %d); kiln uses only token directories of its own user", uid, me)
	}
	if single && links != 1 {
		return badContent(path, "has %d hard links; kiln writes files with one", links)
	}
	return nil
}

// checkParent refuses a token directory whose parent another user could
// rename it out of: the parent must belong to this user or root and be
// writable by nobody else, unless it is sticky (like /tmp, where only an
// entry's owner may rename it).
func checkParent(dir string) error {
	parent := filepath.Dir(dir)
	fi, err := os.Stat(parent)
	if err != nil {
		return fmt.Errorf("load token directory: %w", err)
	}
	uid, _, ok := ownership(fi)
	if !ok {
		return nil
	}
	if uid != currentUID() && uid != 0 {
		return badContent(dir, "its parent %s is owned by uid %d, neither you (uid %d) nor root; another user could replace the directory", parent, uid, currentUID())
	}
	if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return badContent(dir, "its parent %s is writable by group or others (mode %04o); another user could replace the directory: run chmod go-w %s", parent, fi.Mode().Perm(), parent)
	}
	return nil
}

// checkPerm rejects group or other access to key material: a token
// directory readable by others has leaked, and silently using it would hide
// that. Windows has no such mode bits.
func checkPerm(path string, mode fs.FileMode, want fs.FileMode) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	if perm := mode.Perm(); perm&0o077 != 0 {
		return badContent(path, "permissions %04o are too open (group or others have access); want %04o: run chmod %o %s",
			perm, want, want, path)
	}
	return nil
}

package creds

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// RotationPath is where a key rotation stages the next token directory of
// dir (a sibling, .DIR.rotating): the new key and every tenant's token
// signed with it, pending until the swap. Load and Write of dir ignore it.
func RotationPath(dir string) string {
	dir = filepath.Clean(dir)
	return filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".rotating")
}

// LoadRotation loads the token directory a rotation of dir staged; nil
// when there is none.
func LoadRotation(dir string) (*TokenDir, error) {
	p := RotationPath(dir)
	if err := recoverDir(p); err != nil {
		return nil, fmt.Errorf("load staged rotation: %w", err)
	}
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	td, err := Load(p)
	if err != nil {
		return nil, fmt.Errorf("staged rotation of %s: %w", dir, err)
	}
	return td, nil
}

// DiscardRotation removes the staged rotation of dir (absent is fine).
func DiscardRotation(dir string) error {
	p := RotationPath(dir)
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("remove staged rotation %s: %w", p, err)
	}
	return syncDir(filepath.Dir(p))
}

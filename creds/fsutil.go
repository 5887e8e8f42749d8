package creds

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// Permissions of everything kiln writes under a token directory.
const (
	dirPerm  fs.FileMode = 0o700
	filePerm fs.FileMode = 0o600
)

// writeFileSync creates path (which must not exist) with mode perm, writes
// data and fsyncs it before closing, so that a later rename of the
// directory that holds it can never expose an empty or partial file.
func writeFileSync(path string, data []byte, perm fs.FileMode) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	// The umask may have removed bits from perm; set it exactly.
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Sync()
}

// replaceFileSync atomically replaces path with data: it writes path+".tmp",
// fsyncs it, renames it over path and fsyncs the directory.
func replaceFileSync(path string, data []byte, perm fs.FileMode) error {
	tmp := path + ".tmp"
	// A leftover from a crash in this same step is garbage by definition.
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := writeFileSync(tmp, data, perm); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(path))
}

// mkdirSync creates dir with mode perm exactly (regardless of umask).
func mkdirSync(dir string, perm fs.FileMode) error {
	if err := os.Mkdir(dir, perm); err != nil {
		return err
	}
	return os.Chmod(dir, perm)
}

// mkdirAllSync is os.MkdirAll with mode perm for every directory it creates,
// and an fsync of each new directory's parent so the new entries survive a
// crash together with what is later written into them.
func mkdirAllSync(dir string, perm fs.FileMode) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirAllSync(parent, perm); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, perm); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // created concurrently: fine
		}
		return err
	}
	if err := os.Chmod(dir, perm); err != nil { // exactly perm, whatever the umask
		return err
	}
	return syncDir(parent)
}

// syncDir fsyncs a directory, making renames and creations inside it
// durable. Windows cannot open a directory for syncing and makes renames
// durable by itself, so it is a no-op there.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return fmt.Errorf("fsync %s: %w", dir, serr)
	}
	return cerr
}

// exists reports whether path exists (without following a final symlink).
func exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, err
	}
}

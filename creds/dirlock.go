package creds

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kilnctl/kiln/engine/failure"
)

// DirLock is an exclusive lock on one token directory, held by a create
// from its credentials phase until the directory is committed, so two kiln
// processes on one host never write, replace or commit the same directory
// at once. It is an advisory lock (flock) on a sibling file, .DIR.lock:
// the directory itself is replaced by rename, so it cannot carry the lock.
// The kernel drops the lock when its process dies, so a killed kiln never
// leaves a stale lock; the file stays (removing it would race with a
// process that has just opened it) and records the last holder.
type DirLock struct {
	f    *os.File
	path string
}

// lockRecord is the content of the lock file: who holds it, since when.
type lockRecord struct {
	Holder string    `json:"holder"`
	Since  time.Time `json:"since"`
}

// LockPath is the lock file of token directory dir.
func LockPath(dir string) string {
	dir = filepath.Clean(dir)
	return filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".lock")
}

// LockDir takes the lock of token directory dir for holder without
// waiting. When another process holds it the error is exit code 4 and
// names that holder and since when.
func LockDir(dir, holder string) (*DirLock, error) {
	path := LockPath(dir)
	if err := mkdirAllSync(filepath.Dir(path), dirPerm); err != nil {
		return nil, fmt.Errorf("lock token directory %s: %w", dir, err)
	}
	// Never through a planted link, and only a file of our own: the
	// holder record is written into it.
	f, err := openNoFollow(path, os.O_RDWR|os.O_CREATE, filePerm)
	if isSymlinkRefusal(err) {
		return nil, failure.BadInput("lock token directory %s: lock file %s is a symbolic link; kiln creates a plain file there: remove the link", dir, path)
	}
	if err != nil {
		return nil, fmt.Errorf("lock token directory %s: %w", dir, err)
	}
	if err := checkLockFile(f, path); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock token directory %s: %w", dir, err)
	}
	if err := tryLock(f); err != nil {
		f.Close()
		if errors.Is(err, errLocked) {
			return nil, lockedBy(dir, path)
		}
		return nil, fmt.Errorf("lock token directory %s: %w", dir, err)
	}
	rec, _ := json.Marshal(lockRecord{Holder: holder, Since: time.Now().UTC().Truncate(time.Second)})
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt(append(rec, '\n'), 0)
	}
	return &DirLock{f: f, path: path}, nil
}

// lockedBy is the Locked failure for a token directory another process holds.
func lockedBy(dir, path string) error {
	holder, since := "another kiln process", "an unknown time"
	var rec lockRecord
	if data, err := os.ReadFile(path); err == nil {
		if json.Unmarshal(data, &rec) == nil && rec.Holder != "" {
			holder = rec.Holder
			since = rec.Since.Format(time.RFC3339)
		} else {
			rec = lockRecord{}
		}
	}
	return failure.Held(strings.TrimSpace(rec.Holder), rec.Since, "token dir %s is locked by %s since %s (lock file %s); wait for it to finish: the lock ends with that process",
		dir, strings.TrimSpace(holder), since, path)
}

// Unlock releases the lock. Unlocking twice does nothing.
func (l *DirLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := unlock(l.f)
	cerr := l.f.Close()
	l.f = nil
	if err != nil {
		return fmt.Errorf("unlock %s: %w", l.path, err)
	}
	return cerr
}

var errLocked = errors.New("locked")

// checkLockFile refuses a lock file that is not a regular file of this
// user's with one link: its content is replaced by the holder record.
func checkLockFile(f *os.File, path string) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return failure.BadInput("lock file %s is not a regular file", path)
	}
	return checkOwner(path, fi, true)
}

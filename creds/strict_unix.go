//go:build unix

package creds

import (
	"io/fs"
	"os"
	"syscall"
)

// openNoFollow opens path without following a symlink at its last element
// (a planted link fails with ELOOP instead of being followed).
func openNoFollow(path string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, perm)
}

// isSymlinkRefusal says whether err is openNoFollow's refusal of a link.
func isSymlinkRefusal(err error) bool {
	pe, ok := err.(*fs.PathError)
	return ok && pe.Err == syscall.ELOOP
}

// ownership returns the owner and the link count of fi; ok is false where
// the platform does not say.
func ownership(fi fs.FileInfo) (uid int, links uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), uint64(st.Nlink), true
}

// currentUID is the user kiln runs as.
func currentUID() int { return os.Geteuid() }

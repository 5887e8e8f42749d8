//go:build !unix

package creds

import (
	"io/fs"
	"os"
)

func openNoFollow(path string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(path, flag, perm)
}

func isSymlinkRefusal(error) bool { return false }

// ownership is not checked where Unix owners do not exist.
func ownership(fs.FileInfo) (uid int, links uint64, ok bool) { return 0, 0, false }

func currentUID() int { return -1 }

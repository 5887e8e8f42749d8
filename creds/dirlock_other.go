//go:build !unix

package creds

import "os"

// Without flock the lock is the open file alone: exclusive access is not
// enforced on these systems (kiln's release targets and tests are Unix).
func tryLock(*os.File) error { return nil }

func unlock(*os.File) error { return nil }

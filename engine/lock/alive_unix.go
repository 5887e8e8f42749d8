//go:build unix

package lock

import (
	"errors"
	"syscall"
)

// processAlive reports whether pid exists on this host (signal 0 probes
// without delivering anything; EPERM means it exists but is not ours).
func processAlive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

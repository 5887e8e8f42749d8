//go:build !unix

package awsemu

import (
	"os"
	"syscall"
)

// sysProcAttr: no process groups here; the child exits when its stdin pipe
// closes.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// signalGroup has no graceful signal to send here, so it only kills.
func signalGroup(p *os.Process, kill bool) error {
	if !kill {
		return nil
	}

	return p.Kill()
}

// lockFile is a no-op: concurrent builds are only serialised per process.
func lockFile(string) (func(), error) { return func() {}, nil }

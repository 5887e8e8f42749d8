//go:build unix

package awsemu

import (
	"os"
	"syscall"
)

// signalGroup signals the child's whole process group (the child is its
// group leader, see sysProcAttr): SIGTERM, or SIGKILL when kill is set.
func signalGroup(p *os.Process, kill bool) error {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}

	if err := syscall.Kill(-p.Pid, sig); err != nil {
		// The group may be gone already; fall back to the process itself.
		return p.Signal(sig)
	}

	return nil
}

// lockFile takes an exclusive flock on path, blocking until it is free.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}

	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()

		return nil, err
	}

	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}

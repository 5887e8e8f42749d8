//go:build linux

package awsemu

import "syscall"

// sysProcAttr puts the child in its own process group, so Close can signal
// everything it might spawn, and asks the kernel to SIGKILL it if the
// parent dies (the stdin pipe closing is a second, portable safeguard).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

//go:build unix && !linux

package awsemu

import "syscall"

// sysProcAttr puts the child in its own process group, so Close can signal
// everything it might spawn. There is no parent-death signal here; the child
// exits when its stdin pipe closes instead.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

package testcluster

import "syscall"

// sysProcAttr puts each child in its own process group (so Stop can signal
// it and its children) and asks the kernel to SIGKILL it
// when the process that started it dies, so a killed test leaks nothing.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

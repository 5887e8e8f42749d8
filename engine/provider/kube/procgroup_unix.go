//go:build unix

package kube

import (
	"os/exec"
	"syscall"
)

// killGroupOnCancel runs cmd in its own process group and, when its context
// ends, kills the whole group: a plugin's children (the shell's sleep, the
// browser helper) die with it instead of outliving kiln.
func killGroupOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

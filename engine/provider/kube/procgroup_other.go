//go:build !unix

package kube

import "os/exec"

// killGroupOnCancel: without process groups, the plugin itself is killed
// (exec.CommandContext's default).
func killGroupOnCancel(*exec.Cmd) {}

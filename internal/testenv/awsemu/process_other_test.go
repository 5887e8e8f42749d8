//go:build !unix

package awsemu

import "os"

// processExists reports whether pid is still a process.
func processExists(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}

	_ = p.Release()

	return true
}

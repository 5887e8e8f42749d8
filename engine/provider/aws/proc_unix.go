//go:build unix

package aws

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// processAlive reports whether pid exists on this host (signal 0 probes
// without delivering anything; EPERM means it exists but is not ours).
func processAlive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// bootID identifies this boot of the host ("" where the kernel does not
// say): a pid of another boot is certainly dead.
func bootID() string {
	data, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// processStart is pid's start time in clock ticks since boot ("" where
// /proc does not say): a reused pid has another start time.
func processStart(pid int) string {
	data, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) may contain spaces; fields after the
	// closing parenthesis are plain. starttime is field 22.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// guardDir takes an exclusive flock on dir, waiting up to wait: kiln
// processes editing kubeconfigs in dir take turns (the kernel releases it
// when a holder dies).
func guardDir(dir string, wait time.Duration) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, err
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, errors.New("another kiln holds the lock of " + dir)
		}
		time.Sleep(20 * time.Millisecond) // flock has no timed wait
	}
}

func itoa(n int) string {
	return strconv.Itoa(n)
}

//go:build !unix

package aws

import "time"

// Without a way to probe processes, a kiln lock is never judged stale.
func processAlive(int) bool { return true }

func bootID() string { return "" }

func processStart(int) string { return "" }

// guardDir is a no-op where flock does not exist: kiln processes then
// rely on PATH.lock alone.
func guardDir(string, time.Duration) (func(), error) { return func() {}, nil }

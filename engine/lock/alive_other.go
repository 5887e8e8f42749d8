//go:build !unix

package lock

// processAlive cannot probe cheaply here, so it assumes the holder lives and
// kiln waits for the lease to expire.
func processAlive(int) bool { return true }

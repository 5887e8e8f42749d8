//go:build !unix

package aws

import (
	"errors"
	"os"
	"time"
)

// lockFile takes an exclusive lock by creating path exclusively, waiting
// while another writer holds it; the returned function releases it.
func lockFile(path string) (func(), error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
		if err == nil {
			f.Close()
			return func() { os.Remove(path) }, nil
		}
		if !errors.Is(err, os.ErrExist) || time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(50 * time.Millisecond) // another writer holds the lock file
	}
}

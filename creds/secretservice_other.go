//go:build !linux

package creds

import "errors"

// The Secret Service backend exists on Linux only.

func secretServiceMissing() string { return "the Secret Service is a Linux keyring" }

func secretServiceCollection(bool) (string, error) {
	return "", errors.New(secretServiceMissing())
}

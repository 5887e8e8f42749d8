package creds

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/kilnctl/kiln/engine/failure"
)

// DefaultDir returns the default token directory of a cluster:
// $XDG_STATE_HOME/kiln/PROVIDER/NAME/tokens, or
// ~/.local/state/kiln/PROVIDER/NAME/tokens when XDG_STATE_HOME is unset.
// Tokens are state (they are valid only while the cluster trusts the key),
// not configuration or cache, hence XDG_STATE_HOME.
func DefaultDir(provider, name string) (string, error) {
	if err := checkName("provider", provider); err != nil {
		return "", failure.BadInput("default token directory: %w", err)
	}
	if err := checkName("name", name); err != nil {
		return "", failure.BadInput("default token directory: %w", err)
	}
	base, err := xdgDir("XDG_STATE_HOME", ".local", "state")
	if err != nil {
		return "", fmt.Errorf("default token directory: %w", err)
	}
	return filepath.Join(base, "kiln", provider, name, TokensDir), nil
}

// DefaultKeyringDir returns where the file keyring backend keeps its
// encrypted items: $XDG_DATA_HOME/kiln/keyring, or
// ~/.local/share/kiln/keyring.
func DefaultKeyringDir() (string, error) {
	base, err := xdgDir("XDG_DATA_HOME", ".local", "share")
	if err != nil {
		return "", fmt.Errorf("default keyring directory: %w", err)
	}
	return filepath.Join(base, "kiln", "keyring"), nil
}

// xdgDir returns $env, or ~/fallback... when it is unset. The XDG base
// directory spec says relative values are invalid and must be ignored.
func xdgDir(env string, fallback ...string) (string, error) {
	if v := os.Getenv(env); v != "" && filepath.IsAbs(v) {
		return v, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("%s is not set and the home directory is unknown: %w", env, err)
	}
	return filepath.Join(append([]string{home}, fallback...)...), nil
}

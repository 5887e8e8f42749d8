package creds

import (
	"fmt"
	"slices"
)

// RemoveTenants drops the tokens of tenants from the token directory dir
// and rewrites it atomically (Write). The key and the state are kept. It
// returns the updated directory; when none of tenants is there nothing is
// written. A directory keeps at least one tenant: removing the last is
// refused.
func RemoveTenants(dir string, tenants []string) (*TokenDir, error) {
	td, err := Load(dir)
	if err != nil {
		return nil, fmt.Errorf("remove tenants: %w", err)
	}
	var keep []string
	for _, t := range td.Manifest.Tenants {
		if !slices.Contains(tenants, t) {
			keep = append(keep, t)
		}
	}
	if len(keep) == len(td.Manifest.Tenants) {
		return td, nil
	}
	if len(keep) == 0 {
		return nil, fmt.Errorf("remove tenants from %s: it would hold no tenant", td.Path)
	}
	for _, t := range tenants {
		delete(td.Tokens, t)
	}
	td.Manifest.Tenants = keep
	if err := Write(td.Path, td); err != nil {
		return nil, fmt.Errorf("remove tenants: %w", err)
	}
	return td, nil
}

package creds

import (
	"fmt"
	"regexp"
)

// dns1123Label is the Kubernetes DNS-1123 label syntax. Cluster, provider
// and tenant names become file names (tokens/TENANT, PROVIDER/NAME) and
// keyring keys, so they are held to it here too: a name that passes cannot
// contain a path separator, "." or "..".
var dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

const maxLabelLen = 63

// checkName returns an error naming field if value is not a DNS-1123 label.
func checkName(field, value string) error {
	switch {
	case value == "":
		return fmt.Errorf("%s is empty", field)
	case len(value) > maxLabelLen:
		return fmt.Errorf("%s %q is longer than %d characters", field, value, maxLabelLen)
	case !dns1123Label.MatchString(value):
		return fmt.Errorf("%s %q is not a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit)", field, value)
	}
	return nil
}

// checkTenants checks that tenants is a non-empty list of distinct valid
// names.
func checkTenants(field string, tenants []string) error {
	if len(tenants) == 0 {
		return fmt.Errorf("%s is empty: a token directory holds at least one tenant", field)
	}
	seen := make(map[string]bool, len(tenants))
	for i, t := range tenants {
		if err := checkName(fmt.Sprintf("%s[%d]", field, i), t); err != nil {
			return err
		}
		if seen[t] {
			return fmt.Errorf("%s lists tenant %q twice", field, t)
		}
		seen[t] = true
	}
	return nil
}

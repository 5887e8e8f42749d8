package config

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kilnctl/kiln/engine/failure"
)

// ValidateName checks a cluster NAME: a DNS-1123 label of at most 40
// characters. The error is failure.BadInput and reads `NAME "X": reason`.
func ValidateName(name string) error {
	if r := labelProblem(name, MaxNameLength); r != "" {
		return failure.BadInput("NAME %q: %s", name, r)
	}
	return nil
}

// ValidateProjectRef splits and checks TENANT/PROJECT. The tenant is a
// DNS-1123 label of at most 40 characters (its namespace is
// kiln-tenant-TENANT). The project is a DNS-1123 label of at most 40
// characters that also starts with a letter, because it names a Service
// (which Kubernetes requires to be a DNS-1035 label). Errors are failure.BadInput
// and read `TENANT/PROJECT "X": ...`.
func ValidateProjectRef(ref string) (tenant, project string, err error) {
	tenant, project, ok := strings.Cut(ref, "/")
	if !ok || strings.Contains(project, "/") {
		return "", "", failure.BadInput("TENANT/PROJECT %q: must be of the form TENANT/PROJECT (e.g. default/blog)", ref)
	}
	if r := labelProblem(tenant, MaxNameLength); r != "" {
		return "", "", failure.BadInput("TENANT/PROJECT %q: tenant %q: %s", ref, tenant, r)
	}
	if r := projectProblem(project); r != "" {
		return "", "", failure.BadInput("TENANT/PROJECT %q: project %q: %s", ref, project, r)
	}
	return tenant, project, nil
}

// labelProblem says why s is not a DNS-1123 label of at most max
// characters, or returns "".
func labelProblem(s string, max int) string {
	switch {
	case s == "":
		return "must not be empty"
	case len(s) > max:
		return fmt.Sprintf("must be at most %d characters (has %d)", max, len(s))
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return fmt.Sprintf("must contain only lowercase letters, digits and '-' (found %q)", r)
		}
	}
	if s[0] == '-' || s[len(s)-1] == '-' {
		return "must start and end with a lowercase letter or digit"
	}
	if errs := validation.IsDNS1123Label(s); len(errs) > 0 {
		return strings.Join(errs, "; ") // not reached: the checks above are the same rule
	}
	return ""
}

// ProjectProblem says why s is not a valid project name (the PROJECT of
// TENANT/PROJECT), or returns "": the rule ValidateProjectRef applies, for
// a form that checks a name as it is typed.
func ProjectProblem(s string) string { return projectProblem(s) }

// projectProblem says why s is not a valid project name, or returns "".
func projectProblem(s string) string {
	if r := labelProblem(s, MaxNameLength); r != "" {
		return r
	}
	if s[0] < 'a' || s[0] > 'z' {
		return "must start with a lowercase letter (it names a Service)"
	}
	return ""
}

// domainProblem says why s is not a valid DNS subdomain, or returns "".
func domainProblem(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if len(s) > validation.DNS1123SubdomainMaxLength {
		return fmt.Sprintf("must be at most %d characters (has %d)", validation.DNS1123SubdomainMaxLength, len(s))
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" {
			return "must be a DNS name: dot-separated labels, none empty"
		}
		if len(label) > validation.DNS1123LabelMaxLength {
			return fmt.Sprintf("label %q must be at most %d characters (has %d)", label, validation.DNS1123LabelMaxLength, len(label))
		}
		if r := labelProblem(label, validation.DNS1123LabelMaxLength); r != "" {
			return fmt.Sprintf("label %q %s", label, r)
		}
	}
	if errs := validation.IsDNS1123Subdomain(s); len(errs) > 0 {
		return strings.Join(errs, "; ")
	}
	return ""
}

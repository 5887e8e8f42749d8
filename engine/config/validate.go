package config

import (
	"fmt"
	pathpkg "path"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kilnctl/kiln/engine/failure"
)

// Validate checks an effective config (defaults applied) for cluster NAME;
// with name "" the NAME is metadata.name, which must then be valid. All
// problems are reported at once, by field path; the error is failure.BadInput and
// wraps Problems.
func (c *ClusterConfig) Validate(name string) error {
	if name != "" {
		if err := ValidateName(name); err != nil {
			return err
		}
	}
	ps := Problems(validate(c, name, func(string) bool { return false }))
	if len(ps) > 0 {
		sortProblems(ps)
		return failure.BadInput("%w", ps)
	}
	return nil
}

// validate checks values. present says whether the source spelled a path
// out; it only chooses between "required" and a message about the zero
// value given.
func validate(c *ClusterConfig, name string, present func(string) bool) []Problem {
	var ps []Problem
	bad := func(path, format string, args ...any) {
		ps = append(ps, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	exact := func(path, got, want string) {
		switch {
		case got == want:
		case got == "" && !present(path):
			bad(path, "required; must be %s", want)
		default:
			bad(path, "must be %s, got %s", want, quoteShort(got))
		}
	}
	exact("apiVersion", c.APIVersion, APIVersion)
	exact("kind", c.Kind, Kind)

	switch got := c.Metadata.Name; {
	case name != "" && got != name:
		bad("metadata.name", "%s does not match NAME %q given on the command line", quoteShort(got), name)
	case name == "" && got == "":
		bad("metadata.name", "required")
	case name == "":
		if r := labelProblem(got, MaxNameLength); r != "" {
			bad("metadata.name", "%s: %s", quoteShort(got), r)
		}
	}

	s := &c.Spec
	if len(s.Tenants) == 0 {
		bad("spec.tenants", "must list at least one tenant (leave it out for [%s])", DefaultTenant)
	}
	firstTenant := map[string]int{}
	for i, t := range s.Tenants {
		p := indexPath("spec.tenants", i)
		if r := labelProblem(t, MaxNameLength); r != "" {
			bad(p, "tenant %s: %s", quoteShort(t), r)
			continue
		}
		if j, dup := firstTenant[t]; dup {
			bad(p, "duplicate tenant %q (also %s)", t, indexPath("spec.tenants", j))
			continue
		}
		firstTenant[t] = i
	}

	switch r := domainProblem(s.Domain); {
	case s.Domain == "" && !present("spec.domain"):
		if labelProblem(c.Metadata.Name, MaxNameLength) == "" {
			bad("spec.domain", "required")
		} // else the default could not be derived; metadata.name is reported
	case s.Domain == "":
		bad("spec.domain", "%s", r)
	case r != "":
		bad("spec.domain", "%s: %s", quoteShort(s.Domain), r)
	}

	if s.Gateway.Image != DefaultGatewayImage || present("spec.gateway.image") {
		// Unset means kiln's own gateway image; spelled out, it must be one.
		imageProblem(bad, "spec.gateway.image", s.Gateway.Image, present)
	}
	if r := s.Gateway.Replicas; r < 1 || r > MaxGatewayReplicas {
		if r == 0 && !present("spec.gateway.replicas") {
			bad("spec.gateway.replicas", "required")
		} else {
			bad("spec.gateway.replicas", "must be between 1 and %d, got %d", MaxGatewayReplicas, r)
		}
	}

	switch g := s.Gateway; {
	case g.Expose == "" && present("spec.gateway.expose"):
		bad("spec.gateway.expose", "must be one of %s (leave it out for the provider's default)", strings.Join(ExposeModes, ", "))
	case g.Expose != "" && !slices.Contains(ExposeModes, g.Expose):
		bad("spec.gateway.expose", "%s: must be one of %s (loadBalancer: a Service of type LoadBalancer; ingress: the cluster's ingress controller serves the project routes; nodePort: a NodePort Service; none: kubectl port-forward only)", quoteShort(g.Expose), strings.Join(ExposeModes, ", "))
	}
	subdomainProblem(bad, "spec.gateway.ingressClassName", s.Gateway.IngressClassName, present, "an IngressClass name")
	if t := s.Gateway.TLS; t != nil {
		if t.SecretName == "" && !present("spec.gateway.tls.secretName") {
			bad("spec.gateway.tls.secretName", "required (a kubernetes.io/tls Secret in kiln-system)")
		} else {
			subdomainProblem(bad, "spec.gateway.tls.secretName", t.SecretName, func(string) bool { return true }, "a Secret name")
		}
	}

	if len(s.Stacks) == 0 {
		bad("spec.stacks", "must list at least one stack (leave it out for the default stack)")
	}
	firstStack := map[string]int{}
	for i, st := range s.Stacks {
		sp := stackPath(i)
		np := sp + ".name"
		switch r := labelProblem(st.Name, MaxNameLength); {
		case st.Name == "" && !present(np):
			bad(np, "required")
		case r != "":
			bad(np, "stack name %s: %s", quoteShort(st.Name), r)
		default:
			if j, dup := firstStack[st.Name]; dup {
				bad(np, "duplicate stack name %q (also %s)", st.Name, stackPath(j))
			} else {
				firstStack[st.Name] = i
			}
		}
		imageProblem(bad, sp+".image", st.Image, present)
		if st.Port < 1 || st.Port > 65535 {
			if st.Port == 0 && !present(sp+".port") {
				bad(sp+".port", "required (1-65535)")
			} else {
				bad(sp+".port", "must be between 1 and 65535, got %d", st.Port)
			}
		}
		quantityProblem(bad, sp+".cpu", st.CPU, present, "100m")
		quantityProblem(bad, sp+".memory", st.Memory, present, "128Mi")
		writablePathsProblem(bad, sp+".writablePaths", st.WritablePaths, present)
	}
	switch s.TenantIsolation {
	case IsolationGateway, IsolationNamespace:
	case "":
		if present("spec.tenantIsolation") {
			bad("spec.tenantIsolation", "must be %s or %s (leave it out for %s)", IsolationGateway, IsolationNamespace, IsolationGateway)
		}
	default:
		bad("spec.tenantIsolation", "%s: must be %s (only the gateway reaches tenant pods) or %s (also the tenant's own pods)", quoteShort(s.TenantIsolation), IsolationGateway, IsolationNamespace)
	}
	return ps
}

// subdomainProblem checks an optional object name that must be a DNS-1123
// subdomain (what names an IngressClass or a Secret); what says what it
// names.
func subdomainProblem(bad func(string, string, ...any), path, v string, present func(string) bool, what string) {
	if v == "" {
		if present(path) {
			bad(path, "must not be empty (leave it out when unset)")
		}
		return
	}
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		bad(path, "%s is not %s: %s", quoteShort(v), what, strings.Join(errs, "; "))
	}
}

// writablePathsProblem checks a stack's writablePaths: absolute, clean
// directories (each becomes an emptyDir mount), not the root, no
// duplicates, at most MaxWritablePaths.
func writablePathsProblem(bad func(string, string, ...any), path string, paths []string, present func(string) bool) {
	if paths != nil && len(paths) == 0 && present(path) {
		bad(path, "must list at least one directory (leave it out for none)")
	}
	if len(paths) > MaxWritablePaths {
		bad(path, "at most %d directories, got %d", MaxWritablePaths, len(paths))
		return
	}
	first := map[string]int{}
	for i, p := range paths {
		ep := indexPath(path, i)
		switch {
		case p == "":
			bad(ep, "must not be empty")
		case len(p) > 1024:
			bad(ep, "longer than 1024 characters")
		case strings.IndexFunc(p, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == ':' }) >= 0:
			bad(ep, "%s must not contain spaces, colons or control characters", quoteShort(p))
		case !strings.HasPrefix(p, "/"):
			bad(ep, "%s must be an absolute path (like /tmp)", quoteShort(p))
		case p == "/":
			bad(ep, "the root directory cannot be writable: name the directories the stack writes to")
		case pathpkg.Clean(p) != p:
			bad(ep, "%s is not a clean path (use %s)", quoteShort(p), quoteShort(pathpkg.Clean(p)))
		default:
			if j, dup := first[p]; dup {
				bad(ep, "duplicate path %q (also %s)", p, indexPath(path, j))
			} else {
				first[p] = i
			}
		}
	}
}

func imageProblem(bad func(string, string, ...any), path, image string, present func(string) bool) {
	switch {
	case image == "" && !present(path):
		bad(path, "required")
	case strings.TrimSpace(image) == "":
		bad(path, "must not be empty")
	case strings.IndexFunc(image, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		bad(path, "image %s must not contain spaces or control characters", quoteShort(image))
	case !imageRef.MatchString(image):
		bad(path, "image %s is not an image reference: [REGISTRY[:PORT]/]REPOSITORY[:TAG][@DIGEST], lowercase repository (like nginx:1.27 or ghcr.io/org/app@sha256:…)", quoteShort(image))
	case len(imageName(image)) > 255:
		bad(path, "image %s: name longer than 255 characters", quoteShort(image))
	}
}

// imageName is the registry and repository of an image reference, without
// tag or digest.
func imageName(image string) string {
	name, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	return name
}

// imageRef is the grammar of a container image reference as registries and
// the kubelet accept it (the distribution reference grammar): an optional
// registry host (with port), a lowercase repository path, an optional tag
// and an optional digest.
var imageRef = func() *regexp.Regexp {
	const (
		alnum     = `[a-z0-9]+`
		separator = `(?:[._]|__|[-]+)`
		component = alnum + `(?:` + separator + alnum + `)*`
		hostLabel = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
		host      = hostLabel + `(?:\.` + hostLabel + `)*(?::[0-9]+)?`
		tag       = `[\w][\w.-]{0,127}`
		digest    = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}`
	)
	return regexp.MustCompile(`^(?:` + host + `/)?` + component + `(?:/` + component + `)*(?::` + tag + `)?(?:@` + digest + `)?$`)
}()

func quantityProblem(bad func(string, string, ...any), path, v string, present func(string) bool, example string) {
	if v == "" {
		if present(path) {
			bad(path, "must not be empty")
		} else {
			bad(path, "required")
		}
		return
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		bad(path, "%s is not a quantity (e.g. %s)", quoteShort(v), example)
		return
	}
	if q.Sign() <= 0 {
		bad(path, "must be greater than zero, got %s", quoteShort(v))
	}
}

// ValidateStack checks one stack as the config validation does (name,
// image reference, port, cpu and memory), for a stack read back from the
// cluster — a project spec stores its stack resolved, and kiln re-checks it
// before deploying it. The error lists every problem under path.
func ValidateStack(path string, st Stack) error {
	var ps Problems
	bad := func(p, format string, args ...any) {
		ps = append(ps, Problem{Path: p, Message: fmt.Sprintf(format, args...)})
	}
	present := func(string) bool { return false }
	if r := labelProblem(st.Name, MaxNameLength); r != "" {
		bad(path+".name", "stack name %s: %s", quoteShort(st.Name), r)
	}
	imageProblem(bad, path+".image", st.Image, present)
	if st.Port < 1 || st.Port > 65535 {
		bad(path+".port", "must be between 1 and 65535, got %d", st.Port)
	}
	quantityProblem(bad, path+".cpu", st.CPU, present, "100m")
	quantityProblem(bad, path+".memory", st.Memory, present, "128Mi")
	writablePathsProblem(bad, path+".writablePaths", st.WritablePaths, present)
	if len(ps) > 0 {
		return ps
	}
	return nil
}

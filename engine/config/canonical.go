package config

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	sigsyaml "sigs.k8s.io/yaml"
)

// Canonical renders the effective config (c with defaults applied) as
// deterministic YAML: keys sorted, list order kept. It is what kiln stores
// in ConfigMap kiln-system/kiln-config, key config.yaml, and what
// ParseCanonical reads back. An invalid config (validated against its own
// metadata.name) is refused with failure.BadInput. c is not modified.
func (c *ClusterConfig) Canonical() ([]byte, error) {
	e := c.clone()
	e.ApplyDefaults()
	if err := e.Validate(""); err != nil {
		return nil, err
	}
	j, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("config: encode: %w", err)
	}
	y, err := sigsyaml.JSONToYAML(j)
	if err != nil {
		return nil, fmt.Errorf("config: encode: %w", err)
	}
	return y, nil
}

// Diff compares the installed config a (labelled "cluster") with b
// (labelled "file"), both taken with defaults applied, and returns one
// sorted line per differing field, e.g.
//
//	spec.tenants: [default] (cluster) vs [default staging] (file)
//
// Tenants are compared as a set; stacks in order (a different list of stack
// names is one line, plus field lines for positions whose names agree).
// Quantities compare by value (0.1 equals 100m). Empty means equal.
func Diff(a, b *ClusterConfig) []string {
	x, y := a.clone(), b.clone()
	x.ApplyDefaults()
	y.ApplyDefaults()
	var out []string
	str := func(path, u, v string) {
		if u != v {
			out = append(out, fmt.Sprintf("%s: %s (cluster) vs %s (file)", path, showString(u), showString(v)))
		}
	}
	num := func(path string, u, v int32) {
		if u != v {
			out = append(out, fmt.Sprintf("%s: %d (cluster) vs %d (file)", path, u, v))
		}
	}
	qty := func(path, u, v string) {
		if !sameQuantity(u, v) {
			str(path, u, v)
		}
	}
	list := func(path string, u, v []string) {
		out = append(out, fmt.Sprintf("%s: %s (cluster) vs %s (file)", path, showList(u), showList(v)))
	}

	str("apiVersion", x.APIVersion, y.APIVersion)
	str("kind", x.Kind, y.Kind)
	str("metadata.name", x.Metadata.Name, y.Metadata.Name)

	tx, ty := setOf(x.Spec.Tenants), setOf(y.Spec.Tenants)
	if !slices.Equal(tx, ty) {
		list("spec.tenants", tx, ty)
	}
	str("spec.domain", x.Spec.Domain, y.Spec.Domain)
	str("spec.tenantIsolation", isolation(x.Spec.TenantIsolation), isolation(y.Spec.TenantIsolation))
	if u, v := x.Spec.Gateway.Image, y.Spec.Gateway.Image; u != v && !(x.Spec.Gateway.IsDefaultImage() && y.Spec.Gateway.IsDefaultImage()) {
		out = append(out, fmt.Sprintf("spec.gateway.image: %s (cluster) vs %s (file)", showGatewayImage(u), showGatewayImage(v)))
	}
	num("spec.gateway.replicas", x.Spec.Gateway.Replicas, y.Spec.Gateway.Replicas)
	// expose left out of the file is kiln's choice at create time: it
	// matches whatever the cluster recorded.
	if u, v := x.Spec.Gateway.Expose, y.Spec.Gateway.Expose; v != "" && u != v {
		out = append(out, fmt.Sprintf("spec.gateway.expose: %s (cluster) vs %s (file)", showExpose(u), v))
	}
	str("spec.gateway.ingressClassName", x.Spec.Gateway.IngressClassName, y.Spec.Gateway.IngressClassName)
	str("spec.gateway.tls.secretName", x.Spec.Gateway.TLSSecret(), y.Spec.Gateway.TLSSecret())

	nx, ny := stackNames(x.Spec.Stacks), stackNames(y.Spec.Stacks)
	if !slices.Equal(nx, ny) {
		list("spec.stacks", nx, ny)
	}
	for i := range min(len(x.Spec.Stacks), len(y.Spec.Stacks)) {
		u, v := x.Spec.Stacks[i], y.Spec.Stacks[i]
		if u.Name != v.Name {
			continue // reported with the names
		}
		p := stackPath(i)
		str(p+".image", u.Image, v.Image)
		num(p+".port", u.Port, v.Port)
		qty(p+".cpu", u.CPU, v.CPU)
		qty(p+".memory", u.Memory, v.Memory)
		if !slices.Equal(u.WritablePaths, v.WritablePaths) {
			list(p+".writablePaths", u.WritablePaths, v.WritablePaths)
		}
	}
	slices.Sort(out)
	return out
}

// isolation is spec.tenantIsolation with its default spelled out: unset
// and "gateway" mean the same.
func isolation(s string) string {
	if s == "" {
		return IsolationGateway
	}
	return s
}

func setOf(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

func stackNames(s []Stack) []string {
	names := make([]string, len(s))
	for i, st := range s {
		names[i] = st.Name
	}
	return names
}

func sameQuantity(u, v string) bool {
	if u == v {
		return true
	}
	qu, err1 := resource.ParseQuantity(u)
	qv, err2 := resource.ParseQuantity(v)
	return err1 == nil && err2 == nil && qu.Cmp(qv) == 0
}

// showExpose names an expose a kiln-config written before kiln chose a
// front door leaves unset.
func showExpose(s string) string {
	if s == "" {
		return "unset (a ClusterIP Service)"
	}
	return s
}

// showGatewayImage names the default (empty) gateway image.
func showGatewayImage(s string) string {
	if (Gateway{Image: s}).IsDefaultImage() {
		return "unset (kiln's own gateway)"
	}
	return showString(s)
}

func showString(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\n\"") {
		return quoteShort(s)
	}
	return s
}

func showList(s []string) string {
	parts := make([]string, len(s))
	for i, e := range s {
		parts[i] = showString(e)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

package config

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kilnctl/kiln/engine/failure"
)

func TestDefault(t *testing.T) {
	c := Default("dev1")
	want := &ClusterConfig{
		APIVersion: "kiln.dev/v1alpha1",
		Kind:       "ClusterConfig",
		Metadata:   Metadata{Name: "dev1"},
		Spec: Spec{
			Tenants: []string{"default"},
			Domain:  "dev1.kiln.test",
			Gateway: Gateway{Replicas: 1},
			Stacks:  []Stack{{Name: "default", Image: "nginxinc/nginx-unprivileged:1.27-alpine", Port: 8080, CPU: "50m", Memory: "64Mi", WritablePaths: []string{"/tmp"}}},
		},
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("Default = %+v", c)
	}
	if err := c.Validate("dev1"); err != nil {
		t.Errorf("Default is invalid: %v", err)
	}
	if err := c.Validate(""); err != nil {
		t.Errorf("Default is invalid by its own name: %v", err)
	}
	if d := Diff(c, Default("dev1")); len(d) != 0 {
		t.Errorf("Diff(Default, Default) = %q", d)
	}
}

func TestApplyDefaults(t *testing.T) {
	c := &ClusterConfig{Metadata: Metadata{Name: "dev1"}}
	c.ApplyDefaults()
	if !reflect.DeepEqual(c, Default("dev1")) {
		t.Errorf("ApplyDefaults on an empty config = %+v", c)
	}

	c = &ClusterConfig{
		Metadata: Metadata{Name: "dev1"},
		Spec: Spec{
			Domain:  "x.test",
			Gateway: Gateway{Replicas: 3},
			Stacks:  []Stack{{Name: "a", Image: "i", Port: 1, Memory: "1Gi"}},
		},
	}
	c.ApplyDefaults()
	if c.Spec.Domain != "x.test" || c.Spec.Gateway != (Gateway{Image: DefaultGatewayImage, Replicas: 3}) ||
		!reflect.DeepEqual(c.Spec.Stacks[0], Stack{Name: "a", Image: "i", Port: 1, CPU: DefaultCPU, Memory: "1Gi"}) ||
		!reflect.DeepEqual(c.Spec.Tenants, []string{DefaultTenant}) {
		t.Errorf("ApplyDefaults kept or filled the wrong fields: %+v", c)
	}

	// No name: no domain. Empty (non-nil) lists are kept and fail validation.
	c = &ClusterConfig{Spec: Spec{Tenants: []string{}, Stacks: []Stack{}}}
	c.ApplyDefaults()
	if c.Spec.Domain != "" || c.Spec.Tenants == nil || len(c.Spec.Tenants) != 0 || len(c.Spec.Stacks) != 0 {
		t.Errorf("ApplyDefaults = %+v", c)
	}
	err := c.Validate("")
	want := strings.Join([]string{
		"metadata.name: required",
		"spec.stacks: must list at least one stack (leave it out for the default stack)",
		"spec.tenants: must list at least one tenant (leave it out for [default])",
	}, "\n")
	if err == nil || err.Error() != want || failure.Of(err) != failure.Input {
		t.Errorf("Validate = %v, want\n%s", err, want)
	}
}

func TestValidate(t *testing.T) {
	c := Default("dev1")
	c.Spec.Stacks = append(c.Spec.Stacks, Stack{Name: "default", Port: 99999, CPU: "x"})
	err := c.Validate("dev2")
	want := strings.Join([]string{
		`metadata.name: "dev1" does not match NAME "dev2" given on the command line`,
		`spec.stacks[1].cpu: "x" is not a quantity (e.g. 100m)`,
		"spec.stacks[1].image: required",
		"spec.stacks[1].memory: required",
		`spec.stacks[1].name: duplicate stack name "default" (also spec.stacks[0])`,
		"spec.stacks[1].port: must be between 1 and 65535, got 99999",
	}, "\n")
	if err == nil || err.Error() != want || failure.Of(err) != failure.Input {
		t.Errorf("Validate = %v, want\n%s", err, want)
	}
	if err := Default("dev1").Validate("Bad"); err == nil || !strings.HasPrefix(err.Error(), `NAME "Bad": `) {
		t.Errorf("Validate with a bad NAME: %v", err)
	}
	c = Default("dev1")
	c.Metadata.Name = "Bad"
	if err := c.Validate(""); err == nil || err.Error() != `metadata.name: "Bad": must contain only lowercase letters, digits and '-' (found 'B')` {
		t.Errorf("Validate of a bad metadata.name: %v", err)
	}
}

func TestStackAndTenantNamespace(t *testing.T) {
	c, err := Parse("kiln.yaml", []byte(exampleFile), "dev1")
	if err != nil {
		t.Fatal(err)
	}
	s, ok := c.Stack("api")
	if !ok || s.Image != "ghcr.io/example/api:v1.4.2" || s.Port != 8080 {
		t.Errorf("Stack(api) = %+v, %v", s, ok)
	}
	if s, ok := c.Stack("nope"); ok || !reflect.DeepEqual(s, Stack{}) {
		t.Errorf("Stack(nope) = %+v, %v", s, ok)
	}
	if got := TenantNamespace("staging"); got != "kiln-tenant-staging" {
		t.Errorf("TenantNamespace = %q", got)
	}
}

const wantCanonical = `apiVersion: kiln.dev/v1alpha1
kind: ClusterConfig
metadata:
  name: dev1
spec:
  domain: dev1.kiln.test
  gateway:
    replicas: 1
  stacks:
  - cpu: 50m
    image: nginxinc/nginx-unprivileged:1.27-alpine
    memory: 64Mi
    name: default
    port: 8080
    writablePaths:
    - /tmp
  tenants:
  - default
`

func TestCanonical(t *testing.T) {
	got, err := Default("dev1").Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != wantCanonical {
		t.Errorf("Canonical =\n%s\nwant\n%s", got, wantCanonical)
	}

	// Canonical applies defaults to a copy.
	partial := &ClusterConfig{Metadata: Metadata{Name: "dev1"}}
	got, err = partial.Canonical()
	if err != nil || string(got) != wantCanonical {
		t.Errorf("Canonical of a partial config = %s, %v", got, err)
	}
	if partial.Spec.Tenants != nil || partial.APIVersion != "" {
		t.Errorf("Canonical modified its receiver: %+v", partial)
	}

	// Invalid configs are refused.
	bad := Default("dev1")
	bad.Spec.Gateway.Replicas = 50
	if _, err := bad.Canonical(); err == nil || failure.Of(err) != failure.Input || !strings.Contains(err.Error(), "spec.gateway.replicas") {
		t.Errorf("Canonical of an invalid config: %v", err)
	}
	if _, err := (&ClusterConfig{}).Canonical(); err == nil || err.Error() != "metadata.name: required" {
		t.Errorf("Canonical without a name: %v", err)
	}
}

func TestCanonicalRoundTrip(t *testing.T) {
	inputs := map[string]string{
		"example": exampleFile,
		"minimal": hdr,
		"secure":  hdr + "spec:\n  tenantIsolation: namespace\n  stacks: [{name: s, image: x, port: 8080, writablePaths: [/tmp, /var/cache/app]}]\n",
		"odd":     hdr + "spec:\n  tenants: [z, \"1\", a]\n  stacks: [{name: s, image: \"reg:5000/x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\", port: 8443, cpu: \"1\", memory: 1e9}]\n",
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			c, err := Parse("kiln.yaml", []byte(in), "dev1")
			if err != nil {
				t.Fatal(err)
			}
			data, err := c.Canonical()
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParseCanonical(data)
			if err != nil {
				t.Fatalf("ParseCanonical(%s): %v", data, err)
			}
			if !reflect.DeepEqual(back, c) {
				t.Errorf("round trip:\n%+v\nwant\n%+v", back, c)
			}
			again, err := back.Canonical()
			if err != nil || !bytes.Equal(again, data) {
				t.Errorf("Canonical not stable:\n%s\nthen\n%s (%v)", data, again, err)
			}
			if d := Diff(c, back); len(d) != 0 {
				t.Errorf("Diff after round trip = %q", d)
			}
		})
	}
}

func TestParseCanonicalErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "empty", in: "", want: CanonicalSource + ": empty config file; expected one ClusterConfig document"},
		{name: "no name", in: hdr, want: CanonicalSource + ":1:1: metadata.name: required"},
		{name: "bad name", in: hdr + "metadata: {name: X}\n", want: CanonicalSource + `:3:18: metadata.name: "X": must contain only lowercase letters, digits and '-' (found 'X')`},
		{name: "unknown field", in: hdr + "metadata: {name: a}\nstatus: {}\n", want: CanonicalSource + ":4:1: status: unknown field (known: apiVersion, kind, metadata, spec)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseCanonical([]byte(tt.in))
			if err == nil {
				t.Fatal("ParseCanonical succeeded")
			}
			if want := "stored cluster config is invalid:\n" + tt.want; err.Error() != want {
				t.Errorf("error:\n%s\nwant:\n%s", err, want)
			}
			if failure.Of(err) != failure.Failed {
				t.Errorf("failure.Of = %v, want %v", failure.Of(err), failure.Failed)
			}
			var ps Problems
			if !errors.As(err, &ps) {
				t.Errorf("error does not wrap Problems")
			}
		})
	}
	c, err := ParseCanonical([]byte(hdr + "metadata: {name: dev9}\n"))
	if err != nil || !reflect.DeepEqual(c, Default("dev9")) {
		t.Errorf("ParseCanonical of a minimal config = %+v, %v", c, err)
	}
}

func TestDiff(t *testing.T) {
	mod := func(f func(c *ClusterConfig)) *ClusterConfig {
		c := Default("dev1")
		f(c)
		return c
	}
	twoStacks := func(c *ClusterConfig) {
		c.Spec.Stacks = []Stack{
			{Name: "web", Image: "nginx", Port: 80, CPU: "100m", Memory: "128Mi"},
			{Name: "api", Image: "api:1", Port: 8080, CPU: "250m", Memory: "256Mi"},
		}
	}
	tests := []struct {
		name string
		a, b *ClusterConfig
		want []string
	}{
		{name: "equal", a: Default("dev1"), b: Default("dev1")},
		{
			name: "equal after defaults",
			a:    Default("dev1"),
			b:    &ClusterConfig{Metadata: Metadata{Name: "dev1"}},
		},
		{
			name: "tenants are a set",
			a:    mod(func(c *ClusterConfig) { c.Spec.Tenants = []string{"a", "b", "default"} }),
			b:    mod(func(c *ClusterConfig) { c.Spec.Tenants = []string{"default", "b", "a"} }),
		},
		{
			name: "tenant added",
			a:    Default("dev1"),
			b:    mod(func(c *ClusterConfig) { c.Spec.Tenants = []string{"staging", "default"} }),
			want: []string{"spec.tenants: [default] (cluster) vs [default staging] (file)"},
		},
		{
			name: "quantities compare by value",
			a:    mod(func(c *ClusterConfig) { c.Spec.Stacks[0].CPU = "100m"; c.Spec.Stacks[0].Memory = "1Gi" }),
			b:    mod(func(c *ClusterConfig) { c.Spec.Stacks[0].CPU = "0.1"; c.Spec.Stacks[0].Memory = "1073741824" }),
		},
		{
			name: "scalar fields",
			a:    Default("dev1"),
			b: mod(func(c *ClusterConfig) {
				c.Metadata.Name = "dev2"
				c.Spec.Domain = "example.test"
				c.Spec.Gateway = Gateway{Image: "nginx:1.28", Replicas: 3}
				c.Spec.Stacks[0] = Stack{Name: "default", Image: "httpd", Port: 80, CPU: "1", Memory: "64Mi", WritablePaths: []string{"/tmp"}}
			}),
			want: []string{
				"metadata.name: dev1 (cluster) vs dev2 (file)",
				"spec.domain: dev1.kiln.test (cluster) vs example.test (file)",
				"spec.gateway.image: unset (kiln's own gateway) (cluster) vs nginx:1.28 (file)",
				"spec.gateway.replicas: 1 (cluster) vs 3 (file)",
				"spec.stacks[0].cpu: 50m (cluster) vs 1 (file)",
				"spec.stacks[0].image: nginxinc/nginx-unprivileged:1.27-alpine (cluster) vs httpd (file)",
				"spec.stacks[0].port: 8080 (cluster) vs 80 (file)",
			},
		},
		{
			name: "stacks are ordered",
			a:    mod(twoStacks),
			b: mod(func(c *ClusterConfig) {
				twoStacks(c)
				c.Spec.Stacks[0], c.Spec.Stacks[1] = c.Spec.Stacks[1], c.Spec.Stacks[0]
			}),
			want: []string{"spec.stacks: [web api] (cluster) vs [api web] (file)"},
		},
		{
			name: "stack added",
			a:    mod(twoStacks),
			b: mod(func(c *ClusterConfig) {
				twoStacks(c)
				c.Spec.Stacks = append(c.Spec.Stacks, Stack{Name: "db", Image: "pg", Port: 5432})
				c.Spec.Stacks[1].Memory = "512Mi"
			}),
			want: []string{
				"spec.stacks: [web api] (cluster) vs [web api db] (file)",
				"spec.stacks[1].memory: 256Mi (cluster) vs 512Mi (file)",
			},
		},
		{
			name: "tenant isolation unset is gateway",
			a:    Default("dev1"),
			b:    mod(func(c *ClusterConfig) { c.Spec.TenantIsolation = IsolationGateway }),
		},
		{
			name: "tenant isolation and writable paths",
			a:    Default("dev1"),
			b: mod(func(c *ClusterConfig) {
				c.Spec.TenantIsolation = IsolationNamespace
				c.Spec.Stacks[0].WritablePaths = []string{"/tmp", "/var/cache/nginx"}
			}),
			want: []string{
				"spec.stacks[0].writablePaths: [/tmp] (cluster) vs [/tmp /var/cache/nginx] (file)",
				"spec.tenantIsolation: gateway (cluster) vs namespace (file)",
			},
		},
		{
			name: "empty values are shown",
			a:    mod(func(c *ClusterConfig) { c.Spec.Tenants = []string{} }),
			b:    Default("dev1"),
			want: []string{"spec.tenants: [] (cluster) vs [default] (file)"},
		},
		{
			name: "nil is an empty config",
			a:    nil,
			b:    Default("dev1"),
			want: []string{
				`metadata.name: "" (cluster) vs dev1 (file)`,
				`spec.domain: "" (cluster) vs dev1.kiln.test (file)`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Diff(tt.a, tt.b)
			if !reflect.DeepEqual(got, tt.want) && !(len(got) == 0 && len(tt.want) == 0) {
				t.Errorf("Diff =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
	// Diff does not modify its arguments.
	a := &ClusterConfig{Metadata: Metadata{Name: "dev1"}}
	Diff(a, Default("dev1"))
	if a.Spec.Tenants != nil {
		t.Errorf("Diff modified its argument")
	}
}

func TestProblemString(t *testing.T) {
	tests := []struct {
		p    Problem
		want string
	}{
		{Problem{File: "f", Line: 1, Column: 2, Path: "spec", Message: "m"}, "f:1:2: spec: m"},
		{Problem{File: "f", Line: 1, Message: "m"}, "f:1: m"},
		{Problem{File: "f", Path: "p", Message: "m"}, "f: p: m"},
		{Problem{Path: "p", Message: "m"}, "p: m"},
	}
	for _, tt := range tests {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.p, got, tt.want)
		}
	}
}

// Image references are checked against the grammar registries and the
// kubelet accept, so a bad one is exit 2 before anything is written.
func TestImageReferences(t *testing.T) {
	long := strings.Repeat("a", 256)
	for image, ok := range map[string]bool{
		"nginx":                             true,
		"nginx:1.27-alpine":                 true,
		"library/nginx:latest":              true,
		"ghcr.io/kilnctl/kiln:v0.3.0":       true,
		"localhost:5000/team/app_x.y-z:dev": true,
		"reg.example.com/a/b/c@sha256:" + strings.Repeat("ab", 32): true,
		"reg.example.com/a:tag@sha256:" + strings.Repeat("ab", 32): true,
		"Nginx":                           false, // uppercase repository
		"nginx:":                          false,
		"nginx:-tag":                      false,
		"nginx@sha256:abc":                false, // digest too short
		"-nginx":                          false,
		"ghcr.io//app":                    false,
		"ghcr.io/app:1.0+build":           false,
		"app:" + strings.Repeat("t", 129): false,
		long:                              false,
		"ghcr.io/" + long + ":v1":         false,
	} {
		err := ValidateStack("s", Stack{Name: "s", Image: image, Port: 80, CPU: "100m", Memory: "64Mi"})
		if (err == nil) != ok {
			t.Errorf("%q: valid=%v, want %v (%v)", image, err == nil, ok, err)
		}
	}
}

// A kiln-config written when nginx was the default gateway names that
// image; it reads as unset, so such a cluster gets kiln's own gateway and
// no config difference from a file that leaves the image out.
func TestLegacyGatewayImageReadsAsUnset(t *testing.T) {
	legacy := strings.Replace(wantCanonical, "  gateway:\n", "  gateway:\n    image: "+LegacyGatewayImage+"\n", 1)
	c, err := ParseCanonical([]byte(legacy))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Spec.Gateway.IsDefaultImage() {
		t.Errorf("spec.gateway.image %q is not the default", c.Spec.Gateway.Image)
	}
	if d := Diff(c, Default("dev1")); len(d) != 0 {
		t.Errorf("Diff(legacy, Default) = %q", d)
	}
	c.Spec.Gateway.Image = "registry.example.test/kiln:1.2.3"
	if err := c.Validate("dev1"); err != nil {
		t.Errorf("an explicit gateway image is invalid: %v", err)
	}
}

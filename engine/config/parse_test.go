package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kilnctl/kiln/engine/failure"
)

// hdr is the two required lines; what follows starts on line 3.
const hdr = "apiVersion: kiln.dev/v1alpha1\nkind: ClusterConfig\n"

// exampleFile is the config example of docs/clusters.md (once the
// README's); it must pass Load.
const exampleFile = `apiVersion: kiln.dev/v1alpha1
kind: ClusterConfig
metadata:
  name: dev1
spec:
  tenants: [default, staging]
  domain: dev1.example.test
  gateway: {image: "nginx:1.27-alpine", replicas: 2}
  stacks:
    - {name: web, image: "nginx:1.27-alpine", port: 80, cpu: 100m, memory: 128Mi}
    - name: api
      image: ghcr.io/example/api:v1.4.2
      port: 8080
      cpu: 250m
      memory: 256Mi
`

func TestParseValid(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want *ClusterConfig
	}{
		{
			name: "example",
			in:   exampleFile,
			want: &ClusterConfig{
				APIVersion: APIVersion, Kind: Kind, Metadata: Metadata{Name: "dev1"},
				Spec: Spec{
					Tenants: []string{"default", "staging"},
					Domain:  "dev1.example.test",
					Gateway: Gateway{Image: "nginx:1.27-alpine", Replicas: 2},
					Stacks: []Stack{
						{Name: "web", Image: "nginx:1.27-alpine", Port: 80, CPU: "100m", Memory: "128Mi"},
						{Name: "api", Image: "ghcr.io/example/api:v1.4.2", Port: 8080, CPU: "250m", Memory: "256Mi"},
					},
				},
			},
		},
		{name: "minimal", in: hdr, want: Default("dev1")},
		{name: "leading and trailing document markers", in: "---\n" + hdr + "---\n", want: Default("dev1")},
		{name: "comments", in: "# kiln\n" + hdr + "# end\n", want: Default("dev1")},
		{
			name: "nulls mean unset",
			in:   hdr + "metadata: {name: ~}\nspec:\n  tenants: ~\n  domain: null\n  gateway: {image: ~, replicas: ~}\n  stacks:\n",
			want: Default("dev1"),
		},
		{name: "empty spec", in: hdr + "metadata:\nspec: {}\n", want: Default("dev1")},
		{
			name: "stack defaults and numbers as strings",
			in:   hdr + "spec:\n  stacks:\n  - {name: a, image: x, port: 1}\n  - {name: b, image: x, port: 0x50, cpu: 1, memory: 1e9}\n  tenants: [123, a-b]\n",
			want: func() *ClusterConfig {
				c := Default("dev1")
				c.Spec.Tenants = []string{"123", "a-b"}
				c.Spec.Stacks = []Stack{
					{Name: "a", Image: "x", Port: 1, CPU: DefaultCPU, Memory: DefaultMemory},
					{Name: "b", Image: "x", Port: 80, CPU: "1", Memory: "1e9"},
				}
				return c
			}(),
		},
		{
			name: "anchors and aliases",
			in:   hdr + "spec:\n  gateway: {image: &img \"nginx:1.27-alpine\"}\n  stacks:\n  - {name: a, image: *img, port: 80}\n",
			want: func() *ClusterConfig {
				c := Default("dev1")
				c.Spec.Gateway.Image = "nginx:1.27-alpine"
				c.Spec.Stacks = []Stack{{Name: "a", Image: "nginx:1.27-alpine", Port: 80, CPU: DefaultCPU, Memory: DefaultMemory}}
				return c
			}(),
		},
		{
			name: "max values",
			in:   hdr + "metadata: {name: dev1}\nspec:\n  gateway: {replicas: 10}\n  stacks: [{name: a, image: x, port: 65535}]\n",
			want: func() *ClusterConfig {
				c := Default("dev1")
				c.Spec.Gateway.Replicas = 10
				c.Spec.Stacks = []Stack{{Name: "a", Image: "x", Port: 65535, CPU: DefaultCPU, Memory: DefaultMemory}}
				return c
			}(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("kiln.yaml", []byte(tt.in), "dev1")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string // every line of the error, in order
	}{
		// Structure.
		{name: "empty file", in: "", want: []string{"kiln.yaml: empty config file; expected one ClusterConfig document"}},
		{name: "only comments", in: "# nothing\n", want: []string{"kiln.yaml: empty config file; expected one ClusterConfig document"}},
		{name: "only a null", in: "---\n~\n", want: []string{"kiln.yaml: empty config file; expected one ClusterConfig document"}},
		{
			name: "two documents",
			in:   hdr + "---\n" + hdr,
			want: []string{"kiln.yaml:3:1: a second YAML document; the config must be exactly one document (the first is at line 1)"},
		},
		{name: "syntax error", in: hdr + "spec: [\n", want: []string{"kiln.yaml:3: invalid YAML: did not find expected node content"}},
		{name: "root is a list", in: "- a\n", want: []string{"kiln.yaml:1:1: expected a mapping, got a list"}},
		{name: "root is a scalar", in: "hello\n", want: []string{`kiln.yaml:1:1: expected a mapping, got "hello"`}},
		{
			name: "unknown top-level field",
			in:   hdr + "specs: {}\n",
			want: []string{"kiln.yaml:3:1: specs: unknown field (known: apiVersion, kind, metadata, spec)"},
		},
		{
			name: "unknown field differing in case",
			in:   "apiversion: kiln.dev/v1alpha1\nkind: ClusterConfig\n",
			want: []string{
				"kiln.yaml:1:1: apiVersion: required; must be kiln.dev/v1alpha1",
				"kiln.yaml:1:1: apiversion: unknown field (did you mean apiVersion? known: apiVersion, kind, metadata, spec)",
			},
		},
		{
			name: "unknown stack field",
			in:   hdr + "spec:\n  stacks:\n  - name: web\n    image: x\n    port: 80\n    cpus: 1\n",
			want: []string{"kiln.yaml:8:5: spec.stacks[0].cpus: unknown field (known: name, image, port, cpu, memory, writablePaths)"},
		},
		{
			name: "unknown field in flow mapping",
			in:   hdr + "spec:\n  gateway: {image: x, replica: 2}\n",
			want: []string{"kiln.yaml:4:23: spec.gateway.replica: unknown field (known: image, replicas, expose, ingressClassName, tls)"},
		},
		{
			name: "unknown metadata field",
			in:   hdr + "metadata:\n  name: dev1\n  labels: {a: b}\n",
			want: []string{"kiln.yaml:5:3: metadata.labels: unknown field (known: name)"},
		},
		{
			name: "duplicate top-level key",
			in:   hdr + "kind: ClusterConfig\n",
			want: []string{"kiln.yaml:3:1: kind: duplicate key (first at line 2, column 1)"},
		},
		{
			name: "duplicate nested key",
			in:   hdr + "spec:\n  domain: a.test\n  gateway: {replicas: 1}\n  domain: b.test\n",
			want: []string{"kiln.yaml:6:3: spec.domain: duplicate key (first at line 4, column 3)"},
		},
		{
			name: "duplicate key in a stack",
			in:   hdr + "spec:\n  stacks: [{name: a, image: x, port: 80, port: 81}]\n",
			want: []string{"kiln.yaml:4:42: spec.stacks[0].port: duplicate key (first at line 4, column 32)"},
		},
		{
			name: "merge key",
			in:   hdr + "spec:\n  gateway:\n    <<: {image: x}\n",
			want: []string{"kiln.yaml:5:5: spec.gateway.<<: merge keys are not supported; spell the fields out"},
		},
		{
			name: "non-scalar key",
			in:   hdr + "spec:\n  ? [a]\n  : b\n",
			want: []string{"kiln.yaml:4:5: spec: a mapping key must be a field name, got a list"},
		},

		// Types.
		{
			name: "replicas not an integer",
			in:   hdr + "spec:\n  gateway:\n    replicas: two\n",
			want: []string{`kiln.yaml:5:15: spec.gateway.replicas: expected an integer, got "two"`},
		},
		{
			name: "quoted integer",
			in:   hdr + "spec:\n  gateway: {replicas: \"2\"}\n",
			want: []string{`kiln.yaml:4:23: spec.gateway.replicas: expected an integer, got "2"`},
		},
		{
			name: "float port",
			in:   hdr + "spec:\n  stacks: [{name: a, image: x, port: 80.5}]\n",
			want: []string{`kiln.yaml:4:38: spec.stacks[0].port: expected an integer, got "80.5"`},
		},
		{
			name: "integer out of int32 range",
			in:   hdr + "spec:\n  gateway: {replicas: 4294967297}\n",
			want: []string{"kiln.yaml:4:23: spec.gateway.replicas: integer 4294967297 is out of range"},
		},
		{
			name: "mapping for a string",
			in:   hdr + "spec:\n  domain: {a: b}\n",
			want: []string{"kiln.yaml:4:11: spec.domain: expected a string, got a mapping"},
		},
		{
			name: "boolean for a string",
			in:   hdr + "spec:\n  tenants: [true]\n",
			want: []string{"kiln.yaml:4:13: spec.tenants[0]: expected a string, got the boolean true (quote it if you mean the string)"},
		},
		{
			name: "binary for a string",
			in:   hdr + "spec:\n  domain: !!binary aGVsbG8=\n",
			want: []string{"kiln.yaml:4:11: spec.domain: expected a string, got a value tagged !!binary"},
		},
		{
			name: "scalar for a list",
			in:   hdr + "spec:\n  tenants: default\n",
			want: []string{`kiln.yaml:4:12: spec.tenants: expected a list, got "default"`},
		},
		{
			name: "list for a mapping",
			in:   hdr + "spec:\n  gateway: [a]\n",
			want: []string{"kiln.yaml:4:12: spec.gateway: expected a mapping, got a list"},
		},
		{
			name: "scalar for spec",
			in:   hdr + "spec: yes\n",
			want: []string{`kiln.yaml:3:7: spec: expected a mapping, got "yes"`},
		},
		{
			name: "null list element",
			in:   hdr + "spec:\n  tenants: [a, ~]\n  stacks:\n  -\n",
			want: []string{
				"kiln.yaml:4:16: spec.tenants[1]: expected a string, got null",
				"kiln.yaml:6:4: spec.stacks[0]: expected a mapping, got null",
			},
		},
		{
			name: "scalar for a stack",
			in:   hdr + "spec:\n  stacks: [web]\n",
			want: []string{`kiln.yaml:4:12: spec.stacks[0]: expected a mapping, got "web"`},
		},
		{
			name: "alias used for a wrong type is reported where it is used",
			in:   hdr + "spec:\n  domain: &d {a: b}\n  gateway: {image: *d}\n",
			want: []string{
				"kiln.yaml:4:11: spec.domain: expected a string, got a mapping",
				"kiln.yaml:5:20: spec.gateway.image: expected a string, got a mapping",
			},
		},
		{
			name: "recursive alias",
			in:   hdr + "spec:\n  tenants: &t [a, *t]\n",
			want: []string{"kiln.yaml:4:19: spec.tenants[1]: expected a string, got a list"},
		},

		// Values.
		{
			name: "apiVersion and kind missing",
			in:   "metadata: {name: dev1}\n",
			want: []string{
				"kiln.yaml:1:1: apiVersion: required; must be kiln.dev/v1alpha1",
				"kiln.yaml:1:1: kind: required; must be ClusterConfig",
			},
		},
		{
			name: "apiVersion and kind wrong",
			in:   "apiVersion: v1\nkind: ConfigMap\n",
			want: []string{
				`kiln.yaml:1:13: apiVersion: must be kiln.dev/v1alpha1, got "v1"`,
				`kiln.yaml:2:7: kind: must be ClusterConfig, got "ConfigMap"`,
			},
		},
		{
			name: "empty apiVersion",
			in:   "apiVersion: \"\"\nkind: ClusterConfig\n",
			want: []string{`kiln.yaml:1:13: apiVersion: must be kiln.dev/v1alpha1, got ""`},
		},
		{
			name: "metadata.name differs from NAME",
			in:   hdr + "metadata:\n  name: dev2\n",
			want: []string{`kiln.yaml:4:9: metadata.name: "dev2" does not match NAME "dev1" given on the command line`},
		},
		{
			name: "tenants empty",
			in:   hdr + "spec:\n  tenants: []\n",
			want: []string{"kiln.yaml:4:12: spec.tenants: must list at least one tenant (leave it out for [default])"},
		},
		{
			name: "bad tenants",
			in:   hdr + "spec:\n  tenants:\n  - Staging\n  - -a\n  - " + strings.Repeat("t", 41) + "\n  - ok\n  - ok\n  - \"\"\n",
			want: []string{
				`kiln.yaml:5:5: spec.tenants[0]: tenant "Staging": must contain only lowercase letters, digits and '-' (found 'S')`,
				`kiln.yaml:6:5: spec.tenants[1]: tenant "-a": must start and end with a lowercase letter or digit`,
				`kiln.yaml:7:5: spec.tenants[2]: tenant "` + strings.Repeat("t", 41) + `": must be at most 40 characters (has 41)`,
				`kiln.yaml:9:5: spec.tenants[4]: duplicate tenant "ok" (also spec.tenants[3])`,
				`kiln.yaml:10:5: spec.tenants[5]: tenant "": must not be empty`,
			},
		},
		{
			name: "tenant of 40 characters is fine, domain empty is not",
			in:   hdr + "spec:\n  tenants: [" + strings.Repeat("t", 40) + "]\n  domain: \"\"\n",
			want: []string{"kiln.yaml:5:11: spec.domain: must not be empty"},
		},
		{
			name: "bad domains",
			in:   hdr + "spec:\n  domain: Dev1.example.test\n",
			want: []string{`kiln.yaml:4:11: spec.domain: "Dev1.example.test": label "Dev1" must contain only lowercase letters, digits and '-' (found 'D')`},
		},
		{
			name: "domain with empty label",
			in:   hdr + "spec:\n  domain: a..test\n",
			want: []string{`kiln.yaml:4:11: spec.domain: "a..test": must be a DNS name: dot-separated labels, none empty`},
		},
		{
			name: "domain label too long",
			in:   hdr + "spec:\n  domain: " + strings.Repeat("d", 64) + ".test\n",
			want: []string{`kiln.yaml:4:11: spec.domain: "` + strings.Repeat("d", 30) + "…" + strings.Repeat("d", 25) + `.test": label "` + strings.Repeat("d", 64) + `" must be at most 63 characters (has 64)`},
		},
		{
			name: "gateway image empty and replicas 0",
			in:   hdr + "spec:\n  gateway:\n    image: \"\"\n    replicas: 0\n",
			want: []string{
				"kiln.yaml:5:12: spec.gateway.image: must not be empty",
				"kiln.yaml:6:15: spec.gateway.replicas: must be between 1 and 10, got 0",
			},
		},
		{
			name: "gateway image with a space and too many replicas",
			in:   hdr + "spec:\n  gateway: {image: \"nginx latest\", replicas: 11}\n",
			want: []string{
				`kiln.yaml:4:20: spec.gateway.image: image "nginx latest" must not contain spaces or control characters`,
				"kiln.yaml:4:46: spec.gateway.replicas: must be between 1 and 10, got 11",
			},
		},
		{
			name: "negative replicas",
			in:   hdr + "spec:\n  gateway: {replicas: -1}\n",
			want: []string{"kiln.yaml:4:23: spec.gateway.replicas: must be between 1 and 10, got -1"},
		},
		{
			name: "stacks empty",
			in:   hdr + "spec:\n  stacks: []\n",
			want: []string{"kiln.yaml:4:11: spec.stacks: must list at least one stack (leave it out for the default stack)"},
		},
		{
			name: "stack with nothing",
			in:   hdr + "spec:\n  stacks:\n  - {}\n",
			want: []string{
				"kiln.yaml:5:5: spec.stacks[0].image: required",
				"kiln.yaml:5:5: spec.stacks[0].name: required",
				"kiln.yaml:5:5: spec.stacks[0].port: required (1-65535)",
			},
		},
		{
			name: "bad stack values",
			in: hdr + "spec:\n  stacks:\n" +
				"  - {name: Web, image: \"a\tb\", port: 0, cpu: \"\", memory: lots}\n" +
				"  - {name: web, image: \"\", port: 65536, cpu: 0, memory: -1Mi}\n" +
				"  - {name: web, image: x, port: 80, cpu: 1Q}\n",
			want: []string{
				`kiln.yaml:5:12: spec.stacks[0].name: stack name "Web": must contain only lowercase letters, digits and '-' (found 'W')`,
				`kiln.yaml:5:24: spec.stacks[0].image: image "a\tb" must not contain spaces or control characters`,
				"kiln.yaml:5:37: spec.stacks[0].port: must be between 1 and 65535, got 0",
				"kiln.yaml:5:45: spec.stacks[0].cpu: must not be empty",
				`kiln.yaml:5:57: spec.stacks[0].memory: "lots" is not a quantity (e.g. 128Mi)`,
				"kiln.yaml:6:24: spec.stacks[1].image: must not be empty",
				"kiln.yaml:6:34: spec.stacks[1].port: must be between 1 and 65535, got 65536",
				`kiln.yaml:6:46: spec.stacks[1].cpu: must be greater than zero, got "0"`,
				`kiln.yaml:6:57: spec.stacks[1].memory: must be greater than zero, got "-1Mi"`,
				`kiln.yaml:7:12: spec.stacks[2].name: duplicate stack name "web" (also spec.stacks[1])`,
				`kiln.yaml:7:42: spec.stacks[2].cpu: "1Q" is not a quantity (e.g. 100m)`,
			},
		},
		{
			name: "type errors do not also report the value as missing",
			in:   hdr + "spec:\n  stacks:\n  - {name: web, image: x, port: eighty}\n",
			want: []string{`kiln.yaml:5:33: spec.stacks[0].port: expected an integer, got "eighty"`},
		},
		{
			name: "writable paths must be clean absolute directories",
			in:   hdr + "spec:\n  stacks:\n  - name: web\n    image: x\n    port: 80\n    writablePaths: [tmp, /, /var/../tmp, /a b, /run, /run, \"\"]\n",
			want: []string{
				`kiln.yaml:8:21: spec.stacks[0].writablePaths[0]: "tmp" must be an absolute path (like /tmp)`,
				"kiln.yaml:8:26: spec.stacks[0].writablePaths[1]: the root directory cannot be writable: name the directories the stack writes to",
				`kiln.yaml:8:29: spec.stacks[0].writablePaths[2]: "/var/../tmp" is not a clean path (use "/tmp")`,
				`kiln.yaml:8:42: spec.stacks[0].writablePaths[3]: "/a b" must not contain spaces, colons or control characters`,
				`kiln.yaml:8:54: spec.stacks[0].writablePaths[5]: duplicate path "/run" (also spec.stacks[0].writablePaths[4])`,
				"kiln.yaml:8:60: spec.stacks[0].writablePaths[6]: must not be empty",
			},
		},
		{
			name: "writable paths spelled out empty",
			in:   hdr + "spec:\n  stacks:\n  - {name: web, image: x, port: 80, writablePaths: []}\n",
			want: []string{"kiln.yaml:5:52: spec.stacks[0].writablePaths: must list at least one directory (leave it out for none)"},
		},
		{
			name: "unknown tenant isolation",
			in:   hdr + "spec:\n  tenantIsolation: none\n",
			want: []string{`kiln.yaml:4:20: spec.tenantIsolation: "none": must be gateway (only the gateway reaches tenant pods) or namespace (also the tenant's own pods)`},
		},
		{
			name: "empty tenant isolation",
			in:   hdr + "spec:\n  tenantIsolation: \"\"\n",
			want: []string{"kiln.yaml:4:20: spec.tenantIsolation: must be gateway or namespace (leave it out for gateway)"},
		},
		{
			name: "all problems at once",
			in:   "apiVersion: kiln.dev/v1\nkind: ClusterConfig\nmetadata: {name: prod}\nspec:\n  tenants: [a, a]\n  gateway: {replicas: many}\n  extra: 1\n",
			want: []string{
				`kiln.yaml:1:13: apiVersion: must be kiln.dev/v1alpha1, got "kiln.dev/v1"`,
				`kiln.yaml:3:18: metadata.name: "prod" does not match NAME "dev1" given on the command line`,
				`kiln.yaml:5:16: spec.tenants[1]: duplicate tenant "a" (also spec.tenants[0])`,
				`kiln.yaml:6:23: spec.gateway.replicas: expected an integer, got "many"`,
				"kiln.yaml:7:3: spec.extra: unknown field (known: tenants, domain, gateway, stacks, tenantIsolation)",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("kiln.yaml", []byte(tt.in), "dev1")
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", c)
			}
			if c != nil {
				t.Errorf("Parse returned a config with an error")
			}
			if got, want := err.Error(), strings.Join(tt.want, "\n"); got != want {
				t.Errorf("error:\n%s\nwant:\n%s", got, want)
			}
			if code := failure.Of(err); code != failure.Input {
				t.Errorf("failure.Of = %v, want %v", code, failure.Input)
			}
			var ps Problems
			if !errors.As(err, &ps) || len(ps) != len(tt.want) {
				t.Errorf("errors.As Problems = %v (%d), want %d problems", ps, len(ps), len(tt.want))
			}
		})
	}
}

func TestParseBadName(t *testing.T) {
	_, err := Parse("kiln.yaml", []byte(hdr), "Dev1")
	if err == nil || failure.Of(err) != failure.Input || !strings.HasPrefix(err.Error(), `NAME "Dev1": `) {
		t.Fatalf("Parse with a bad NAME: %v", err)
	}
}

func TestParseManyProblems(t *testing.T) {
	data := []byte(hdr + "spec:\n  tenants:\n" + strings.Repeat("  - a\n", MaxProblems+6))
	_, err := Parse("kiln.yaml", data, "dev1")
	var ps Problems
	if !errors.As(err, &ps) || len(ps) != MaxProblems+1 {
		t.Fatalf("Parse: %d problems: %v", len(ps), err)
	}
	if first := `kiln.yaml:6:5: spec.tenants[1]: duplicate tenant "a" (also spec.tenants[0])`; ps[0].String() != first {
		t.Errorf("first problem %q, want %q", ps[0], first)
	}
	if last := ps[MaxProblems].String(); last != "kiln.yaml: and 5 more problems" {
		t.Errorf("last problem %q", last)
	}
}

func TestParseTooLarge(t *testing.T) {
	data := []byte(hdr + "# " + strings.Repeat("x", MaxFileSize) + "\n")
	_, err := Parse("kiln.yaml", data, "dev1")
	if err == nil || failure.Of(err) != failure.Input || !strings.Contains(err.Error(), "kiln.yaml: larger than") {
		t.Fatalf("Parse of a huge file: %v", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kiln.yaml")
	if err := os.WriteFile(path, []byte(exampleFile), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, "dev1")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(c.Spec.Stacks) != 2 || c.Spec.Domain != "dev1.example.test" {
		t.Errorf("Load = %+v", c)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(hdr+"spec:\n  domian: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad, "dev1")
	if err == nil || failure.Of(err) != failure.Input || !strings.HasPrefix(err.Error(), bad+":4:3: spec.domian: unknown field") {
		t.Errorf("Load of a bad file: %v", err)
	}

	for _, p := range []string{filepath.Join(dir, "missing.yaml"), dir} {
		_, err := Load(p, "dev1")
		if err == nil {
			t.Fatalf("Load(%q) succeeded", p)
		}
		if failure.Of(err) != failure.Input {
			t.Errorf("Load(%q): kind %v, want input", p, failure.Of(err))
		}
		if msg := err.Error(); !strings.Contains(msg, "-c/--config") || !strings.Contains(msg, p) {
			t.Errorf("Load(%q) error %q should name the path and -c/--config", p, msg)
		}
	}
}

func TestValidateName(t *testing.T) {
	tests := []struct {
		name, want string
	}{
		{"dev1", ""},
		{"a", ""},
		{"0-a", ""},
		{strings.Repeat("n", 40), ""},
		{"", `NAME "": must not be empty`},
		{strings.Repeat("n", 41), `NAME "` + strings.Repeat("n", 41) + `": must be at most 40 characters (has 41)`},
		{"Dev1", `NAME "Dev1": must contain only lowercase letters, digits and '-' (found 'D')`},
		{"dev.1", `NAME "dev.1": must contain only lowercase letters, digits and '-' (found '.')`},
		{"dev_1", `NAME "dev_1": must contain only lowercase letters, digits and '-' (found '_')`},
		{"dév", `NAME "dév": must contain only lowercase letters, digits and '-' (found 'é')`},
		{"-dev", `NAME "-dev": must start and end with a lowercase letter or digit`},
		{"dev-", `NAME "dev-": must start and end with a lowercase letter or digit`},
	}
	for _, tt := range tests {
		err := ValidateName(tt.name)
		if tt.want == "" {
			if err != nil {
				t.Errorf("ValidateName(%q) = %v", tt.name, err)
			}
			continue
		}
		if err == nil || err.Error() != tt.want || failure.Of(err) != failure.Input {
			t.Errorf("ValidateName(%q) = %v (kind %v), want %q (input)", tt.name, err, failure.Of(err), tt.want)
		}
	}
}

func TestValidateProjectRef(t *testing.T) {
	tests := []struct {
		ref, tenant, project, want string
	}{
		{ref: "default/blog", tenant: "default", project: "blog"},
		{ref: "0t/p0", tenant: "0t", project: "p0"},
		{ref: strings.Repeat("t", 40) + "/" + strings.Repeat("p", 40), tenant: strings.Repeat("t", 40), project: strings.Repeat("p", 40)},
		{ref: "blog", want: `TENANT/PROJECT "blog": must be of the form TENANT/PROJECT (e.g. default/blog)`},
		{ref: "a/b/c", want: `TENANT/PROJECT "a/b/c": must be of the form TENANT/PROJECT (e.g. default/blog)`},
		{ref: "/blog", want: `TENANT/PROJECT "/blog": tenant "": must not be empty`},
		{ref: "default/", want: `TENANT/PROJECT "default/": project "": must not be empty`},
		{ref: "Default/blog", want: `TENANT/PROJECT "Default/blog": tenant "Default": must contain only lowercase letters, digits and '-' (found 'D')`},
		{ref: "default/blog-", want: `TENANT/PROJECT "default/blog-": project "blog-": must start and end with a lowercase letter or digit`},
		{ref: "default/1blog", want: `TENANT/PROJECT "default/1blog": project "1blog": must start with a lowercase letter (it names a Service)`},
		{ref: "default/" + strings.Repeat("p", 41), want: `TENANT/PROJECT "default/` + strings.Repeat("p", 41) + `": project "` + strings.Repeat("p", 41) + `": must be at most 40 characters (has 41)`},
		{ref: strings.Repeat("t", 41) + "/p", want: `TENANT/PROJECT "` + strings.Repeat("t", 41) + `/p": tenant "` + strings.Repeat("t", 41) + `": must be at most 40 characters (has 41)`},
	}
	for _, tt := range tests {
		tenant, project, err := ValidateProjectRef(tt.ref)
		if tt.want == "" {
			if err != nil || tenant != tt.tenant || project != tt.project {
				t.Errorf("ValidateProjectRef(%q) = %q, %q, %v", tt.ref, tenant, project, err)
			}
			continue
		}
		if err == nil || err.Error() != tt.want || failure.Of(err) != failure.Input {
			t.Errorf("ValidateProjectRef(%q) = %v (kind %v), want %q (input)", tt.ref, err, failure.Of(err), tt.want)
		}
		if tenant != "" || project != "" {
			t.Errorf("ValidateProjectRef(%q) returned %q, %q with an error", tt.ref, tenant, project)
		}
	}
}

// A hostile config built from nested aliases costs no more than its size:
// alias uses past MaxAliases are refused with a problem naming the file,
// exit 2, whether it is a -c file or a kiln-config read back.
func TestAliasBudget(t *testing.T) {
	var b strings.Builder
	b.WriteString(hdr + "x: &s0 {name: web, image: nginx, port: 80, cpu: 100m, memory: 64Mi}\n")
	b.WriteString("spec:\n  stacks: [")
	for i := 0; i < 20000; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("*s0")
	}
	b.WriteString("]\n")
	_, err := Parse("bomb.yaml", []byte(b.String()), "dev1")
	if failure.Of(err) != failure.Input || !strings.Contains(err.Error(), "bomb.yaml") || !strings.Contains(err.Error(), "alias uses") {
		t.Fatalf("want input naming the file and the alias budget, got %v: %.300v", failure.Of(err), err)
	}
	if n := strings.Count(err.Error(), "alias uses"); n != 1 {
		t.Errorf("the budget problem is reported %d times, want once", n)
	}
	if _, err := ParseCanonical([]byte(b.String())); failure.Of(err) != failure.Failed || !strings.Contains(err.Error(), "alias uses") {
		t.Fatalf("kiln-config: want an operation failure naming the alias budget, got %v", err)
	}
	// A few anchors, as a person writes them, are fine.
	ok := hdr + "spec:\n  tenants: [a, b]\n  stacks:\n  - &web {name: web, image: nginx, port: 80, cpu: 100m, memory: 64Mi}\n  - {name: api, image: nginx, port: 8080, cpu: 100m, memory: 64Mi}\n"
	if _, err := Parse("ok.yaml", []byte(ok), "dev1"); err != nil {
		t.Fatal(err)
	}
}

package config

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kilnctl/kiln/engine/failure"
)

// The front door fields (spec.gateway.expose, ingressClassName, tls):
// strict values, reported by file, line and field.
func TestParseFrontDoor(t *testing.T) {
	valid := []struct {
		name, in string
		want     Gateway
	}{
		{"unset", "", Gateway{Replicas: 1}},
		{"loadBalancer", "spec:\n  gateway: {expose: loadBalancer}\n", Gateway{Replicas: 1, Expose: ExposeLoadBalancer}},
		{"ingress with class", "spec:\n  gateway:\n    expose: ingress\n    ingressClassName: nginx-internal.v2\n", Gateway{Replicas: 1, Expose: ExposeIngress, IngressClassName: "nginx-internal.v2"}},
		{"nodePort", "spec:\n  gateway: {expose: nodePort}\n", Gateway{Replicas: 1, Expose: ExposeNodePort}},
		{"none with tls", "spec:\n  gateway:\n    expose: none\n    tls: {secretName: dev1-tls}\n", Gateway{Replicas: 1, Expose: ExposeNone, TLS: &GatewayTLS{SecretName: "dev1-tls"}}},
		{"tls null is unset", "spec:\n  gateway: {tls: ~}\n", Gateway{Replicas: 1}},
	}
	for _, tt := range valid {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("kiln.yaml", []byte(hdr+tt.in), "dev1")
			if err != nil {
				t.Fatal(err)
			}
			g := c.Spec.Gateway
			if g.Expose != tt.want.Expose || g.IngressClassName != tt.want.IngressClassName || g.TLSSecret() != tt.want.TLSSecret() || g.Replicas != tt.want.Replicas {
				t.Fatalf("gateway = %+v, want %+v", g, tt.want)
			}
		})
	}
	bad := []struct {
		name, in string
		want     string
	}{
		{"unknown expose", "spec:\n  gateway: {expose: LoadBalancer}\n",
			`kiln.yaml:4:21: spec.gateway.expose: "LoadBalancer": must be one of loadBalancer, ingress, nodePort, none`},
		{"empty expose", "spec:\n  gateway:\n    expose: \"\"\n",
			"kiln.yaml:5:13: spec.gateway.expose: must be one of loadBalancer, ingress, nodePort, none (leave it out for the provider's default)"},
		{"expose not a string", "spec:\n  gateway: {expose: [a]}\n",
			"kiln.yaml:4:21: spec.gateway.expose: expected a string, got a list"},
		{"ingressClassName not a subdomain", "spec:\n  gateway: {ingressClassName: Nginx_1}\n",
			`kiln.yaml:4:31: spec.gateway.ingressClassName: "Nginx_1" is not an IngressClass name: a lowercase RFC 1123 subdomain`},
		{"tls without secretName", "spec:\n  gateway:\n    tls: {}\n",
			"kiln.yaml:5:10: spec.gateway.tls.secretName: required (a kubernetes.io/tls Secret in kiln-system)"},
		{"tls secretName bad", "spec:\n  gateway:\n    tls: {secretName: \"a b\"}\n",
			`kiln.yaml:5:23: spec.gateway.tls.secretName: "a b" is not a Secret name`},
		{"tls unknown field", "spec:\n  gateway:\n    tls: {secret: x}\n",
			"kiln.yaml:5:11: spec.gateway.tls.secret: unknown field"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("kiln.yaml", []byte(hdr+tt.in), "dev1")
			if err == nil {
				t.Fatal("parsed; want an error")
			}
			if failure.Of(err) != failure.Input {
				t.Fatalf("error %v is not exit 2", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error:\n%v\nwant it to contain:\n%s", err, tt.want)
			}
		})
	}
}

// A file that leaves expose unset matches whatever effective value the
// cluster recorded; one that names a different value differs.
func TestDiffFrontDoor(t *testing.T) {
	recorded := Default("dev1")
	recorded.Spec.Gateway.Expose = ExposeNodePort
	file := Default("dev1")
	if d := Diff(recorded, file); len(d) != 0 {
		t.Fatalf("unset expose differs: %v", d)
	}
	file.Spec.Gateway.Expose = ExposeNodePort
	if d := Diff(recorded, file); len(d) != 0 {
		t.Fatalf("same expose differs: %v", d)
	}
	file.Spec.Gateway.Expose = ExposeLoadBalancer
	file.Spec.Gateway.IngressClassName = "nginx"
	file.Spec.Gateway.TLS = &GatewayTLS{SecretName: "dev1-tls"}
	want := []string{
		`spec.gateway.expose: nodePort (cluster) vs loadBalancer (file)`,
		`spec.gateway.ingressClassName: "" (cluster) vs nginx (file)`,
		`spec.gateway.tls.secretName: "" (cluster) vs dev1-tls (file)`,
	}
	if d := Diff(recorded, file); !slices.Equal(d, want) {
		t.Fatalf("diff:\n%s\nwant:\n%s", strings.Join(d, "\n"), strings.Join(want, "\n"))
	}
}

// KeepRecorded fills what the file leaves to kiln (expose) from the
// installed config, and the canonical form round-trips the new fields.
func TestKeepRecordedAndCanonical(t *testing.T) {
	installed := Default("dev1")
	installed.Spec.Gateway.Expose = ExposeIngress
	file := Default("dev1")
	file.Spec.Gateway.TLS = &GatewayTLS{SecretName: "dev1-tls"}
	got := file.KeepRecorded(installed)
	if got.Spec.Gateway.Expose != ExposeIngress || file.Spec.Gateway.Expose != "" {
		t.Fatalf("KeepRecorded: got expose %q, file now %q", got.Spec.Gateway.Expose, file.Spec.Gateway.Expose)
	}
	file.Spec.Gateway.Expose = ExposeNone
	if got := file.KeepRecorded(installed); got.Spec.Gateway.Expose != ExposeNone {
		t.Fatalf("KeepRecorded overrode the file's expose: %q", got.Spec.Gateway.Expose)
	}
	data, err := got.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseCanonical(data)
	if err != nil {
		t.Fatal(err)
	}
	if d := Diff(got, back); len(d) != 0 || back.Spec.Gateway.Expose != ExposeIngress || back.Spec.Gateway.TLSSecret() != "dev1-tls" {
		t.Fatalf("round trip: %s\n%v", data, d)
	}
}

// The config file section of the clusters guide (docs/clusters.md, moved
// there from the README) shows every field; it must parse.
func TestREADMEConfigExample(t *testing.T) {
	data, err := os.ReadFile("../../docs/clusters.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "## Cluster config file")
	if !ok {
		t.Fatal("docs/clusters.md has no Cluster config file section")
	}
	_, rest, ok = strings.Cut(rest, "```yaml\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("no yaml block in the Cluster config file section of docs/clusters.md")
	}
	c, err := Parse("docs/clusters.md", []byte(block), "dev1")
	if err != nil {
		t.Fatalf("docs/clusters.md example: %v", err)
	}
	if g := c.Spec.Gateway; g.Expose != ExposeIngress || g.IngressClassName == "" || g.TLSSecret() == "" {
		t.Fatalf("docs/clusters.md example gateway %+v: want the front door fields shown", g)
	}
}

func TestDiffExposeUnsetInCluster(t *testing.T) {
	recorded, file := Default("dev1"), Default("dev1")
	file.Spec.Gateway.Expose = ExposeNodePort
	want := []string{"spec.gateway.expose: unset (a ClusterIP Service) (cluster) vs nodePort (file)"}
	if d := Diff(recorded, file); !slices.Equal(d, want) {
		t.Fatalf("diff %q, want %q", d, want)
	}
}

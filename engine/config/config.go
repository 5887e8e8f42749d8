// Package config is kiln's cluster config file (DESIGN.md §5a): its types,
// defaults, strict decoding and validation, the canonical form stored in
// ConfigMap kiln-system/kiln-config (key config.yaml), and the comparison
// used to refuse `kiln create --continue` with a config that differs from
// the installed one.
//
// Every problem with user input is reported with file, line, column and the
// field path, all problems at once, classified failure.BadInput (bad input).
package config

import (
	"slices"
)

// Contract values (DESIGN.md §5, §5a).
const (
	// APIVersion is the only accepted apiVersion.
	APIVersion = "kiln.dev/v1alpha1"
	// Kind is the only accepted kind.
	Kind = "ClusterConfig"

	// DefaultTenant is the tenant used when the config lists none.
	DefaultTenant = "default"
	// DefaultDomainSuffix is appended to NAME for the default domain.
	DefaultDomainSuffix = ".kiln.test"
	// DefaultImage is the default stack's image: a small public web server
	// built to run as non-root (project pods run under Pod Security
	// restricted, with a read-only root filesystem). It listens on 8080; the
	// project's Service still answers on port 80.
	DefaultImage = "nginxinc/nginx-unprivileged:1.27-alpine"
	// DefaultGatewayImage is spec.gateway.image when unset: empty, which
	// means kiln's own image at the version of the kiln that applies the
	// platform (engine/platform.GatewayImage). It is kept empty in
	// kiln-config rather than resolved, so a newer kiln rolls the gateway
	// to its own version and two kiln versions do not see a config
	// difference where the user chose nothing.
	DefaultGatewayImage = ""
	// LegacyGatewayImage was the default before kiln had a gateway of its
	// own (nginx, which checked no token). Kiln-configs written then spell
	// it out; it counts as unset (Gateway.IsDefaultImage), so those
	// clusters get kiln's gateway.
	LegacyGatewayImage = "nginxinc/nginx-unprivileged:1.27-alpine"
	// DefaultGatewayReplicas is the gateway replica count when unset.
	DefaultGatewayReplicas int32 = 1
	// DefaultStackName is the name of the stack used when the config lists none.
	DefaultStackName = "default"
	// DefaultStackPort is the default stack's container port.
	DefaultStackPort int32 = 8080
	// DefaultCPU is a stack's CPU request when unset.
	DefaultCPU = "50m"
	// DefaultMemory is a stack's memory request when unset.
	DefaultMemory = "64Mi"

	// MaxNameLength bounds cluster NAMEs, tenant and project names.
	MaxNameLength = 40
	// MaxGatewayReplicas bounds spec.gateway.replicas.
	MaxGatewayReplicas int32 = 10

	// TenantNamespacePrefix prefixes a tenant's namespace.
	TenantNamespacePrefix = "kiln-tenant-"
)

// ClusterConfig is the cluster config file (kind ClusterConfig).
type ClusterConfig struct {
	APIVersion string   `json:"apiVersion" yaml:"apiVersion"`
	Kind       string   `json:"kind" yaml:"kind"`
	Metadata   Metadata `json:"metadata" yaml:"metadata"`
	Spec       Spec     `json:"spec" yaml:"spec"`
}

// Metadata names the cluster; if set, Name must equal the CLI NAME.
type Metadata struct {
	Name string `json:"name,omitempty" yaml:"name,omitempty"`
}

// Spec is the desired platform.
type Spec struct {
	// Tenants is a set: order is kept but not significant.
	Tenants []string `json:"tenants,omitempty" yaml:"tenants,omitempty"`
	Domain  string   `json:"domain,omitempty" yaml:"domain,omitempty"`
	Gateway Gateway  `json:"gateway" yaml:"gateway"`
	// Stacks is ordered.
	Stacks []Stack `json:"stacks,omitempty" yaml:"stacks,omitempty"`
	// TenantIsolation says which pods may reach a tenant's pods (kiln
	// installs it as NetworkPolicies in every tenant namespace):
	// IsolationGateway ("gateway", also when unset) admits only the
	// gateway; IsolationNamespace ("namespace") also admits the pods of
	// the tenant's own namespace.
	TenantIsolation string `json:"tenantIsolation,omitempty" yaml:"tenantIsolation,omitempty"`
}

// Tenant isolation levels (spec.tenantIsolation).
const (
	IsolationGateway   = "gateway"
	IsolationNamespace = "namespace"
)

// AllowsSameNamespace says whether a tenant's pods may reach each other.
func (s Spec) AllowsSameNamespace() bool { return s.TenantIsolation == IsolationNamespace }

// Gateway is the kiln-system/kiln-gateway Deployment.
type Gateway struct {
	Image    string `json:"image,omitempty" yaml:"image,omitempty"`
	Replicas int32  `json:"replicas,omitempty" yaml:"replicas,omitempty"`
	// Expose is how kiln-gateway is reached from outside the cluster (the
	// front door, DESIGN.md §5): ExposeLoadBalancer, ExposeIngress,
	// ExposeNodePort or ExposeNone.
	Expose string `json:"expose,omitempty" yaml:"expose,omitempty"`
	// IngressClassName is the ingressClassName of the project routes
	// (Ingress kiln-system/T.P); unset: the cluster's default class.
	IngressClassName string `json:"ingressClassName,omitempty" yaml:"ingressClassName,omitempty"`
	// TLS, when set, makes the gateway serve HTTPS on its port with the
	// certificate of a kubernetes.io/tls Secret in kiln-system.
	TLS *GatewayTLS `json:"tls,omitempty" yaml:"tls,omitempty"`
}

// GatewayTLS is spec.gateway.tls.
type GatewayTLS struct {
	// SecretName names a kubernetes.io/tls Secret in kiln-system (keys
	// tls.crt and tls.key), mounted into the gateway and reloaded when it
	// changes.
	SecretName string `json:"secretName" yaml:"secretName"`
}

// TLSSecret is spec.gateway.tls.secretName, or "" when TLS is not set.
func (g Gateway) TLSSecret() string {
	if g.TLS == nil {
		return ""
	}
	return g.TLS.SecretName
}

// ExposeModes are the values of spec.gateway.expose, in the order
// messages list them.
var ExposeModes = []string{ExposeLoadBalancer, ExposeIngress, ExposeNodePort, ExposeNone}

// Front door modes (spec.gateway.expose).
const (
	ExposeLoadBalancer = "loadBalancer"
	ExposeIngress      = "ingress"
	ExposeNodePort     = "nodePort"
	ExposeNone         = "none"
)

// Stack is an image plus resources that projects run (DESIGN.md §10).
type Stack struct {
	Name   string `json:"name" yaml:"name"`
	Image  string `json:"image" yaml:"image"`
	Port   int32  `json:"port" yaml:"port"`
	CPU    string `json:"cpu,omitempty" yaml:"cpu,omitempty"`
	Memory string `json:"memory,omitempty" yaml:"memory,omitempty"`
	// WritablePaths are the directories the stack writes to: each gets an
	// emptyDir volume, as the container's root filesystem is read-only.
	WritablePaths []string `json:"writablePaths,omitempty" yaml:"writablePaths,omitempty"`
}

// IsDefaultImage reports whether the gateway's image is kiln's own: unset,
// or the legacy default a kiln-config of an older kiln spells out.
func (g Gateway) IsDefaultImage() bool {
	return g.Image == DefaultGatewayImage || g.Image == LegacyGatewayImage
}

// MaxWritablePaths bounds a stack's writablePaths.
const MaxWritablePaths = 16

// DefaultDomain is the domain used for cluster NAME when none is configured.
func DefaultDomain(name string) string { return name + DefaultDomainSuffix }

// DefaultStack is the stack used when the config lists none.
func DefaultStack() Stack {
	return Stack{
		Name:   DefaultStackName,
		Image:  DefaultImage,
		Port:   DefaultStackPort,
		CPU:    DefaultCPU,
		Memory: DefaultMemory,
		// nginx keeps its pid and temporary files in /tmp.
		WritablePaths: []string{"/tmp"},
	}
}

// Default is the effective config used without -c/--config.
func Default(name string) *ClusterConfig {
	return &ClusterConfig{
		APIVersion: APIVersion,
		Kind:       Kind,
		Metadata:   Metadata{Name: name},
		Spec: Spec{
			Tenants: []string{DefaultTenant},
			Domain:  DefaultDomain(name),
			Gateway: Gateway{Image: DefaultGatewayImage, Replicas: DefaultGatewayReplicas},
			Stacks:  []Stack{DefaultStack()},
		},
	}
}

// ApplyDefaults fills unset optional fields: apiVersion and kind, the
// domain (from Metadata.Name, which the caller sets from the CLI NAME; left
// empty unless Metadata.Name is a valid NAME), gateway image and replicas, tenants and
// stacks when nil, and each stack's cpu and memory. A non-nil empty Tenants
// or Stacks is kept (and fails validation). It does not set Metadata.Name.
func (c *ClusterConfig) ApplyDefaults() {
	c.applyDefaults(nil)
}

// applyDefaults fills every optional field that is unset. With set == nil a
// field is unset when it holds its zero value (nil for slices); otherwise
// when its path is not in set (what the file spelled out, even as 0 or "").
func (c *ClusterConfig) applyDefaults(set map[string]bool) {
	unset := func(path string, zero bool) bool {
		if set == nil {
			return zero
		}
		return !set[path]
	}
	if set == nil {
		// A file must spell these out; a config built in Go need not.
		if c.APIVersion == "" {
			c.APIVersion = APIVersion
		}
		if c.Kind == "" {
			c.Kind = Kind
		}
	}
	s := &c.Spec
	if unset("spec.tenants", s.Tenants == nil) {
		s.Tenants = []string{DefaultTenant}
	}
	if unset("spec.domain", s.Domain == "") && labelProblem(c.Metadata.Name, MaxNameLength) == "" {
		s.Domain = DefaultDomain(c.Metadata.Name)
	}
	if unset("spec.gateway.replicas", s.Gateway.Replicas == 0) {
		s.Gateway.Replicas = DefaultGatewayReplicas
	}
	if unset("spec.stacks", s.Stacks == nil) {
		s.Stacks = []Stack{DefaultStack()}
	}
	for i := range s.Stacks {
		st := &s.Stacks[i]
		p := stackPath(i)
		if unset(p+".cpu", st.CPU == "") {
			st.CPU = DefaultCPU
		}
		if unset(p+".memory", st.Memory == "") {
			st.Memory = DefaultMemory
		}
	}
}

// Stack returns the stack called name.
func (c *ClusterConfig) Stack(name string) (Stack, bool) {
	for _, s := range c.Spec.Stacks {
		if s.Name == name {
			return s, true
		}
	}
	return Stack{}, false
}

// Clone returns a deep copy of c.
func (c *ClusterConfig) Clone() *ClusterConfig { return c.clone() }

// KeepRecorded returns a copy of c (a config file for an installed
// platform) in which what the file leaves to kiln's choice at create time
// is the installed config's recorded choice: spec.gateway.expose. An
// upgrade with a file that does not name expose keeps the front door.
func (c *ClusterConfig) KeepRecorded(installed *ClusterConfig) *ClusterConfig {
	out := c.clone()
	if out.Spec.Gateway.Expose == "" && installed != nil {
		out.Spec.Gateway.Expose = installed.Spec.Gateway.Expose
	}
	return out
}

// TenantNamespace is the namespace of tenant: kiln-tenant-TENANT.
func TenantNamespace(tenant string) string { return TenantNamespacePrefix + tenant }

// clone returns a deep copy of c (a zero config for nil).
func (c *ClusterConfig) clone() *ClusterConfig {
	if c == nil {
		return &ClusterConfig{}
	}
	out := *c
	out.Spec.Tenants = slices.Clone(c.Spec.Tenants)
	out.Spec.Stacks = slices.Clone(c.Spec.Stacks)
	if c.Spec.Gateway.TLS != nil {
		t := *c.Spec.Gateway.TLS
		out.Spec.Gateway.TLS = &t
	}
	for i := range out.Spec.Stacks {
		out.Spec.Stacks[i].WritablePaths = slices.Clone(c.Spec.Stacks[i].WritablePaths)
	}
	return &out
}

// Package project is the lifecycle of kiln projects (DESIGN.md §10): a
// tenant's application instance running a stack. Every project P of tenant
// T lives in namespace kiln-tenant-T as ConfigMap kiln-project-P (the desired
// spec and state, the source of truth), Secret P-auth, Deployment P and
// Service P, all labelled kiln.dev/project=P; its route is Ingress
// kiln-system/T.P to kiln-gateway (never in the tenant namespace); Lease
// kiln-project-P serializes operations on one project.
//
// The package does the Kubernetes work and reports through a Reporter; the
// engine locates the cluster, wires the Reporter to its event sink and emits
// the result.
package project

import (
	"context"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/input"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/readiness"
)

// Labels and annotations (contract: kiln.dev/project, kiln.dev/token-sha256).
const (
	LabelProject    = "kiln.dev/project"
	LabelTenant     = "kiln.dev/tenant"
	LabelCluster    = "kiln.dev/cluster"
	LabelManagedBy  = "app.kubernetes.io/managed-by"
	AnnotationToken = "kiln.dev/token-sha256"
	AnnotationKey   = "kiln.dev/current-key"
	SpecKey         = "spec.json"
	// TokenPath is where a project's pods read their token: a file
	// mounted read-only from Secret P-auth, never an environment variable
	// (which /proc/*/environ shows and every child process inherits).
	TokenPath = "/var/run/kiln/project-token"
	// AnnotationSpecKey and AnnotationToken on the spec ConfigMap record
	// the Secret key in force and its token's hash, so token sync is
	// judged without reading Secrets.
	AnnotationSpecKey = "kiln.dev/token-key"
	containerName     = "app"
	servicePort       = 80
	specPrefix        = "kiln-project-"
	secretSuffix      = "-auth"
	tokenKeyPrefix    = "token-"
	defaultBulkLimit  = 4
)

// Desired states stored in the spec ConfigMap.
const (
	DesiredRunning   = "running"
	DesiredSuspended = "suspended"
)

// Observed states, computed from the live objects every time.
const (
	StateRunning    = "running"
	StateStarting   = "starting"
	StateSuspending = "suspending"
	StateSuspended  = "suspended"
	StateDegraded   = "degraded"
	StateFailed     = "failed"
)

// Names of a project's objects.
func SpecName(p string) string   { return specPrefix + p }
func SecretName(p string) string { return p + secretSuffix }
func LeaseName(p string) string  { return specPrefix + p }

// Reporter is how the package reports progress: the engine implements it
// on top of the operation's event.Reporter, which every line and status
// goes through (stamped and cleaned) on the way to the frontend.
type Reporter interface {
	// Phase runs one named step and reports started/succeeded/failed.
	Phase(ctx context.Context, name event.Phase, run func(context.Context) error) error
	// Resource reports an object's status.
	Resource(kind, namespace, name string, status event.Status, message string)
	// Logf reports a log line.
	Logf(level event.Level, format string, args ...any)
	// Watcher returns a readiness watcher that reports status changes.
	Watcher() *readiness.Watcher
}

// Ops runs project operations on one cluster.
type Ops struct {
	Client  kubernetes.Interface
	Cluster string
	Config  *config.ClusterConfig
	// Timeout bounds each wait for readiness (failure.Timeout when it passes).
	Timeout time.Duration
	R       Reporter
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Provider is the provider's name (kube, aws), for the commands the
	// messages suggest ("" words them with PROVIDER).
	Provider string
	// Location is where the cluster was found and At the input that
	// names it (--context, --region), for those commands too.
	Location string
	At       input.Input
	// Actions, when set, words those commands as the frontend's own
	// actions (the wizard's keys): verb ("project", "start") and args
	// (TENANT/PROJECT). See engine.Actions.
	Actions func(verb, args []string) string
	// Namer, when set, words the inputs the messages name (the frontend's
	// Namer; nil: as CLI flags).
	Namer input.Namer
	// PlatformHeld says the caller holds the cluster's exclusive lease
	// (kiln upgrade restacking projects): the project leases it takes do
	// not count that lease as another operation.
	PlatformHeld bool
	// ProgressEvery is how often Bulk reports its summary line (default
	// DefaultProgressEvery).
	ProgressEvery time.Duration
	// PageSize is how many objects each LIST of the projects' objects asks
	// for at a time, following the continue token (0: DefaultPageSize,
	// all at once).
	PageSize int64
}

func (o *Ops) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// Ref names one project.
type Ref struct {
	Tenant, Project string
}

// Namespace is the project's tenant namespace.
func (r Ref) Namespace() string { return config.TenantNamespace(r.Tenant) }

func (r Ref) String() string { return r.Tenant + "/" + r.Project }

// Parse checks TENANT/PROJECT against the name rules and the cluster's
// tenants (failure.Input naming what is wrong).
func (o *Ops) Parse(s string) (Ref, error) {
	t, p, err := config.ValidateProjectRef(s)
	if err != nil {
		return Ref{}, err
	}
	if err := o.checkTenant(t); err != nil {
		return Ref{}, err
	}
	return Ref{Tenant: t, Project: p}, nil
}

func (o *Ops) checkTenant(t string) error {
	for _, have := range o.Config.Spec.Tenants {
		if have == t {
			return nil
		}
	}
	return failure.BadInput("tenant %q: not a tenant of cluster %s (tenants: %v)", t, o.Cluster, o.Config.Spec.Tenants)
}

// stack resolves --stack: the named stack, or the config's first stack.
func (o *Ops) stack(name string) (config.Stack, error) {
	if name == "" {
		if len(o.Config.Spec.Stacks) == 0 {
			return config.Stack{}, input.New(failure.Input, input.Stack, o.Cluster, "{input}: cluster %s has no stacks", o.Cluster)
		}
		return o.Config.Spec.Stacks[0], nil
	}
	st, ok := o.Config.Stack(name)
	if !ok {
		var names []string
		for _, s := range o.Config.Spec.Stacks {
			names = append(names, s.Name)
		}
		return config.Stack{}, input.New(failure.Input, input.Stack, name, "{input} %q: no such stack in cluster %s (stacks: %v)", name, o.Cluster, names)
	}
	return st, nil
}

// withTimeout bounds one wait by Timeout.
func (o *Ops) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if o.Timeout > 0 {
		return context.WithTimeout(ctx, o.Timeout)
	}
	return context.WithCancel(ctx)
}

// refs are the project's objects; its route lives in kiln-system.
func refs(r Ref) (secret, dep, svc, route, spec readiness.Ref) {
	ns := r.Namespace()
	return readiness.Ref{Kind: readiness.KindSecret, Namespace: ns, Name: SecretName(r.Project)},
		readiness.Ref{Kind: readiness.KindDeployment, Namespace: ns, Name: r.Project},
		readiness.Ref{Kind: readiness.KindService, Namespace: ns, Name: r.Project},
		readiness.Ref{Kind: readiness.KindIngress, Namespace: platform.Namespace, Name: RouteName(r)},
		readiness.Ref{Kind: readiness.KindConfigMap, Namespace: ns, Name: SpecName(r.Project)}
}

// inputName words in for the frontend (Namer; a CLI flag without one).
func (o *Ops) inputName(in input.Input) string {
	if o.Namer != nil {
		return o.Namer(in)
	}
	return input.FlagName(in)
}

// command is the kiln command for operation op on project r of this
// cluster, as a user would type it.
func (o *Ops) command(op string, r Ref) string {
	if o.Actions != nil {
		return o.Actions([]string{"project", op}, []string{r.String()})
	}
	p := o.Provider
	if p == "" {
		p = "PROVIDER"
	}
	cmd := "kiln project " + op + " " + p + " " + o.Cluster + " " + r.String()
	if o.Location != "" && o.At != "" {
		cmd += " " + input.FlagName(o.At) + " " + o.Location
	}
	return cmd
}

package engine

import (
	"context"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/platform"
)

// Location is one place a provider searched: a kubeconfig context or an AWS
// region, with what was found there.
type Location struct {
	// Name is the context or region.
	Name string
	// Err says why the location could not be inspected; such a location is
	// reported, not fatal.
	Err error
	// State is the platform state read from the location's cluster (nil when
	// there is no cluster or it was unreachable).
	State *platform.State
	// Infra is one of the Infra* constants.
	Infra string
	// Cluster is the kiln cluster name found there ("" if none).
	Cluster string
	// Client reaches the location's cluster (nil when none).
	Client kubernetes.Interface
	REST   *rest.Config
	// Elapsed is how long the location's inspection took.
	Elapsed time.Duration
	// Skipped is set for a location the user left out of discovery
	// (--contexts, --regions): it was not searched.
	Skipped bool
}

// AccountScoped is a Provider whose locations belong to a cloud account
// (aws: a region of the AWS account of the credentials in use). A fresh
// create records the account in the token dir's manifest and never reuses
// a directory at the default path made for another account or location.
type AccountScoped interface {
	Account(ctx context.Context, location string) (string, error)
}

// Provider finds and provisions the infrastructure a kiln cluster runs on.
// The kube provider uses existing clusters; the aws provider creates EKS.
type Provider interface {
	// Name is "kube" or "aws".
	Name() string
	// Nouns says what the provider's locations and scopes are called and
	// which input names a location; generic code words its messages with
	// them and never branches on Name.
	Nouns() Nouns
	// Target is the location the user chose (--context / --region), or the
	// provider's default; "" if there is none.
	Target() string
	// Discover searches every location, in parallel, for kiln clusters
	// (name is the one the operation is about; providers may use it to
	// narrow their search, e.g. by tag).
	Discover(ctx context.Context, name string) ([]Location, error)
	// EnsureInfrastructure makes the cluster exist at location (idempotent)
	// and returns a client for it. skipped is true when there was nothing to
	// do (the kube provider: the cluster already exists). It reports its
	// progress through r, the operation's Reporter.
	EnsureInfrastructure(ctx context.Context, name, location string, r *event.Reporter) (loc Location, skipped bool, err error)
	// DestroyInfrastructure removes what EnsureInfrastructure created,
	// verified. skipped as above.
	DestroyInfrastructure(ctx context.Context, name, location string, r *event.Reporter) (skipped bool, err error)
}

// LocationInspector is a provider that can inspect one location alone,
// within the same bound as discovery. Operations on one existing cluster
// use it to go straight to the location the user named or kiln remembered.
type LocationInspector interface {
	InspectLocation(ctx context.Context, name, location string) Location
}

// Lister is a provider that can find its kiln clusters without a NAME,
// where one location may hold several (aws: every kiln-tagged EKS cluster
// of every region). DiscoverClusters uses it instead of Discover(ctx, "").
// It returns one Location per cluster found, plus one per location that
// holds none or could not be searched. progress, when set, hears each
// location's search start and end (ReportSearch), concurrently.
type Lister interface {
	ListClusters(ctx context.Context, progress func(SearchProgress)) ([]Location, error)
}

// Scoper is a provider whose discovery the user can narrow; Scope names
// how (for messages about slow or skipped locations): the input that
// narrows it, and an environment variable that does too ("" if none).
type Scoper interface {
	Scope() (in Input, env string)
}

// Nouns is how a provider's places are called in messages.
type Nouns struct {
	// Location is one place the provider searches ("context", "region").
	Location string
	// Scope is what a NAME is unique across ("kubeconfig", "account").
	Scope string
	// Target is the input that names a location (InputContext,
	// InputRegion).
	Target Input
}

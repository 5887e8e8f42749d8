package tui

import (
	"context"

	"github.com/kilnctl/kiln/engine"
)

// Ops is what the CLI hands the wizard (Options.Ops) to reach the engine,
// as crush's app hands its UI the app's services: the wizard asks for
// each operation with the engine's own request, filled in with what its
// screens collected, and gets it back ready to run. What only the CLI
// knows it adds: the Target of the cluster (the provider built with the
// global flags at the cluster's location, --token-dir unless the request
// names a token dir), --timeout, the keyring, the test hooks and
// --log-file, and an engine whose messages name the wizard's fields and
// keys. The wizard leaves a request's Target (but its TokenDir) and
// Timeout empty.
//
// Ops may also be a Watcher and a ProjectFeed.
type Ops interface {
	// Locations lists the kubeconfig contexts and the current one.
	Locations() (names []string, current string, err error)
	// Clusters discovers the kiln clusters across every location,
	// reporting each location's search (the aws regions) to progress as
	// it starts and ends (the home screen's spinner per region).
	Clusters(ctx context.Context, progress func(engine.SearchProgress)) ([]Cluster, error)
	// Status reads a cluster's live state for the inspect screens, quietly
	// (no events).
	Status(ctx context.Context, c engine.ClusterRef) (*engine.ClusterStatus, error)

	// The operations the run view shows; infra is what the create form
	// or the upgrade screen asked of the provider's infrastructure.
	Create(c engine.ClusterRef, infra engine.Infra, req engine.CreateRequest) Op
	Destroy(c engine.ClusterRef, req engine.DestroyRequest) Op
	Project(c engine.ClusterRef, req engine.ProjectRequest) Op
	Upgrade(c engine.ClusterRef, infra engine.Infra, req engine.UpgradeRequest) Op
	RotateKey(c engine.ClusterRef, req engine.RotateKeyRequest) Op

	// CheckCreate and CheckUpgrade check infra as the create form and the
	// upgrade screen of cluster c ask it, as it is typed, with the
	// provider's own rules (no cloud call): nil, or an engine.InputError
	// naming the input.
	CheckCreate(c engine.ClusterRef, infra engine.Infra) error
	CheckUpgrade(c engine.ClusterRef, infra engine.Infra) error
}

// Op is one engine operation, ready to run: it runs with the wizard's
// sink and confirmer (the Bridge) until it ends or ctx is cancelled.
type Op func(ctx context.Context, sink engine.Sink, confirm engine.Confirmer) error

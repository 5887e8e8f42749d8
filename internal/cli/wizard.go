package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine"
	awsprovider "github.com/kilnctl/kiln/engine/provider/aws"
	"github.com/kilnctl/kiln/internal/exit"
	"github.com/kilnctl/kiln/tui"
)

// runWizard opens the Bubble Tea wizard (kiln without a command on a
// terminal). It drives the same engine entry points as the commands.
func (g *globals) runWizard(ctx context.Context) error {
	b := &wizardBackend{g: g, hooks: engine.HooksFrom(ctx)}
	// The wizard owns the terminal, so the file keyring cannot prompt for
	// its passphrase: it is read from KILN_KEYRING_PASSPHRASE, and an
	// unavailable keyring is reported in each operation's log.
	store, err := creds.OpenStore(creds.StoreOptions{Backend: g.keyringBackend})
	if err != nil {
		b.keyringWarning = fmt.Sprintf("keyring unavailable (%v); token dirs are found by --token-dir and the default path", err)
	} else {
		b.keyring = store
	}
	return tui.Run(ctx, b, g.stdin, g.stdout, os.Environ())
}

// wizardBackend runs the engine for the wizard with the global flags
// (--kubeconfig, --token-dir, --timeout, --keyring-backend).
type wizardBackend struct {
	g              *globals
	keyring        engine.Keyring
	keyringWarning string
	// hooks are the test hooks kiln was started with (none in a release
	// build): the wizard runs operations under contexts of its own.
	hooks engine.Hooks
	// newProvider, when set, replaces providerAt's construction (tests).
	newProvider func(name, location string) (engine.Provider, error)
}

func (b *wizardBackend) engine(sink engine.Sink, confirm engine.Confirmer) *engine.Engine {
	if b.keyringWarning != "" {
		sink.Emit(engine.Event{Type: engine.TypeLog, Level: engine.LevelWarn, Message: b.keyringWarning})
	}
	return &engine.Engine{Sink: sink, Confirm: confirm, Keyring: b.keyring, Version: b.g.version}
}

// providerAt builds the provider for a cluster at location, as the
// commands do with --context / --region.
func (b *wizardBackend) providerAt(name, location string) (engine.Provider, error) {
	if b.newProvider != nil {
		return b.newProvider(name, location)
	}
	switch name {
	case "", "kube":
		return b.g.kubeProvider(location), nil
	case "aws":
		p, err := b.g.awsProvider()
		if err != nil {
			return nil, err
		}
		if ap, ok := p.(*awsprovider.Provider); ok && location != "" {
			ap.Region = location
		}
		return p, nil
	}
	return nil, exit.Usage("PROVIDER %q: must be kube or aws", name)
}

func (b *wizardBackend) request(provider, location, name string) (engine.Request, error) {
	p, err := b.providerAt(provider, location)
	if err != nil {
		return engine.Request{}, err
	}
	return engine.Request{Provider: p, Name: name, TokenDir: b.g.tokenDir, Timeout: b.g.timeout}, nil
}

func (b *wizardBackend) Locations() ([]string, string, error) {
	p := b.g.kubeProvider(b.g.context)
	names, err := p.Contexts()
	return names, p.Target(), err
}

// Clusters asks the engine to discover the kiln clusters in every context,
// with the token dir the engine would use for each (events discarded: the
// home screen shows the list).
func (b *wizardBackend) Clusters(ctx context.Context) ([]tui.Cluster, error) {
	p, err := b.providerAt("kube", "")
	if err != nil {
		return nil, err
	}
	quiet := engine.SinkFunc(func(engine.Event) {})
	return b.engine(quiet, nil).DiscoverClusters(ctx, p, b.g.tokenDir)
}

func (b *wizardBackend) Create(ctx context.Context, req tui.CreateRequest, sink engine.Sink, confirm engine.Confirmer) error {
	ctx = engine.WithHooks(ctx, b.hooks)
	r, err := b.request(req.Provider, req.Location, req.Name)
	if err != nil {
		return err
	}
	r.ConfigPath = req.ConfigPath
	return b.engine(sink, confirm).Create(ctx, r)
}

// Status reads the cluster for the inspect screens with engine.Inspect at
// the cluster's known location (events discarded: it runs every few
// seconds).
func (b *wizardBackend) Status(ctx context.Context, t tui.Target) (*tui.Inspection, error) {
	ctx = engine.WithHooks(ctx, b.hooks)
	r, err := b.request(t.Provider, t.Location, t.Name)
	if err != nil {
		return nil, err
	}
	quiet := engine.SinkFunc(func(engine.Event) {})
	st, err := b.engine(quiet, nil).Inspect(ctx, r)
	if err != nil {
		return nil, err
	}
	return &tui.Inspection{Status: st, Stacks: st.Stacks}, nil
}

// Project runs one project operation, as kiln project OP does.
func (b *wizardBackend) Project(ctx context.Context, t tui.Target, op tui.ProjectOp, sink engine.Sink, confirm engine.Confirmer) error {
	ctx = engine.WithHooks(ctx, b.hooks)
	r, err := b.request(t.Provider, t.Location, t.Name)
	if err != nil {
		return err
	}
	_, err = b.engine(sink, confirm).Project(ctx, engine.ProjectRequest{Request: r, Op: op.Op, Ref: op.Ref, Stack: op.Stack})
	return err
}

func (b *wizardBackend) Destroy(ctx context.Context, t tui.Target, sink engine.Sink, confirm engine.Confirmer) error {
	ctx = engine.WithHooks(ctx, b.hooks)
	r, err := b.request(t.Provider, t.Location, t.Name)
	if err != nil {
		return err
	}
	return b.engine(sink, confirm).Destroy(ctx, r)
}

package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kilnctl/kiln/engine/event"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/failure"
	awsprovider "github.com/kilnctl/kiln/engine/provider/aws"
	"github.com/kilnctl/kiln/tui"
)

// runWizard opens the Bubble Tea wizard (kiln without a command on a
// terminal). It drives the same engine entry points as the commands.
func (g *globals) runWizard(ctx context.Context) error {
	return g.runWizardWith(ctx, tui.Options{})
}

// runWizardWith opens the wizard with opts (kiln inspect opens it on one
// cluster's inspector).
func (g *globals) runWizardWith(ctx context.Context, opts tui.Options) error {
	b := &wizardOps{g: g}
	// The wizard owns the terminal, so the file keyring cannot prompt for
	// its passphrase: it is read from KILN_KEYRING_PASSPHRASE, and an
	// unavailable keyring is reported in each operation's log.
	store, err := g.openStore(nil)
	if err != nil {
		b.keyringWarning = fmt.Sprintf("keyring unavailable (%v); token dirs are found by the create form's Token dir field and the default path", err)
	} else {
		b.keyring = store
	}
	opts.Ops = b
	return tui.RunWith(ctx, opts, g.stdin, g.stdout, os.Environ())
}

// The wizard's Ops are live (Watch) and feed the project screen (Events,
// followed logs).
var (
	_ tui.Ops         = (*wizardOps)(nil)
	_ tui.Watcher     = (*wizardOps)(nil)
	_ tui.ProjectFeed = (*wizardOps)(nil)
)

// wizardOps are the engine operations the wizard runs, built as the
// commands build them with the global flags (--kubeconfig, --token-dir,
// --timeout, --keyring-backend): the wizard fills in the engine's
// requests, wizardOps their Target and Timeout.
type wizardOps struct {
	g              *globals
	keyring        engine.Keyring
	keyringWarning string
	// newProvider, when set, replaces providerAt's construction (tests).
	newProvider func(name, location string) (engine.Provider, error)
}

func (b *wizardOps) engine(sink engine.Sink, confirm engine.Confirmer) *engine.Engine {
	if b.keyringWarning != "" {
		event.NewReporter(sink, nil).Logf(event.LevelWarn, "%s", b.keyringWarning)
	}
	// Messages name the wizard's own fields and keys, not CLI flags; every
	// event also goes to --log-file when given.
	return &engine.Engine{Sink: b.g.rec.tee(sink), Confirm: confirm, Keyring: b.keyring, Namer: tui.InputName, Actions: tui.Actions, Chosen: tui.Chosen, Version: b.g.version, Hooks: b.g.hooks}
}

// opContext is the context of one wizard operation: it carries the API
// request trace of -v/--log-file, which the wizard's own contexts do not
// inherit. (The test hooks kiln was started with are set on the engines
// and providers the wizard builds, not carried here.)
func (b *wizardOps) opContext(ctx context.Context) context.Context {
	return b.g.rec.context(ctx)
}

// providerAt builds the provider for a cluster at location, as the
// commands do with --context / --region.
func (b *wizardOps) providerAt(name, location string) (engine.Provider, error) {
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
	return nil, failure.BadInput("PROVIDER %q: must be kube or aws", name)
}

func (b *wizardOps) target(provider, location, name string) (engine.Target, error) {
	p, err := b.providerAt(provider, location)
	if err != nil {
		return engine.Target{}, err
	}
	return engine.Target{Provider: p, Name: name, TokenDir: b.g.tokenDir}, nil
}

func (b *wizardOps) Locations() ([]string, string, error) {
	p := b.g.kubeProvider(b.g.context)
	names, err := p.Contexts()
	return names, p.Target(), err
}

// Clusters asks the engine to list the kiln clusters of every provider the
// wizard can reach — every kubeconfig context, and every region when AWS
// is set up on this machine (awsConfigured) — as kiln list does, with the
// token dir the engine would use for each (events discarded: the home
// screen shows the list). An AWS that cannot be searched is one row with
// its cause.
// Each AWS region's search is reported to progress as it starts and ends
// (the home screen's spinner per region).
func (b *wizardOps) Clusters(ctx context.Context, progress func(engine.SearchProgress)) ([]tui.Cluster, error) {
	kp, err := b.providerAt("kube", "")
	if err != nil {
		return nil, err
	}
	req := engine.ListRequest{Providers: []engine.Provider{kp}, TokenDir: b.g.tokenDir, Progress: progress}
	if awsConfigured(b.g, os.Getenv) {
		ap, err := b.providerAt("aws", "")
		if err != nil {
			return nil, err
		}
		req.Optional = append(req.Optional, ap)
	}
	quiet := engine.SinkFunc(func(engine.Event) {})
	return b.engine(quiet, nil).List(ctx, req)
}

// awsConfigured says whether AWS is set up for this user — an aws flag
// given, AWS credentials or a profile in the environment, or a shared
// config or credentials file — so the home screen searches AWS only where
// that can find something, and never waits on it on a machine without it.
func awsConfigured(g *globals, getenv func(string) string) bool {
	if g.aws.profile != "" || g.region != "" || len(g.regions) > 0 {
		return true
	}
	for _, v := range []string{"AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"} {
		if getenv(v) != "" {
			return true
		}
	}
	files := []string{getenv("AWS_CONFIG_FILE"), getenv("AWS_SHARED_CREDENTIALS_FILE")}
	if home := getenv("HOME"); home != "" {
		files = append(files, filepath.Join(home, ".aws", "config"), filepath.Join(home, ".aws", "credentials"))
	}
	for _, f := range files {
		if f == "" {
			continue
		}
		if _, err := os.Stat(f); err == nil {
			return true
		}
	}
	return false
}

// op is an operation on cluster t, ready to run: run gets the cluster's
// Target, built as the commands build it (the provider at t's location,
// --token-dir), and the engine as the wizard runs it.
func (b *wizardOps) op(t engine.ClusterRef, run func(ctx context.Context, e *engine.Engine, r engine.Target) error) tui.Op {
	return func(ctx context.Context, sink engine.Sink, confirm engine.Confirmer) error {
		ctx = b.opContext(ctx)
		r, err := b.target(t.Provider, t.Location, t.Name)
		if err != nil {
			return err
		}
		return run(ctx, b.engine(sink, confirm), r)
	}
}

// awsCreateProvider is the aws provider kiln create aws would build with
// the form's region, nodes, instance type and profile in place of the
// flags (the other aws flags still apply).
func (b *wizardOps) awsCreateProvider(c engine.ClusterRef, infra engine.Infra) (*awsprovider.Provider, error) {
	p, err := b.providerAt("aws", c.Location)
	if err != nil {
		return nil, err
	}
	ap, ok := p.(*awsprovider.Provider)
	if !ok {
		return nil, fmt.Errorf("aws provider: unexpected %T", p)
	}
	if err := checkFormNodes(infra); err != nil {
		return nil, err
	}
	// A fresh provider each call (providerAt builds one): the form's
	// values replace the flags'.
	if infra.Nodes != 0 {
		ap.Nodes = infra.Nodes
	}
	if infra.InstanceType != "" {
		ap.InstanceType = infra.InstanceType
	}
	if infra.Profile != "" {
		ap.Profile = infra.Profile
	}
	return ap, nil
}

// CheckCreate checks the create form's aws fields with the aws provider's
// own rules (ValidateFlags: region spelling, node count, instance type);
// no AWS call.
func (b *wizardOps) CheckCreate(c engine.ClusterRef, infra engine.Infra) error {
	if c.Provider != "aws" {
		return nil
	}
	if err := checkFormNodes(infra); err != nil {
		return err
	}
	if b.newProvider != nil {
		// Tests: validate with a plain provider of the form's values.
		p := &awsprovider.Provider{Region: c.Location, Nodes: infra.Nodes, InstanceType: infra.InstanceType, Profile: infra.Profile}
		return p.ValidateFlags()
	}
	p, err := b.awsCreateProvider(c, infra)
	if err != nil {
		return err
	}
	return p.ValidateFlags()
}

// checkFormNodes is the aws provider's node-count rule for the create
// form's Nodes field: a typed 0 is refused, as --nodes 0 is.
func checkFormNodes(infra engine.Infra) error {
	if infra.Nodes < 0 {
		return awsprovider.NotANodeCount()
	}
	return awsprovider.CheckNodes(infra.Nodes, infra.NodesGiven)
}

// Create runs kiln create of cluster c: an aws cluster's provider gets
// the form's aws fields in place of the flags; the form's Token dir
// (req.TokenDir) in place of --token-dir.
func (b *wizardOps) Create(c engine.ClusterRef, infra engine.Infra, req engine.CreateRequest) tui.Op {
	return func(ctx context.Context, sink engine.Sink, confirm engine.Confirmer) error {
		ctx = b.opContext(ctx)
		var t engine.Target
		var err error
		if c.Provider == "aws" && b.newProvider == nil {
			var p *awsprovider.Provider
			if p, err = b.awsCreateProvider(c, infra); err == nil {
				if err = p.ValidateFlags(); err == nil {
					t = engine.Target{Provider: p, Name: c.Name, TokenDir: b.g.tokenDir}
				}
			}
		} else {
			t, err = b.target(c.Provider, c.Location, c.Name)
		}
		if err != nil {
			return err
		}
		if req.TokenDir != "" {
			t.TokenDir = req.TokenDir // the form's Token dir field
		}
		req.Target, req.Timeout = t, b.g.timeout
		return b.engine(sink, confirm).Create(ctx, req)
	}
}

// Status reads the cluster for the inspect screens with engine.Inspect at
// the cluster's known location (events discarded: it runs every few
// seconds).
func (b *wizardOps) Status(ctx context.Context, t engine.ClusterRef) (*engine.ClusterStatus, error) {
	ctx = b.opContext(ctx)
	r, err := b.target(t.Provider, t.Location, t.Name)
	if err != nil {
		return nil, err
	}
	quiet := engine.SinkFunc(func(engine.Event) {})
	return b.engine(quiet, nil).Inspect(ctx, r)
}

// Watch keeps the inspect screens live with engine.Watch at the cluster's
// known location: one discovery there, then a read after every change the
// informers report (events discarded, as for Status).
func (b *wizardOps) Watch(ctx context.Context, t engine.ClusterRef, fn engine.WatchFunc) error {
	ctx = b.opContext(ctx)
	r, err := b.target(t.Provider, t.Location, t.Name)
	if err != nil {
		return err
	}
	quiet := engine.SinkFunc(func(engine.Event) {})
	return b.engine(quiet, nil).Watch(ctx, r, fn)
}

// Project runs one project operation, as kiln project OP does.
func (b *wizardOps) Project(t engine.ClusterRef, req engine.ProjectRequest) tui.Op {
	return b.op(t, func(ctx context.Context, e *engine.Engine, r engine.Target) error {
		req.Target, req.Timeout = r, b.g.timeout
		_, err := e.Project(ctx, req)
		return err
	})
}

// Destroy runs kiln destroy; the engine asks through the wizard's typed
// confirmation.
func (b *wizardOps) Destroy(t engine.ClusterRef, req engine.DestroyRequest) tui.Op {
	return b.op(t, func(ctx context.Context, e *engine.Engine, r engine.Target) error {
		req.Target, req.Timeout = r, b.g.timeout
		return e.Destroy(ctx, req)
	})
}

// ProjectEvents reads the project's Kubernetes Events for the project
// screen, as kiln project inspect does (events discarded: the screen
// shows the result).
func (b *wizardOps) ProjectEvents(ctx context.Context, t engine.ClusterRef, ref string) ([]engine.EventInfo, error) {
	ctx = b.opContext(ctx)
	r, err := b.target(t.Provider, t.Location, t.Name)
	if err != nil {
		return nil, err
	}
	quiet := engine.SinkFunc(func(engine.Event) {})
	st, err := b.engine(quiet, nil).Project(ctx, engine.ProjectRequest{Target: r, Op: engine.ProjectInspect, Ref: ref})
	if err != nil || len(st) == 0 {
		return nil, err
	}
	return st[0].Events, nil
}

// FollowLogs follows the project's pod logs for the project screen, as
// kiln project logs -f --tail N does, until ctx ends.
func (b *wizardOps) FollowLogs(ctx context.Context, t engine.ClusterRef, ref string, tail int, fn func(engine.PodLogLine)) error {
	ctx = b.opContext(ctx)
	r, err := b.target(t.Provider, t.Location, t.Name)
	if err != nil {
		return err
	}
	quiet := engine.SinkFunc(func(engine.Event) {})
	err = b.engine(quiet, nil).ProjectLogs(ctx, engine.ProjectLogsRequest{Target: r, Ref: ref, Follow: true, Tail: int64(tail)}, fn)
	if ctx.Err() != nil {
		return nil // the screen was left
	}
	return err
}

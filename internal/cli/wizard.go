package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/project"
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
}

func (b *wizardBackend) engine(sink engine.Sink, confirm engine.Confirmer) *engine.Engine {
	if b.keyringWarning != "" {
		sink.Emit(engine.Event{Type: engine.TypeLog, Level: engine.LevelWarn, Message: b.keyringWarning})
	}
	return &engine.Engine{Sink: sink, Confirm: confirm, Keyring: b.keyring}
}

func (b *wizardBackend) request(location, name string) engine.Request {
	return engine.Request{Provider: b.g.kubeProvider(location), Name: name, TokenDir: b.g.tokenDir, Timeout: b.g.timeout}
}

func (b *wizardBackend) Locations() ([]string, string, error) {
	p := b.g.kubeProvider(b.g.context)
	names, err := p.Contexts()
	return names, p.Target(), err
}

// Clusters lists every context that hosts a kiln cluster (or could not be
// reached), with whether a local token dir holds a key it trusts.
func (b *wizardBackend) Clusters(ctx context.Context) ([]tui.Cluster, error) {
	locs, err := b.g.kubeProvider("").Discover(ctx, "")
	if err != nil {
		return nil, err
	}
	var out []tui.Cluster
	for _, l := range locs {
		if l.Err != nil {
			out = append(out, tui.Cluster{Provider: "kube", Location: l.Name, Platform: "?", Err: l.Err.Error()})
			continue
		}
		if l.Cluster == "" || l.State == nil {
			continue
		}
		c := tui.Cluster{Provider: "kube", Name: l.Cluster, Location: l.Name, Platform: engine.PlatformAbsent, KeyIDs: l.State.KeyIDs()}
		if l.State.Installed {
			c.Platform = engine.PlatformInstalled
		}
		c.TokenDir = b.trustedDir(l.Cluster, c.KeyIDs)
		out = append(out, c)
	}
	return out, nil
}

// trustedDir finds a token dir whose key id the cluster trusts, without
// changing anything on disk: the keyring entry, then the default path.
func (b *wizardBackend) trustedDir(name string, trusted []string) string {
	var dirs []string
	if b.g.tokenDir != "" {
		dirs = append(dirs, b.g.tokenDir)
	}
	if b.keyring != nil {
		if e, ok, err := b.keyring.Get("kube", name); err == nil && ok {
			dirs = append(dirs, e.TokenDir)
		}
	}
	if d, err := creds.DefaultDir("kube", name); err == nil {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join(d, "manifest.json"))
		if err != nil {
			continue
		}
		var m creds.Manifest
		if json.Unmarshal(data, &m) == nil && slices.Contains(trusted, m.KeyID) {
			return d
		}
	}
	return ""
}

func (b *wizardBackend) Create(ctx context.Context, req tui.CreateRequest, sink engine.Sink, confirm engine.Confirmer) error {
	ctx = engine.WithHooks(ctx, b.hooks)
	r := b.request(req.Location, req.Name)
	r.ConfigPath = req.ConfigPath
	return b.engine(sink, confirm).Create(ctx, r)
}

// Status reads the cluster for the inspect screens with engine.Status
// (events discarded: it runs every few seconds), then the stacks of
// kiln-config and the projects' creation times, which the status does not
// carry.
func (b *wizardBackend) Status(ctx context.Context, t tui.Target) (*tui.Inspection, error) {
	ctx = engine.WithHooks(ctx, b.hooks)
	quiet := engine.SinkFunc(func(engine.Event) {})
	st, err := b.engine(quiet, nil).Status(ctx, b.request(t.Location, t.Name), false)
	if err != nil {
		return nil, err
	}
	in := &tui.Inspection{Status: st, Created: map[string]time.Time{}}
	_, cs, err := b.g.kubeProvider(t.Location).Client(t.Location)
	if err != nil {
		return in, nil // the status is what matters; ages and stacks are extras
	}
	if ps, err := platform.Read(ctx, cs); err == nil && ps.Config != nil {
		for _, s := range ps.Config.Spec.Stacks {
			in.Stacks = append(in.Stacks, s.Name)
		}
	}
	specs, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: project.LabelCluster + "=" + t.Name + "," + project.LabelProject})
	if err == nil {
		for _, cm := range specs.Items {
			p := cm.Labels[project.LabelProject]
			if cm.Name == project.SpecName(p) {
				in.Created[cm.Labels[project.LabelTenant]+"/"+p] = cm.CreationTimestamp.Time
			}
		}
	}
	return in, nil
}

// Project runs one project operation, as kiln project OP does.
func (b *wizardBackend) Project(ctx context.Context, t tui.Target, op tui.ProjectOp, sink engine.Sink, confirm engine.Confirmer) error {
	ctx = engine.WithHooks(ctx, b.hooks)
	_, err := b.engine(sink, confirm).Project(ctx, engine.ProjectRequest{Request: b.request(t.Location, t.Name), Op: op.Op, Ref: op.Ref, Stack: op.Stack})
	return err
}

func (b *wizardBackend) Destroy(ctx context.Context, t tui.Target, sink engine.Sink, confirm engine.Confirmer) error {
	ctx = engine.WithHooks(ctx, b.hooks)
	return b.engine(sink, confirm).Destroy(ctx, b.request(t.Location, t.Name))
}

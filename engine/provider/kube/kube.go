// Package kube is the provider for existing clusters reached through
// kubeconfig. Discovery inspects the kubeconfig's contexts in parallel,
// each within a hard bound and never interactively; the infrastructure
// phases have nothing to do.
package kube

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/input"
	"github.com/kilnctl/kiln/engine/kubeapi"
)

// DefaultTimeout bounds the inspection of one context during discovery.
const DefaultTimeout = 5 * time.Second

// ContextsEnv names the environment variable that limits discovery to some
// contexts (comma-separated), like --contexts.
const ContextsEnv = "KILN_CONTEXTS"

// Provider reaches clusters through a kubeconfig.
type Provider struct {
	// Kubeconfig is an explicit kubeconfig file (--kubeconfig); empty means
	// $KUBECONFIG (a list) or ~/.kube/config.
	Kubeconfig string
	// Context is the context the operation targets (--context); empty means
	// the kubeconfig's current context.
	Context string
	// Timeout bounds the inspection of each context (default 5s), whatever
	// it waits on: credential plugin, connect, TLS, requests.
	Timeout time.Duration
	// Only limits discovery to these contexts (--contexts, KILN_CONTEXTS);
	// empty means every context. Context is always searched.
	Only []string
	// Interactive lets the credential plugin of Context (the context the
	// user named) ask for a login when it needs one: the user is at a
	// terminal. Every other context's plugin runs without a terminal.
	Interactive bool
	// Wrap, if set, wraps each context's REST config (tests use it to count
	// or fail requests).
	Wrap func(*rest.Config)

	once    sync.Once
	raw     clientcmdapi.Config
	loadErr error

	// reached holds the clients discovery built for contexts it reached, so
	// the operation reuses them instead of running a plugin again.
	mu      sync.Mutex
	reached map[string]engine.Location

	// namer words the inputs the provider's messages name (the engine's
	// Namer, engine.NamerTaker; nil: as CLI flags).
	namer engine.Namer
}

// TakeNamer implements engine.NamerTaker: the inputs the provider's
// messages name are worded by the frontend's Namer.
func (p *Provider) TakeNamer(n engine.Namer) { p.namer = n }

// inputName words in as the frontend does (a CLI flag without a Namer).
func (p *Provider) inputName(in input.Input) string {
	if p.namer != nil {
		return p.namer(in)
	}
	return input.FlagName(in)
}

// New returns a kube provider.
func New(kubeconfig, context string) *Provider {
	return &Provider{Kubeconfig: kubeconfig, Context: context}
}

// Name implements engine.Provider.
func (p *Provider) Name() string { return "kube" }

// Nouns implements engine.Provider: a kube location is a kubeconfig context.
func (p *Provider) Nouns() engine.Nouns {
	return engine.Nouns{Location: "context", Scope: "kubeconfig", Target: engine.InputContext}
}

func (p *Provider) rules() *clientcmd.ClientConfigLoadingRules {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if p.Kubeconfig != "" {
		rules.ExplicitPath = p.Kubeconfig
	}
	return rules
}

func (p *Provider) load() (clientcmdapi.Config, error) {
	p.once.Do(func() {
		cfg, err := p.rules().Load()
		if err != nil {
			p.loadErr = input.New(failure.Input, input.Kubeconfig, "", "{input}: cannot load kubeconfig: %v", err)
			return
		}
		p.raw = *cfg
	})
	return p.raw, p.loadErr
}

func (p *Provider) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return DefaultTimeout
}

// Target implements engine.Provider.
func (p *Provider) Target() string {
	if p.Context != "" {
		return p.Context
	}
	cfg, err := p.load()
	if err != nil {
		return ""
	}
	return cfg.CurrentContext
}

// Contexts lists the kubeconfig's contexts, sorted.
func (p *Provider) Contexts() ([]string, error) {
	cfg, err := p.load()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(cfg.Contexts))
	for n := range cfg.Contexts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// restConfig builds the REST config of one context. With ownExec, an exec
// credential plugin is taken out of client-go's hands and returned to be
// run by kiln, bounded and without a terminal. Otherwise client-go runs
// it, with the terminal only for the context the user named on one.
func (p *Provider) restConfig(contextName string, ownExec bool) (*rest.Config, *execAuth, error) {
	raw, err := p.load()
	if err != nil {
		return nil, nil, err
	}
	kctx, ok := raw.Contexts[contextName]
	if !ok {
		return nil, nil, engine.NewInputError(failure.Input, engine.InputContext, contextName, "{input}: no context %q in the kubeconfig", contextName)
	}
	cfg := raw.DeepCopy() // raw is shared by every context's goroutine
	var auth *execAuth
	if ai := cfg.AuthInfos[kctx.AuthInfo]; ai != nil && ai.Exec != nil {
		switch {
		case ownExec:
			auth = &execAuth{ec: ai.Exec, cluster: newClusterInfo(cfg.Clusters[kctx.Cluster]), bound: p.timeout()}
			ai.Exec = nil
		case !(p.Interactive && contextName == p.Context):
			ai.Exec.StdinUnavailable = true
			ai.Exec.StdinUnavailableMessage = "kiln gives a credential plugin the terminal only for the context named with " + p.inputName(input.Context)
		}
	}
	rc, err := clientcmd.NewNonInteractiveClientConfig(*cfg, contextName, &clientcmd.ConfigOverrides{}, p.rules()).ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("context %s: %w", contextName, err)
	}
	return rc, auth, nil
}

// Client builds a client for one context; client-go runs its credential
// plugin, if any (see restConfig).
func (p *Provider) Client(contextName string) (*rest.Config, kubernetes.Interface, error) {
	rc, _, err := p.restConfig(contextName, false)
	if err != nil {
		return nil, nil, err
	}
	return p.finalize(contextName, rc)
}

// finalize is the one place every context's REST config is completed,
// whichever path built it (Client, or discovery's bounded probe).
func (p *Provider) finalize(contextName string, rc *rest.Config) (*rest.Config, kubernetes.Interface, error) {
	rc.QPS, rc.Burst = 50, 100
	rc.UserAgent = "kiln"
	// An API server on this machine: no gzip.
	kubeapi.Uncompressed(rc)
	kubeapi.Wrap(rc) // transient API faults are retried, for every call and every caller
	if p.Wrap != nil {
		p.Wrap(rc)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("context %s: %w", contextName, err)
	}
	return rc, cs, nil
}

// scope returns the contexts discovery searches: Only (plus Context), or
// every context. A name in Only that the kubeconfig lacks is bad input.
func (p *Provider) scope(names []string) (map[string]bool, error) {
	in := map[string]bool{}
	if len(p.Only) == 0 {
		for _, n := range names {
			in[n] = true
		}
		return in, nil
	}
	for _, n := range p.Only {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !slices.Contains(names, n) {
			return nil, engine.NewInputError(failure.Input, engine.InputContexts, n, "{input}: no context %q in the kubeconfig (contexts: %s)", n, strings.Join(names, ", "))
		}
		in[n] = true
	}
	if p.Context != "" {
		in[p.Context] = true
	}
	return in, nil
}

// ValidateScope checks that every context of Only is in the kubeconfig
// (failure.Input naming --contexts otherwise).
func (p *Provider) ValidateScope() error {
	names, err := p.Contexts()
	if err != nil {
		return err
	}
	_, err = p.scope(names)
	return err
}

// Discover implements engine.Provider: every context in scope, in
// parallel, each within Timeout (see InspectLocation). Contexts outside
// the scope are Locations with Skipped set; an unreachable context is a
// Location with Err set.
func (p *Provider) Discover(ctx context.Context, name string) ([]engine.Location, error) {
	names, err := p.Contexts()
	if err != nil {
		return nil, err
	}
	if p.Context != "" && !slices.Contains(names, p.Context) {
		return nil, engine.NewInputError(failure.Input, engine.InputContext, p.Context, "{input}: no context %q in the kubeconfig (contexts: %v)", p.Context, names)
	}
	scope, err := p.scope(names)
	if err != nil {
		return nil, err
	}
	locs := make([]engine.Location, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		if !scope[n] {
			locs[i] = engine.Location{Name: n, Skipped: true}
			continue
		}
		wg.Go(func() {
			locs[i] = p.InspectLocation(ctx, name, n)
		})
	}
	wg.Wait()
	return locs, ctx.Err()
}

// Scope says how discovery can be narrowed, for messages about slow or
// skipped contexts: the contexts input, or the KILN_CONTEXTS variable.
func (p *Provider) Scope() (input.Input, string) { return input.Contexts, ContextsEnv }

// EnsureInfrastructure implements engine.Provider: the cluster exists
// already; it only connects.
func (p *Provider) EnsureInfrastructure(ctx context.Context, name, location string, _ *event.Reporter) (engine.Location, bool, error) {
	p.mu.Lock()
	l, ok := p.reached[location]
	p.mu.Unlock()
	if ok {
		return engine.Location{Name: location, Infra: engine.InfraPresent, Client: l.Client, REST: l.REST}, true, nil
	}
	rc, cs, err := p.Client(location)
	if err != nil {
		return engine.Location{}, true, err
	}
	return engine.Location{Name: location, Infra: engine.InfraPresent, Client: cs, REST: rc}, true, nil
}

// DestroyInfrastructure implements engine.Provider: kiln did not create the
// cluster, so it leaves it.
func (p *Provider) DestroyInfrastructure(context.Context, string, string, *event.Reporter) (bool, error) {
	return true, nil
}

// Explicit reports whether the user named the context (--context), so
// operations on an existing cluster look only there.
func (p *Provider) Explicit() bool { return p.Context != "" }

// Package kube is the provider for existing clusters reached through
// kubeconfig. Discovery inspects every context of the kubeconfig in
// parallel; the infrastructure phases have nothing to do.
package kube

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/kubeapi"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/internal/exit"
)

// DefaultTimeout bounds the inspection of one context during discovery.
const DefaultTimeout = 5 * time.Second

// Provider reaches clusters through a kubeconfig.
type Provider struct {
	// Kubeconfig is an explicit kubeconfig file (--kubeconfig); empty means
	// $KUBECONFIG (a list) or ~/.kube/config.
	Kubeconfig string
	// Context is the context the operation targets (--context); empty means
	// the kubeconfig's current context.
	Context string
	// Timeout bounds the inspection of each context (default 5s).
	Timeout time.Duration
	// Wrap, if set, wraps each context's REST config (tests use it to count
	// or fail requests).
	Wrap func(*rest.Config)

	once    sync.Once
	raw     clientcmdapi.Config
	loadErr error
}

// New returns a kube provider.
func New(kubeconfig, context string) *Provider {
	return &Provider{Kubeconfig: kubeconfig, Context: context}
}

// Name implements engine.Provider.
func (p *Provider) Name() string { return "kube" }

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
			p.loadErr = exit.Usage("--kubeconfig: cannot load kubeconfig: %v", err)
			return
		}
		p.raw = *cfg
	})
	return p.raw, p.loadErr
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

// Client builds a client for one context.
func (p *Provider) Client(contextName string) (*rest.Config, kubernetes.Interface, error) {
	cfg, err := p.load()
	if err != nil {
		return nil, nil, err
	}
	if _, ok := cfg.Contexts[contextName]; !ok {
		return nil, nil, exit.Usage("--context: no context %q in the kubeconfig", contextName)
	}
	rc, err := clientcmd.NewNonInteractiveClientConfig(cfg, contextName, &clientcmd.ConfigOverrides{}, p.rules()).ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("context %s: %w", contextName, err)
	}
	rc.QPS, rc.Burst = 50, 100
	rc.UserAgent = "kiln"
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

// Discover implements engine.Provider: every context, in parallel, each
// bounded by Timeout. An unreachable context is a Location with Err set.
func (p *Provider) Discover(ctx context.Context, name string) ([]engine.Location, error) {
	names, err := p.Contexts()
	if err != nil {
		return nil, err
	}
	if p.Context != "" {
		found := false
		for _, n := range names {
			found = found || n == p.Context
		}
		if !found {
			return nil, exit.Usage("--context: no context %q in the kubeconfig (contexts: %v)", p.Context, names)
		}
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	locs := make([]engine.Location, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() {
			locs[i] = p.inspect(ctx, n, timeout)
		})
	}
	wg.Wait()
	return locs, ctx.Err()
}

func (p *Provider) inspect(ctx context.Context, contextName string, timeout time.Duration) engine.Location {
	loc := engine.Location{Name: contextName, Infra: engine.InfraUnreachable}
	rc, cs, err := p.Client(contextName)
	if err != nil {
		loc.Err = err
		return loc
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := platform.Read(ctx, cs)
	if err != nil {
		loc.Err = fmt.Errorf("context %s unreachable: %w", contextName, err)
		return loc
	}
	loc.Infra = engine.InfraPresent
	loc.State, loc.Cluster, loc.Client, loc.REST = st, st.Cluster, cs, rc
	return loc
}

// EnsureInfrastructure implements engine.Provider: the cluster exists
// already; it only connects.
func (p *Provider) EnsureInfrastructure(ctx context.Context, name, location string, _ engine.Sink) (engine.Location, bool, error) {
	rc, cs, err := p.Client(location)
	if err != nil {
		return engine.Location{}, true, err
	}
	return engine.Location{Name: location, Infra: engine.InfraPresent, Client: cs, REST: rc}, true, nil
}

// DestroyInfrastructure implements engine.Provider: kiln did not create the
// cluster, so it leaves it.
func (p *Provider) DestroyInfrastructure(context.Context, string, string, engine.Sink) (bool, error) {
	return true, nil
}

// Explicit reports whether the user named the context (--context), so
// operations on an existing cluster look only there.
func (p *Provider) Explicit() bool { return p.Context != "" }

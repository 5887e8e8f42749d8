package cli

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/project"
	awsprovider "github.com/kilnctl/kiln/engine/provider/aws"
)

// completionBudget bounds every dynamic completion: the shell waits for it.
// Each source runs at once within it; what is not in by then is left out.
const completionBudget = 250 * time.Millisecond

// registerCompletions adds dynamic completion to every command of the tree:
// PROVIDER, NAME, TENANT/PROJECT, and --context, --stack, --tenant,
// --project, --region(s).
func (g *globals) registerCompletions(root *cobra.Command) {
	_ = root.RegisterFlagCompletionFunc("context", g.completeContexts)
	regions := func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return awsprovider.Regions, cobra.ShellCompDirectiveNoFileComp
	}
	_ = root.RegisterFlagCompletionFunc("region", regions)
	_ = root.RegisterFlagCompletionFunc("regions", regions)
	_ = root.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp
	})
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if strings.Contains(c.Use, "PROVIDER NAME") {
			withRef := strings.Contains(c.Use, "TENANT/PROJECT")
			c.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				return g.completeArgs(cmd.Context(), args, withRef)
			}
		}
		if c.LocalNonPersistentFlags().Lookup("stack") != nil {
			_ = c.RegisterFlagCompletionFunc("stack", g.completeFromConfig(func(cfg *config.ClusterConfig) []string {
				var out []string
				for _, s := range cfg.Spec.Stacks {
					out = append(out, s.Name)
				}
				return out
			}))
		}
		for _, f := range []string{"tenant", "rotate-token"} {
			if c.LocalNonPersistentFlags().Lookup(f) != nil {
				_ = c.RegisterFlagCompletionFunc(f, g.completeFromConfig(func(cfg *config.ClusterConfig) []string { return cfg.Spec.Tenants }))
			}
		}
		if c.LocalNonPersistentFlags().Lookup("project") != nil {
			_ = c.RegisterFlagCompletionFunc("project", func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
				if len(args) < 2 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return g.projects(cmd.Context(), args[0], args[1]), cobra.ShellCompDirectiveNoFileComp
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// completeArgs completes PROVIDER, then NAME, then TENANT/PROJECT.
func (g *globals) completeArgs(ctx context.Context, args []string, withRef bool) ([]string, cobra.ShellCompDirective) {
	switch {
	case len(args) == 0:
		return []string{"kube", "aws"}, cobra.ShellCompDirectiveNoFileComp
	case len(args) == 1:
		return g.names(ctx, args[0]), cobra.ShellCompDirectiveNoFileComp
	case len(args) == 2 && withRef:
		return g.projects(ctx, args[0], args[1]), cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// gather runs each source at once and returns the sorted, distinct names
// they gave within completionBudget.
func gather(ctx context.Context, sources ...func(context.Context) []string) []string {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, completionBudget)
	defer cancel()
	var mu sync.Mutex
	seen := map[string]bool{}
	done := make(chan struct{}, len(sources))
	for _, src := range sources {
		go func() {
			names := src(ctx)
			mu.Lock()
			for _, n := range names {
				if n != "" {
					seen[n] = true
				}
			}
			mu.Unlock()
			done <- struct{}{}
		}()
	}
	for range sources {
		select {
		case <-done:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// names are the cluster NAMEs of provider kiln knows without discovery:
// keyring entries, default token dirs, and the kiln cluster of the
// kubeconfig's --context (or current context).
func (g *globals) names(ctx context.Context, provider string) []string {
	sources := []func(context.Context) []string{
		func(context.Context) []string {
			store, err := g.openStore(nil)
			if err != nil {
				return nil
			}
			entries, err := store.List()
			if err != nil {
				return nil
			}
			var out []string
			for _, e := range entries {
				if e.Provider == provider {
					out = append(out, e.Name)
				}
			}
			return out
		},
		func(context.Context) []string {
			dir, err := creds.DefaultDir(provider, "x")
			if err != nil {
				return nil
			}
			base := filepath.Dir(filepath.Dir(dir))
			ents, err := os.ReadDir(base)
			if err != nil {
				return nil
			}
			var out []string
			for _, e := range ents {
				if _, err := os.Stat(filepath.Join(base, e.Name(), creds.TokensDir)); err == nil && config.ValidateName(e.Name()) == nil {
					out = append(out, e.Name())
				}
			}
			return out
		},
	}
	if provider == "kube" {
		sources = append(sources, func(ctx context.Context) []string {
			cs := g.completionClient()
			if cs == nil {
				return nil
			}
			st, err := platform.Read(ctx, cs)
			if err != nil || !st.NamespaceExists {
				return nil
			}
			return []string{st.Cluster}
		})
	}
	return gather(ctx, sources...)
}

// completionClient reaches the --context (or current) context, or nil.
func (g *globals) completionClient() kubernetes.Interface {
	p := g.kubeProvider(g.context)
	_, cs, err := p.Client(p.Target())
	if err != nil {
		return nil
	}
	return cs
}

// projects are the TENANT/PROJECTs of cluster name in the --context (or
// current) context: one LIST of spec ConfigMaps.
func (g *globals) projects(ctx context.Context, provider, name string) []string {
	if provider != "kube" {
		return nil
	}
	return gather(ctx, func(ctx context.Context) []string {
		cs := g.completionClient()
		if cs == nil {
			return nil
		}
		// Per tenant namespace: kiln's roles may not list cluster-wide.
		nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: project.LabelCluster + "=" + name})
		if err != nil {
			return nil
		}
		var items []corev1.ConfigMap
		for _, ns := range nss.Items {
			if !strings.HasPrefix(ns.Name, config.TenantNamespace("")) {
				continue
			}
			list, err := cs.CoreV1().ConfigMaps(ns.Name).List(ctx, metav1.ListOptions{
				LabelSelector: project.LabelCluster + "=" + name + "," + project.LabelProject,
			})
			if err == nil {
				items = append(items, list.Items...)
			}
		}
		var out []string
		for _, cm := range items {
			t := strings.TrimPrefix(cm.Namespace, config.TenantNamespace(""))
			if p := cm.Labels[project.LabelProject]; p != "" && t != cm.Namespace && cm.Name == project.SpecName(p) {
				out = append(out, t+"/"+p)
			}
		}
		return out
	})
}

// completeFromConfig completes a flag from the kiln-config of the cluster in
// the --context (or current) context.
func (g *globals) completeFromConfig(pick func(*config.ClusterConfig) []string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 && args[0] != "kube" {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return gather(cmd.Context(), func(ctx context.Context) []string {
			cs := g.completionClient()
			if cs == nil {
				return nil
			}
			st, err := platform.Read(ctx, cs)
			if err != nil || st.Config == nil || (len(args) > 1 && st.Cluster != args[1]) {
				return nil
			}
			return pick(st.Config)
		}), cobra.ShellCompDirectiveNoFileComp
	}
}

func (g *globals) completeContexts(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	names, err := g.kubeProvider("").Contexts()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

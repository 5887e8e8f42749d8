package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/lock"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/project"
	"github.com/kilnctl/kiln/engine/readiness"
	"github.com/kilnctl/kiln/internal/exit"
)

// ObjectStatus is the live status of one platform object.
type ObjectStatus struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Status    string `json:"status"`
	Message   string `json:"message"`
}

// ClusterStatus is kiln status: everything derived from live objects.
type ClusterStatus struct {
	Provider   string         `json:"provider"`
	Name       string         `json:"name"`
	Location   string         `json:"location"`
	Installed  bool           `json:"installed"`
	Ready      bool           `json:"ready"`
	Objects    []ObjectStatus `json:"objects"`
	Tenants    []string       `json:"tenants"`
	KeyIDs     []string       `json:"key_ids"`
	TokenDir   string         `json:"token_dir"`
	KeyID      string         `json:"token_key_id"`
	KeyTrusted bool           `json:"key_trusted"`
	// TokenProblem says why the token dir is not usable ("" when fine).
	TokenProblem string `json:"token_problem,omitempty"`
	// Projects are every project's observed state.
	Projects []ProjectStatus `json:"projects"`
	// Stacks are the stack names kiln-config lists, in order (for the
	// wizard's restack; not part of the status output).
	Stacks []string `json:"-"`
}

// platformRefs lists every platform object in apply order.
func platformRefs(name string, cfg *config.ClusterConfig) []readiness.Ref {
	refs := []readiness.Ref{
		platform.NamespaceObject(name).Ref,
		{Kind: readiness.KindConfigMap, Namespace: platform.Namespace, Name: platform.AuthName},
		{Kind: readiness.KindConfigMap, Namespace: platform.Namespace, Name: platform.ConfigMapName},
	}
	for _, o := range platform.TenantObjects(name, cfg.Spec.Tenants) {
		refs = append(refs, o.Ref)
	}
	for _, o := range platform.GatewayObjects(name, cfg) {
		refs = append(refs, o.Ref)
	}
	return refs
}

// locate discovers and returns the location where NAME's platform lives.
// A cluster that is not found is bad input (exit 2): the NAME is wrong or
// the kubeconfig does not reach it. With infraOK, a location holding only
// part of NAME's infrastructure (see infraOnly) is returned too: destroy
// removes what is there.
func (e *Engine) locate(ctx context.Context, req Request, infraOK bool) (Location, []candidate, error) {
	if err := config.ValidateName(req.Name); err != nil {
		return Location{}, nil, err
	}
	var loc Location
	var cands []candidate
	err := e.phase(ctx, "discover", func(ctx context.Context) error {
		f, err := e.discoverTarget(ctx, req, false)
		loc, cands = f.loc, f.cands
		var nf *notFoundError
		if errors.As(err, &nf) {
			return exit.Usage("%s", nf.msg)
		}
		if err != nil {
			return err
		}
		if infraOK && infraOnly(loc, req.Name) {
			return nil
		}
		if loc.State == nil || (!loc.State.Installed && !loc.State.NamespaceExists) {
			return exit.Usage("no kiln cluster %s in %s %s", req.Name, locationNoun(req.Provider), loc.Name)
		}
		return nil
	})
	return loc, cands, err
}

// Status reports the health of a cluster's platform, derived from the
// live objects. With watch set it keeps streaming resource events until ctx
// ends.
func (e *Engine) Status(ctx context.Context, req Request, watch bool) (*ClusterStatus, error) {
	st, err := e.status(ctx, req, watch)
	if err != nil {
		return st, e.finish(err, "", "")
	}
	msg := fmt.Sprintf("cluster %s: platform ready", req.Name)
	if !st.Ready {
		msg = fmt.Sprintf("cluster %s: platform not ready", req.Name)
	}
	return st, e.finish(nil, msg, st.TokenDir)
}

func (e *Engine) status(ctx context.Context, req Request, watch bool) (*ClusterStatus, error) {
	loc, cands, err := e.locate(ctx, req, false)
	if err != nil {
		return nil, err
	}
	ps := loc.State
	out := &ClusterStatus{Provider: req.Provider.Name(), Name: req.Name, Location: loc.Name, Installed: ps.Installed, KeyIDs: ps.KeyIDs()}
	cfg := ps.Config
	if cfg == nil {
		cfg = config.Default(req.Name) // partial install: show what should be there
	}
	out.Tenants = cfg.Spec.Tenants
	for _, s := range cfg.Spec.Stacks {
		out.Stacks = append(out.Stacks, s.Name)
	}
	refs := platformRefs(req.Name, cfg)
	err = e.phase(ctx, "readiness", func(ctx context.Context) error {
		ready := true
		for _, ref := range refs {
			res, err := readiness.Compute(ctx, loc.Client, ref)
			if err != nil {
				return err
			}
			out.Objects = append(out.Objects, ObjectStatus{ref.Kind, ref.Namespace, ref.Name, res.Status, res.Message})
			e.resource(ref.Kind, ref.Namespace, ref.Name, res.Status, res.Message)
			ready = ready && res.Status == readiness.Current
		}
		out.Ready = ready
		return nil
	})
	if err != nil {
		return out, err
	}
	if ps.Installed && ps.Config != nil {
		ops := e.opsFor(loc, req)
		if req.Repair {
			if err := e.repairProjects(ctx, ops); err != nil {
				return out, err
			}
		}
		if out.Projects, err = ops.List(ctx, ""); err != nil {
			return out, err
		}
		for i := range out.Projects {
			e.emit(Event{Type: TypeProject, Project: &out.Projects[i]})
		}
	}
	td, found, err := findTrusted(cands, req.Provider.Name(), req.Name, ps.Keys)
	switch {
	case err != nil:
		out.TokenProblem = err.Error()
	case td != nil:
		out.TokenDir, out.KeyID, out.KeyTrusted = td.Path, td.Manifest.KeyID, true
		if err := verifyTokens(td, ps.Keys, cfg.Spec.Tenants); err != nil {
			out.TokenProblem = err.Error()
		}
	case len(found) > 0:
		out.TokenDir, out.KeyID = found[0].Path, found[0].Manifest.KeyID
		out.TokenProblem = fmt.Sprintf("key %s is not trusted by kiln-auth", found[0].Manifest.KeyID)
	default:
		out.TokenProblem = "no token dir found in " + describeCandidates(cands)
	}
	if out.TokenProblem != "" {
		e.logf(LevelWarn, "tokens: %s", out.TokenProblem)
	} else {
		e.logf(LevelInfo, "tokens: %s holds trusted key %s", out.TokenDir, out.KeyID)
	}
	if watch {
		if req.Snapshot != nil {
			req.Snapshot(out)
		}
		w := e.watcher(loc.Client)
		never := func(readiness.Result) bool { return false }
		_, err := w.Until(ctx, refs, never)
		if errors.Is(err, context.Canceled) || ctx.Err() != nil {
			return out, nil // --watch ends with Ctrl-C: that is success
		}
		return out, err
	}
	return out, nil
}

// Wait waits until every platform object is ready and every tenant token
// verifies against kiln-auth. It needs no config file: tenants come from
// kiln-config.
func (e *Engine) Wait(ctx context.Context, req Request) error {
	td, err := e.wait(ctx, req)
	dir := ""
	if td != nil {
		dir = td.Path
	}
	return e.finish(err, fmt.Sprintf("cluster %s is ready and every tenant token verifies", req.Name), dir)
}

func (e *Engine) wait(ctx context.Context, req Request) (*creds.TokenDir, error) {
	loc, cands, err := e.locate(ctx, req, false)
	if err != nil {
		return nil, err
	}
	var td *creds.TokenDir
	err = e.phase(ctx, "readiness", func(ctx context.Context) error {
		wctx, cancel := withTimeout(ctx, req.Timeout)
		defer cancel()
		// The platform may still be being created: wait for kiln-config
		// first, then for everything it lists.
		w := e.watcher(loc.Client)
		cfgRef := readiness.Ref{Kind: readiness.KindConfigMap, Namespace: platform.Namespace, Name: platform.ConfigMapName}
		if _, err := w.Until(wctx, []readiness.Ref{cfgRef}, readiness.Ready); err != nil {
			return err
		}
		st, err := platform.Read(wctx, loc.Client)
		if err != nil {
			return err
		}
		if _, err := w.Until(wctx, platformRefs(req.Name, st.Config), readiness.Ready); err != nil {
			return err
		}
		var found []*creds.TokenDir
		td, found, err = findTrusted(cands, req.Provider.Name(), req.Name, st.Keys)
		if err != nil {
			return err
		}
		if td == nil {
			var have []string
			for _, f := range found {
				have = append(have, fmt.Sprintf("%s (key %s)", f.Path, f.Manifest.KeyID))
			}
			return fmt.Errorf("no token dir with a key the cluster trusts (trusted: %s); looked in %s%s",
				strings.Join(st.KeyIDs(), ", "), describeCandidates(cands), foundSuffix(have))
		}
		return verifyTokens(td, st.Keys, st.Config.Spec.Tenants)
	})
	return td, err
}

func foundSuffix(have []string) string {
	if len(have) == 0 {
		return ""
	}
	return "; found untrusted: " + strings.Join(have, ", ")
}

// Destroy removes the platform in reverse order, verifying each object is
// gone, then the infrastructure, then forgets the keyring entry and moves
// the token dir aside (never deletes it).
func (e *Engine) Destroy(ctx context.Context, req Request) error {
	aside, err := e.destroy(ctx, req)
	msg := fmt.Sprintf("cluster %s destroyed", req.Name)
	if aside != "" {
		msg += "; token dir moved to " + aside
	}
	return e.finish(err, msg, aside)
}

func (e *Engine) destroy(ctx context.Context, req Request) (string, error) {
	loc, cands, err := e.locate(ctx, req, true)
	if err != nil {
		return "", err
	}
	if infraOnly(loc, req.Name) {
		return "", e.destroyInfraOnly(ctx, req, loc)
	}
	cfg := config.Default(req.Name)
	if loc.State.Config != nil {
		cfg = loc.State.Config
	}
	td, _, _ := findTrusted(cands, req.Provider.Name(), req.Name, loc.State.Keys)
	if !req.Yes {
		q := DestroyQuestion{Provider: req.Provider.Name(), Name: req.Name, Location: loc.Name, Tenants: cfg.Spec.Tenants}
		if td != nil {
			q.TokenDir = td.Path
		}
		ok := false
		if e.Confirm != nil {
			if ok, err = e.Confirm.ConfirmDestroy(ctx, q); err != nil {
				return "", err
			}
		}
		if !ok {
			return "", exit.Confirm("destroying cluster %s (%s %s) removes its platform and every tenant namespace; nothing was changed. Pass --yes to confirm", req.Name, locationNoun(req.Provider), loc.Name)
		}
	}
	cs := loc.Client
	// destroy changes the platform: project operations refuse while it
	// holds the cluster lease, and it refuses while one runs (it does not
	// wait: kiln refuses rather than queues).
	l, lctx, err := lock.Acquire(ctx, cs, lock.Options{
		Namespace: platform.Namespace, Name: platform.LockName, Operation: "destroy " + req.Name,
		Labels:    map[string]string{platform.LabelManagedBy: "kiln", platform.LabelCluster: req.Name},
		Exclusive: true,
		Excludes: []lock.Exclusion{{
			Selector: platform.LabelCluster + "=" + req.Name + "," + project.LabelProject,
			Advice:   "destroy refuses while a project operation runs on the cluster; nothing was changed. Wait for it to finish, then run destroy again",
		}},
		Logf: func(f string, a ...any) { e.logf(LevelInfo, f, a...) },
	})
	if err != nil {
		return "", err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = l.Release(rctx) // the lease is usually gone with its namespace
	}()
	err = e.phase(lctx, "platform", func(ctx context.Context) error {
		return e.removePlatform(ctx, cs, req, cfg, l)
	})
	if err != nil {
		err = l.Explain(err)
		return "", err
	}
	err = e.phase(ctx, "infrastructure", func(ctx context.Context) error {
		skipped, err := req.Provider.DestroyInfrastructure(ctx, req.Name, loc.Name, e.Sink)
		if err == nil && skipped {
			return skip("kiln did not create %s %s; it stays", locationNoun(req.Provider), loc.Name)
		}
		return err
	})
	if err != nil {
		return "", err
	}
	var aside string
	err = e.phase(ctx, "credentials", func(ctx context.Context) error {
		if e.Keyring != nil {
			if err := e.Keyring.Delete(req.Provider.Name(), req.Name); err != nil {
				e.logf(LevelWarn, "keyring: %v", err)
			}
		}
		if td == nil {
			return skip("no token dir with a trusted key found")
		}
		// Not while a create on this host holds the directory.
		dl, err := creds.LockDir(td.Path, lock.Identity("destroy "+req.Name))
		if err != nil {
			return err
		}
		defer dl.Unlock()
		aside, err = creds.MoveAside(td.Path, e.now())
		if err != nil {
			return err
		}
		e.logf(LevelInfo, "token dir %s moved to %s (kept, not deleted)", td.Path, aside)
		return nil
	})
	return aside, err
}

// removePlatform deletes the platform objects in reverse apply order; each
// is confirmed gone (watched) before the next is deleted.
func (e *Engine) removePlatform(ctx context.Context, cs kubernetes.Interface, req Request, cfg *config.ClusterConfig, l *lock.Lock) error {
	refs := platformRefs(req.Name, cfg)
	// Also remove tenant namespaces of tenants the config no longer lists
	// but that this cluster created.
	extra, err := strayTenants(ctx, cs, req.Name, cfg.Spec.Tenants)
	if err != nil {
		return err
	}
	w := e.watcher(cs)
	gone := func(refs ...readiness.Ref) error {
		for _, ref := range refs {
			if err := platform.Delete(ctx, cs, ref); err != nil {
				return err
			}
		}
		wctx, cancel := withTimeout(ctx, req.Timeout)
		defer cancel()
		_, err := w.Until(wctx, refs, readiness.Gone)
		return err
	}
	// Reverse order, except: tenant namespaces go together (independent),
	// and kiln-system (with the lease in it) goes last.
	var tenants []readiness.Ref
	var rest []readiness.Ref
	for i := len(refs) - 1; i >= 1; i-- {
		ref := refs[i]
		if ref.Kind == readiness.KindNamespace {
			tenants = append(tenants, ref)
			continue
		}
		if ref.Name == platform.ConfigMapName || ref.Name == platform.AuthName {
			continue
		}
		rest = append(rest, ref)
	}
	tenants = append(tenants, extra...)
	for _, ref := range rest {
		if err := gone(ref); err != nil {
			return err
		}
	}
	if len(tenants) > 0 {
		if err := gone(tenants...); err != nil {
			return err
		}
	}
	// kiln-config (the "installed" marker) before kiln-auth: the marker
	// never exists without the key it was installed with.
	for _, name := range []string{platform.ConfigMapName, platform.AuthName} {
		if err := gone(readiness.Ref{Kind: readiness.KindConfigMap, Namespace: platform.Namespace, Name: name}); err != nil {
			return err
		}
	}
	l.StopRenewing()
	return gone(refs[0])
}

// strayTenants finds tenant namespaces labelled for this cluster that the
// config does not list (a tenant removed by hand from kiln-config).
func strayTenants(ctx context.Context, cs kubernetes.Interface, name string, tenants []string) ([]readiness.Ref, error) {
	list, err := cs.CoreV1().Namespaces().List(ctx, listByCluster(name))
	if err != nil {
		return nil, fmt.Errorf("list namespaces of cluster %s: %w", name, err)
	}
	known := map[string]bool{platform.Namespace: true}
	for _, t := range tenants {
		known[platform.TenantNamespace(t)] = true
	}
	var out []readiness.Ref
	for _, ns := range list.Items {
		if !known[ns.Name] {
			out = append(out, readiness.Ref{Kind: readiness.KindNamespace, Name: ns.Name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func listByCluster(name string) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: platform.LabelCluster + "=" + name + "," + platform.LabelManagedBy + "=kiln"}
}

// withTimeout bounds a wait by the operation's --timeout (none when zero).
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return context.WithCancel(ctx)
}

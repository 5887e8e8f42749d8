package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/readiness"
	"github.com/kilnctl/kiln/internal/human"
)

// ObjectStatus is the live status of one platform object.
type ObjectStatus struct {
	Kind      string       `json:"kind"`
	Namespace string       `json:"namespace"`
	Name      string       `json:"name"`
	Status    event.Status `json:"status"`
	Message   string       `json:"message"`
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
	// Nouns word the location for a frontend (not part of the JSON).
	Nouns Nouns `json:"-"`
	// PlatformVersion and PlatformSchema are the kiln version and
	// platform schema recorded on kiln-config by the kiln that last
	// installed or upgraded it ("" and 0 before versions were recorded).
	PlatformVersion string `json:"platform_version"`
	PlatformSchema  int    `json:"platform_schema"`
	// KilnVersion and KilnSchema are this kiln's.
	KilnVersion string `json:"kiln_version"`
	KilnSchema  int    `json:"kiln_schema"`
	// KubernetesVersion is the API server's version (git version).
	KubernetesVersion string `json:"kubernetes_version"`
	// PartlyRemoved, when set, says that a destroy began and did not
	// finish, what is left, and how to finish it.
	PartlyRemoved string `json:"partly_removed,omitempty"`
	// FrontDoor is how the gateway is reached from outside (nil when the
	// platform is not installed).
	FrontDoor *FrontDoor `json:"front_door,omitempty"`
	// Isolation is whether the cluster enforces kiln's NetworkPolicies.
	Isolation *Isolation `json:"isolation,omitempty"`
	// Access lists who may reach the cluster through the cloud's access
	// entries (aws; nil for a provider without them).
	Access *Access `json:"access,omitempty"`
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
	for _, o := range platform.PolicyObjects(name, cfg) {
		refs = append(refs, o.Ref)
	}
	for _, o := range platform.GatewayObjects(name, cfg, "") {
		refs = append(refs, o.Ref)
	}
	return refs
}

// locate discovers and returns the location where NAME's platform lives.
// A cluster that is not found is bad input (failure.Input): the NAME is wrong or
// the kubeconfig does not reach it. With infraOK, a location holding only
// part of NAME's infrastructure (see infraOnly) is returned too: destroy
// removes what is there.
func (e *Engine) locate(ctx context.Context, req Target, infraOK bool) (Location, []candidate, error) {
	if err := config.ValidateName(req.Name); err != nil {
		return Location{}, nil, err
	}
	var loc Location
	var cands []candidate
	var gone *removedError
	err := e.phase(ctx, PhaseDiscover, func(ctx context.Context) error {
		f, err := e.discoverTarget(ctx, req, false)
		loc, cands = f.loc, f.cands
		var nf *notFoundError
		if errors.As(err, &nf) {
			err = failure.BadInput("%s", nf.msg)
		}
		if err == nil && infraOK && infraOnly(loc, req.Name) {
			return nil
		}
		if err == nil && (loc.State == nil || (!loc.State.Installed && !loc.State.NamespaceExists)) {
			err = failure.BadInput("no kiln cluster %s in %s %s", req.Name, locationNoun(req.Provider), loc.Name)
		}
		if err != nil && infraOK && failure.Of(err) == failure.Input {
			// destroy: nothing of NAME is left in any cluster, but kiln
			// may still remember it (an interrupted destroy's last step).
			if l, ok := e.removedLeftovers(ctx, req, cands); ok {
				gone = &removedError{Location: l, err: err}
				return skip("no kiln cluster %s is left in %s %s, but this machine still remembers it", req.Name, locationNoun(req.Provider), l.Name)
			}
		}
		return err
	})
	if gone != nil {
		return loc, cands, gone
	}
	return loc, cands, err
}

// removedError is locate's answer for destroy when cluster NAME is gone
// from its remembered location and only this machine's memory of it (a
// keyring entry, a token dir) is left.
type removedError struct {
	Location Location
	err      error
}

func (e *removedError) Error() string { return e.err.Error() }
func (e *removedError) Unwrap() error { return e.err }

// removedLeftovers says whether req's cluster is gone from the location
// kiln remembers for it (inspected now, without error: no kiln cluster of
// that NAME there) while a keyring entry or a token dir for it remains.
func (e *Engine) removedLeftovers(ctx context.Context, req Target, cands []candidate) (Location, bool) {
	// Only a committed token dir is what an interrupted destroy leaves
	// behind. A pending one is a create that never installed a platform:
	// the next create replaces it (destroy of bare infrastructure leaves
	// it, and its keyring entry, so).
	where := ""
	for _, c := range cands {
		if td, err := creds.Load(c.Path); err == nil && td.Manifest.Cluster == req.Name && td.Manifest.Provider == req.Provider.Name() && td.Manifest.State == creds.StateCommitted {
			where = td.Manifest.Location
			break
		}
	}
	insp, ok := req.Provider.(LocationInspector)
	if where == "" || !ok {
		return Location{}, false
	}
	l := insp.InspectLocation(ctx, req.Name, where)
	if l.Err != nil || l.Cluster == req.Name && l.State != nil && (l.State.Installed || l.State.NamespaceExists) {
		return Location{}, false
	}
	return l, true
}

// StatusRequest is what Status needs.
type StatusRequest struct {
	Target
	// Watch keeps streaming resource events, after a snapshot event, until
	// ctx ends.
	Watch bool
	// Repair heals what is missing of projects whose desired state is
	// running.
	Repair bool
	// Timeout bounds each repair's waits for readiness.
	Timeout time.Duration
}

// Status reports the health of a cluster's platform, derived from the
// live objects.
func (e *Engine) Status(ctx context.Context, req StatusRequest) (*ClusterStatus, error) {
	ctx = e.traced(ctx)
	req.Target = e.hinted(req.Target)
	st, err := e.status(ctx, req)
	if err != nil {
		return st, e.finish(err, "", "")
	}
	msg := fmt.Sprintf("cluster %s: platform ready", req.Name)
	if !st.Ready {
		msg = fmt.Sprintf("cluster %s: platform not ready", req.Name)
	}
	return st, e.finish(nil, msg, st.TokenDir)
}

func (e *Engine) status(ctx context.Context, req StatusRequest) (*ClusterStatus, error) {
	loc, cands, err := e.locate(ctx, req.Target, false)
	if err != nil {
		return nil, err
	}
	return e.statusAt(ctx, req, loc, cands)
}

// statusAt reads the status of req's cluster at loc, found earlier (no
// discovery): Status after locate, and Watch on every change.
func (e *Engine) statusAt(ctx context.Context, req StatusRequest, loc Location, cands []candidate) (*ClusterStatus, error) {
	ps := loc.State
	out := &ClusterStatus{Provider: req.Provider.Name(), Nouns: req.Provider.Nouns(), Name: req.Name, Location: loc.Name, Installed: ps.Installed, KeyIDs: ps.KeyIDs()}
	cfg := ps.Config
	if cfg == nil {
		cfg = config.Default(req.Name) // partial install: show what should be there
	}
	// installed: kiln-config read, so the front door and the projects
	// can be read too.
	installed := ps.Installed && ps.Config != nil
	out.PlatformVersion, out.PlatformSchema = ps.Version, ps.Schema
	if ps.PartlyRemoved() {
		out.PartlyRemoved = partlyRemoved(ctx, loc.Client, req.Target, loc.Name, ps)
		e.logf(LevelWarn, "cluster %s is partly removed: %s", req.Name, out.PartlyRemoved)
	}
	out.KilnVersion, out.KilnSchema = e.version(), platform.SchemaVersion
	if v, err := loc.Client.Discovery().ServerVersion(); err == nil {
		out.KubernetesVersion = v.GitVersion
	} else {
		out.KubernetesVersion = "unknown"
		e.logf(LevelWarn, "read the API server's version: %v", err)
	}
	e.logf(LevelInfo, "versions: %s", out.Versions())
	out.Tenants = cfg.Spec.Tenants
	for _, s := range cfg.Spec.Stacks {
		out.Stacks = append(out.Stacks, s.Name)
	}
	refs := platformRefs(req.Name, cfg)
	policies := map[readiness.Ref]platform.Object{}
	for _, o := range platform.PolicyObjects(req.Name, cfg) {
		policies[o.Ref] = o
	}
	// The projects are read beside the platform's objects (they are
	// reported after them): at 10,000 projects their reads are most of
	// status's time. A repair changes them first, so reads them after.
	var projects func() ([]ProjectStatus, error)
	if installed && !req.Repair {
		pctx, cancel := context.WithCancel(ctx)
		defer cancel()
		projects = e.opsFor(loc, req.Target, req.Timeout).Prefetch(pctx, "")
	}
	err := e.phase(ctx, PhaseReadiness, func(ctx context.Context) error {
		// The objects are read in parallel (one round trip of latency, not
		// one per object), NetworkPolicies with their drift check, then
		// reported in apply order.
		results := make([]readiness.Result, len(refs))
		errs := make([]error, len(refs))
		var wg sync.WaitGroup
		for i, ref := range refs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = readiness.Compute(ctx, loc.Client, ref)
				if p, ok := policies[ref]; ok && errs[i] == nil && results[i].Status == readiness.Current {
					// A policy is ready when it holds what kiln applied.
					drift, err := platform.Drift(ctx, loc.Client, p)
					switch {
					case err != nil:
						errs[i] = err
					case drift != "":
						results[i] = readiness.Result{Status: readiness.Failed, Message: drift}
					}
				}
			}()
		}
		wg.Wait()
		ready := true
		for i, ref := range refs {
			if errs[i] != nil {
				return errs[i]
			}
			res := results[i]
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
	// The front door and the network plugin: two independent reads of a
	// few objects each, side by side.
	var fd FrontDoor
	var iso Isolation
	var wg sync.WaitGroup
	if installed {
		wg.Go(func() { fd = readFrontDoor(ctx, loc.Client, ps.Config, hintsFor(req.Target, loc.Name)) })
	}
	wg.Go(func() { iso = readIsolation(ctx, loc.Client) })
	var acc *Access
	if ar, ok := req.Provider.(AccessReader); ok {
		wg.Go(func() { a := ar.ReadAccess(ctx, req.Name, loc.Name); acc = &a })
	}
	wg.Wait()
	if installed {
		out.FrontDoor = &fd
		e.emit(&fd)
	}
	out.Isolation = &iso
	e.emit(&iso)
	if acc != nil {
		out.Access = acc
		e.emit(acc)
	}
	if installed {
		if req.Repair {
			ops := e.opsFor(loc, req.Target, req.Timeout)
			if err := e.repairProjects(ctx, ops); err != nil {
				return out, err
			}
			projects = ops.Prefetch(ctx, "")
		}
		if out.Projects, err = projects(); err != nil {
			return out, err
		}
		for i := range out.Projects {
			e.emit(&out.Projects[i])
		}
	}
	td, found, err := findTrusted(cands, req.Provider.Name(), req.Name, ps.Keys)
	switch {
	case err != nil:
		out.TokenProblem = err.Error()
	case td != nil:
		out.TokenDir, out.KeyID, out.KeyTrusted = td.Path, td.Manifest.KeyID, true
		if err := verifyTokens(td, ps.Keys, ps.Table, cfg.Spec.Tenants); err != nil {
			out.TokenProblem = err.Error()
		}
		if ps.Table == nil {
			// The command as it always read: no location, no token dir.
			bare := Target{Provider: req.Provider, Name: req.Name, actions: req.actions}
			e.logf(LevelWarn, "kiln-auth has no tenant table (a platform of an earlier kiln): a removed tenant's token is not refused and tokens are not bound to this platform; `%s` issues bound tokens", command(bare, "", "upgrade", FlagName(InputYes)))
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
	if req.Watch {
		e.emit(out)
		w := e.watcher(loc.Client)
		never := func(readiness.Result) bool { return false }
		_, err := w.Until(ctx, refs, never)
		if errors.Is(err, context.Canceled) || ctx.Err() != nil {
			cleanDeep(out)
			return out, nil // --watch ends with Ctrl-C: that is success
		}
		return out, err
	}
	cleanDeep(out)
	return out, nil
}

func listByCluster(name string) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: platform.LabelCluster + "=" + name + "," + platform.LabelManagedBy + "=kiln"}
}

// Versions words the platform's, this kiln's and the API server's
// versions in one line.
func (s *ClusterStatus) Versions() string {
	plat := "not recorded (installed before kiln recorded versions)"
	if s.PlatformVersion != "" {
		plat = fmt.Sprintf("kiln %s (schema %d)", s.PlatformVersion, s.PlatformSchema)
	}
	note := ""
	if platform.Newer(s.PlatformVersion, s.PlatformSchema, s.KilnVersion) {
		note = "; the platform is newer than this kiln, which will not change it"
	}
	return fmt.Sprintf("platform %s, this kiln %s (schema %d), Kubernetes %s%s", plat, s.KilnVersion, s.KilnSchema, s.KubernetesVersion, note)
}

// partlyRemoved says what an unfinished destroy left of cluster t at
// location: what it removed already, its namespaces (kiln-system last),
// and the command that finishes it.
func partlyRemoved(ctx context.Context, cs kubernetes.Interface, t Target, location string, ps *platform.State) string {
	began := "a destroy began"
	if !ps.DestroyStarted.IsZero() {
		began += " at " + ps.DestroyStarted.UTC().Format(time.RFC3339)
	}
	left := "namespace " + platform.Namespace
	if ps.Terminating {
		left += " (terminating)"
	}
	if list, err := cs.CoreV1().Namespaces().List(ctx, listByCluster(t.Name)); err == nil {
		var tenants []string
		for _, ns := range list.Items {
			if ns.Name != platform.Namespace {
				tenants = append(tenants, ns.Name)
			}
		}
		sort.Strings(tenants)
		if len(tenants) > 0 {
			left = fmt.Sprintf("tenant namespace%s %s and %s", human.Plural(len(tenants)), strings.Join(tenants, ", "), left)
		}
	}
	var gone []string
	if ps.Config == nil {
		gone = append(gone, platform.ConfigMapName)
	}
	if len(ps.Keys) == 0 {
		gone = append(gone, platform.AuthName)
	}
	if len(gone) > 0 {
		began += fmt.Sprintf(" (removed %s)", strings.Join(gone, " and "))
	}
	return fmt.Sprintf("%s and did not finish; left: %s. Run `%s` again to finish it", began, left, command(t, location, "destroy"))
}

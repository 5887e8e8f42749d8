package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/project"
	"github.com/kilnctl/kiln/internal/human"
)

// WatchFunc receives each status Watch reads. It runs on Watch's goroutine:
// a slow WatchFunc delays the next read, it never loses a change (changes
// that arrive meanwhile are coalesced into one read).
type WatchFunc func(*ClusterStatus, error)

// maxIncremental is the most projects one pass re-reads one by one (eight
// requests each); a pass with more changed projects (the informers'
// initial adds, a bulk operation) re-reads everything (about 42 requests,
// whatever the number of projects).
const maxIncremental = 5

// Watch keeps a live view of one cluster for a frontend (the wizard's
// inspect screens, kiln inspect) until ctx ends. It finds the cluster once
// at the location t's provider targets (as Inspect does), then starts one
// informer per kind on the objects kiln labels for this cluster
// (namespaces, ConfigMaps, Deployments, Services, EndpointSlices —
// which carry their Service's labels —, Ingresses, Leases, Pods; Secrets
// are not cached, their changes show through the Deployment that mounts
// them) and calls fn with a fresh status after the first list and after
// every change they report. An idle cluster costs only the open watches:
// no polling, and never a rediscovery.
//
// The informers only say what changed; what fn is shown is read live.
// Each change is mapped to the project it belongs to (its tenant
// namespace and kiln.dev/project label, or the names of DESIGN.md §5:
// ConfigMap and Lease kiln-project-P, Deployment and Service P, Ingress
// kiln-system/T.P). A pass re-reads only the changed projects
// (project.Ops.Observe: eight LISTs each, whatever the number of
// projects) and patches them into a copy of the last status: a project
// whose spec is gone leaves it. A pass re-reads everything as Inspect
// does after discovery (the platform state, the platform objects, the
// projects with one LIST per kind) when a change is not a project's (a
// platform object, a namespace), when more than maxIncremental projects
// changed, when the last read failed, and when re-reading a project
// fails. Changes that arrive during a pass are coalesced into the next
// one. A read that fails is passed to fn (with the last status kept by
// the caller) and retried, in full, on the next change.
//
// Each pass logs (debug) what it re-read.
//
// Watch returns nil when ctx ends, or the discovery's error (the cluster
// is not there: failure.Input) before fn was ever called.
func (e *Engine) Watch(ctx context.Context, t Target, fn WatchFunc) error {
	ctx = e.traced(ctx)
	t = e.hinted(t)
	loc, cands, err := e.locate(ctx, t, false)
	if err != nil {
		return err
	}
	changed := make(chan struct{}, 1)
	kick := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	pend := &pending{projects: map[project.Ref]bool{}}
	stop := make(chan struct{})
	// One informer factory per kiln namespace (kiln's roles grant reading
	// only there, never cluster-wide), and the namespaces themselves.
	tweak := informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = platform.LabelManagedBy + "=kiln," + platform.LabelCluster + "=" + t.Name
	})
	namespaces := []string{platform.Namespace}
	if loc.State != nil && loc.State.Config != nil {
		for _, tn := range loc.State.Config.Spec.Tenants {
			namespaces = append(namespaces, platform.TenantNamespace(tn))
		}
	}
	clusterWide := informers.NewSharedInformerFactoryWithOptions(loc.Client, 0, tweak)
	factories := []informers.SharedInformerFactory{clusterWide}
	infs := []cache.SharedIndexInformer{clusterWide.Core().V1().Namespaces().Informer()}
	for _, ns := range namespaces {
		f := informers.NewSharedInformerFactoryWithOptions(loc.Client, 0, tweak, informers.WithNamespace(ns))
		factories = append(factories, f)
		infs = append(infs,
			f.Core().V1().ConfigMaps().Informer(),
			f.Core().V1().Services().Informer(),
			f.Core().V1().Pods().Informer(),
			f.Apps().V1().Deployments().Informer(),
			f.Discovery().V1().EndpointSlices().Informer(),
			f.Networking().V1().Ingresses().Informer(),
			f.Coordination().V1().Leases().Informer(),
		)
	}
	var synced []cache.InformerSynced
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { pend.add(obj); kick() },
		UpdateFunc: func(old, obj any) {
			pend.add(old) // a label or name changed: both owners
			pend.add(obj)
			kick()
		},
		DeleteFunc: func(obj any) { pend.add(obj); kick() },
	}
	for _, inf := range infs {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return fmt.Errorf("watch cluster %s: %w", t.Name, err)
		}
		synced = append(synced, inf.HasSynced)
	}
	for _, f := range factories {
		f.Start(stop)
	}
	var once sync.Once
	shutdown := func() {
		once.Do(func() {
			close(stop)
			for _, f := range factories {
				f.Shutdown()
			}
		})
	}
	defer shutdown()
	// last is the status of the last pass, nil after a failed one (the
	// next pass then reads everything).
	var last *ClusterStatus
	full := func(why string) {
		e.logf(LevelDebug, "inspector: full re-read (%s)", why)
		last = nil
		ps, err := platformState(ctx, loc)
		if ctx.Err() != nil {
			return // ended meanwhile: not a failed read
		}
		if err != nil {
			fn(nil, err)
			return
		}
		loc.State = ps
		st, err := e.statusAt(ctx, StatusRequest{Target: t}, loc, cands)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			last = st
		}
		fn(st, err)
	}
	pass := func() {
		all, refs, routes := pend.take()
		switch {
		case last == nil:
			full("no status read yet, or the last read failed")
		case all:
			full("a platform object or namespace changed")
		case len(refs) > maxIncremental:
			full(fmt.Sprintf("%d projects changed", len(refs)))
		case !last.Installed || loc.State.Config == nil:
			full("the platform is not installed")
		case len(refs) == 0:
			// A kick whose change an earlier pass took already.
		default:
			e.logf(LevelDebug, "inspector: re-read %d project%s (%s)", len(refs), human.Plural(len(refs)), refList(refs))
			st, err := e.patch(ctx, loc, t, last, refs, routes)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				e.logf(LevelDebug, "inspector: %v; reading everything instead", err)
				full("re-reading a project failed")
				return
			}
			last = st
			fn(st, nil)
		}
	}
	// The first status is read at once (the informers' initial lists run
	// meanwhile); their initial adds then cause one more read.
	pass()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil // ctx ended
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
			pass()
		}
	}
}

// patch returns a copy of last with the projects refs read again (a
// project that is gone left out), and, when routes changed and the front
// door is an ingress controller's (which reads the route Ingresses), the
// front door read again. last is not changed: a frontend may still be
// showing it.
func (e *Engine) patch(ctx context.Context, loc Location, t Target, last *ClusterStatus, refs []project.Ref, routes bool) (*ClusterStatus, error) {
	ops := e.opsFor(loc, t, 0)
	type read struct {
		st  *ProjectStatus
		ok  bool
		err error
	}
	reads := make([]read, len(refs))
	var wg sync.WaitGroup
	for i, r := range refs {
		wg.Go(func() {
			st, ok, err := ops.Observe(ctx, r)
			reads[i] = read{st, ok, err}
		})
	}
	var fd *FrontDoor
	cfg := loc.State.Config
	if routes && last.FrontDoor != nil && cfg.Spec.Gateway.Expose == config.ExposeIngress {
		wg.Go(func() {
			f := readFrontDoor(ctx, loc.Client, cfg, hintsFor(t, loc.Name))
			cleanDeep(&f)
			fd = &f
		})
	}
	wg.Wait()
	changed := map[project.Ref]bool{}
	out := *last
	out.Projects = make([]ProjectStatus, 0, len(last.Projects)+len(refs))
	for i, r := range refs {
		if err := reads[i].err; err != nil {
			return nil, fmt.Errorf("re-read project %s: %w", r, err)
		}
		changed[r] = true
		if reads[i].ok {
			cleanDeep(reads[i].st)
			out.Projects = append(out.Projects, *reads[i].st)
		}
	}
	for _, p := range last.Projects {
		if !changed[project.Ref{Tenant: p.Tenant, Project: p.Project}] {
			out.Projects = append(out.Projects, p)
		}
	}
	project.Sort(out.Projects) // List's order
	if fd != nil {
		out.FrontDoor = fd
	}
	return &out, nil
}

// pending is what the informers reported changed since the last pass.
type pending struct {
	mu sync.Mutex
	// all: something that is no project's changed (read everything).
	all      bool
	projects map[project.Ref]bool
	// routes: a route Ingress changed (an ingress front door reads them).
	routes bool
}

func (p *pending) add(obj any) {
	refs, ok := changedProjects(obj)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !ok {
		p.all = true
		return
	}
	for _, r := range refs {
		p.projects[r] = true
	}
	if _, ing := unwrapDeleted(obj).(*networkingv1.Ingress); ing {
		p.routes = true
	}
}

// take returns what changed and starts afresh: all, or the changed
// projects (sorted) and whether a route did.
func (p *pending) take() (all bool, refs []project.Ref, routes bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	all, routes = p.all, p.routes
	for r := range p.projects {
		refs = append(refs, r)
	}
	p.all, p.routes, p.projects = false, false, map[project.Ref]bool{}
	sort.Slice(refs, func(i, j int) bool { return refs[i].String() < refs[j].String() })
	return all, refs, routes
}

func unwrapDeleted(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

// changedProjects says which projects a change of obj may have changed
// the status of: the owner its tenant namespace and kiln.dev/project label
// name, and the one its name names by DESIGN.md §5's conventions (the
// status is read by name: a Deployment named P is P's whatever its
// labels). ok is false when obj is no project's (a platform object, a
// namespace, an object kiln cannot place): then everything is read.
func changedProjects(obj any) (refs []project.Ref, ok bool) {
	obj = unwrapDeleted(obj)
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, false
	}
	ns, name, labels := m.GetNamespace(), m.GetName(), m.GetLabels()
	add := func(tenant, p string) {
		if tenant != "" && p != "" {
			refs = append(refs, project.Ref{Tenant: tenant, Project: p})
		}
	}
	switch tenant, inTenant := strings.CutPrefix(ns, platform.TenantNamespace("")); {
	case ns == platform.Namespace:
		if _, isRoute := obj.(*networkingv1.Ingress); !isRoute {
			return nil, false // the gateway, kiln-config, kiln-auth, the lock
		}
		if t, p, dot := strings.Cut(name, "."); dot {
			add(t, p)
		}
		add(labels[platform.LabelTenant], labels[project.LabelProject])
	case inTenant && tenant != "":
		add(tenant, labels[project.LabelProject])
		switch obj.(type) {
		case *corev1.ConfigMap, *coordinationv1.Lease:
			if p, spec := strings.CutPrefix(name, project.SpecName("")); spec {
				add(tenant, p)
			}
		case *appsv1.Deployment, *corev1.Service:
			add(tenant, name)
		case *discoveryv1.EndpointSlice:
			add(tenant, labels[discoveryv1.LabelServiceName])
		}
	}
	return refs, len(refs) > 0
}

// refList names refs for a log line (the first few).
func refList(refs []project.Ref) string {
	var names []string
	for i, r := range refs {
		if i == 3 {
			names = append(names, fmt.Sprintf("and %d more", len(refs)-i))
			break
		}
		names = append(names, r.String())
	}
	return strings.Join(names, ", ")
}

// platformState reads the platform state at loc again (kiln-config and
// kiln-auth may have changed since discovery): three GETs.
func platformState(ctx context.Context, loc Location) (*platform.State, error) {
	ps, err := platform.Read(ctx, loc.Client)
	if err != nil {
		return nil, fmt.Errorf("read platform state in %s: %w", loc.Name, err)
	}
	return ps, nil
}

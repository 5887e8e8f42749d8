package engine

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/kilnctl/kiln/engine/platform"
)

// WatchFunc receives each status Watch reads. It runs on Watch's goroutine:
// a slow WatchFunc delays the next read, it never loses a change (changes
// that arrive meanwhile are coalesced into one read).
type WatchFunc func(*ClusterStatus, error)

// Watch keeps a live view of one cluster for a frontend (the wizard's
// inspect screens, kiln inspect) until ctx ends. It finds the cluster once
// at the location t's provider targets (as Inspect does), then starts one
// informer per kind on the objects kiln labels for this cluster
// (namespaces, ConfigMaps, Deployments, Services, EndpointSlices —
// which carry their Service's labels —, Ingresses, Leases, Pods; Secrets
// are not cached, their changes show through the Deployment that mounts
// them) and calls fn with a fresh status after the first list and after
// every change they report. An idle cluster costs only the open watches:
// no polling, and never a rediscovery. A read is the same as Inspect's
// after discovery (the platform state, the platform objects, the projects
// with one LIST per kind); changes that arrive during a read are coalesced
// into one more read. A read that fails is passed to fn (with the last
// status kept by the caller) and retried on the next change.
//
// Watch returns nil when ctx ends, or the discovery's error (the cluster
// is not there: exit 2) before fn was ever called.
func (e *Engine) Watch(ctx context.Context, t Target, fn WatchFunc) error {
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
		AddFunc:    func(any) { kick() },
		UpdateFunc: func(any, any) { kick() },
		DeleteFunc: func(any) { kick() },
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
	// The first status is read at once (the informers' initial lists run
	// meanwhile); their initial adds then cause one more read.
	read := func() {
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
		fn(st, err)
	}
	read()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil // ctx ended
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
			read()
		}
	}
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

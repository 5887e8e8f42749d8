package readiness

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kilnctl/kiln/internal/human"
)

// Shared feeds the waits of a batch (kiln project start --all) from one
// informer per namespace and kind — Deployments, Services, EndpointSlices
// and Ingresses — instead of a list and watches per waited object. The
// informers of a namespace start on its first wait and run until Close.
//
// The cache only says when to look: a wait whose goal the cache shows
// reached (or an object the cache shows Failed) is confirmed with one
// Compute against the API server before it returns, so what a wait
// reports is always the live object, never a cached copy.
type Shared struct {
	Client kubernetes.Interface
	// IngressSelector, when set, is the label selector of the Ingress
	// informers: one informer on kiln-system holds the routes of a batch,
	// not every Ingress there.
	IngressSelector string

	mu     sync.Mutex
	ns     map[string]*nsCache
	stop   chan struct{}
	closed bool
}

// sharedKinds are the kinds a Shared answers; other kinds are followed
// one by one as without it.
var sharedKinds = map[string]bool{KindDeployment: true, KindService: true, KindIngress: true}

const indexService = "service"

type nsCache struct {
	synced chan struct{}
	err    error

	deps, svcs, slices, ings cache.SharedIndexInformer

	mu sync.Mutex
	// changed is closed on every event of the namespace; byName[n] on
	// every event of the objects named n (Deployment, Service, Ingress n,
	// and the EndpointSlices of Service n), so a wait wakes only for what
	// can change its object's status, not for every project's events.
	changed chan struct{}
	byName  map[string]chan struct{}
}

// NewShared returns an empty Shared on cs; Close stops its informers.
func NewShared(cs kubernetes.Interface) *Shared {
	return &Shared{Client: cs, ns: map[string]*nsCache{}, stop: make(chan struct{})}
}

// Close stops every informer.
func (s *Shared) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.stop)
	}
}

func informer[L runtime.Object](ctx context.Context, obj runtime.Object, list func(context.Context, metav1.ListOptions) (L, error), w func(context.Context, metav1.ListOptions) (watch.Interface, error), idx cache.Indexers) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListFunc:  func(o metav1.ListOptions) (runtime.Object, error) { return list(ctx, o) },
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) { return w(ctx, o) },
	}
	if idx == nil {
		idx = cache.Indexers{}
	}
	return cache.NewSharedIndexInformer(listThenWatch{lw}, obj, 0, idx)
}

// listThenWatch makes a reflector list and then watch, never use a
// watch-list (client-go's WatchListClient: one watch with
// sendInitialEvents instead of the list). client-go v0.37.2 sends a
// watch-list the server ends with 410 Expired again at once, with no
// backoff: against a server that answers every watch so (a relist storm)
// each informer made about 500 watches a second and starved the run's own
// requests in the client's rate limiter
// (TestCommandsCompleteUnderHostileAnswers). The list-then-watch path
// backs off between relists. kiln's informers hold one namespace's few
// objects, so the watch-list's memory saving does not matter here.
type listThenWatch struct{ *cache.ListWatch }

// IsWatchListSemanticsUnSupported tells client-go's reflector not to use
// a watch-list (watchlist.DoesClientNotSupportWatchListSemantics).
func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

// namespace returns ns's cache, starting its informers on first use and
// waiting until they have listed.
func (s *Shared) namespace(ctx context.Context, ns string) (*nsCache, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("readiness: shared cache closed")
	}
	c, ok := s.ns[ns]
	if !ok {
		c = &nsCache{synced: make(chan struct{}), changed: make(chan struct{}), byName: map[string]chan struct{}{}}
		s.ns[ns] = c
		go c.start(s.Client, ns, s.IngressSelector, s.stop)
	}
	s.mu.Unlock()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.synced:
	}
	return c, c.err
}

func (c *nsCache) start(cs kubernetes.Interface, ns, ingressSelector string, stop chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-stop
		cancel()
	}()
	d := cs.AppsV1().Deployments(ns)
	sv := cs.CoreV1().Services(ns)
	sl := cs.DiscoveryV1().EndpointSlices(ns)
	in := cs.NetworkingV1().Ingresses(ns)
	c.deps = informer(ctx, &appsv1.Deployment{}, d.List, d.Watch, nil)
	c.svcs = informer(ctx, &corev1.Service{}, sv.List, sv.Watch, nil)
	c.slices = informer(ctx, &discoveryv1.EndpointSlice{}, sl.List, sl.Watch, cache.Indexers{indexService: func(obj any) ([]string, error) {
		if es, ok := obj.(*discoveryv1.EndpointSlice); ok {
			if n := es.Labels[discoveryv1.LabelServiceName]; n != "" {
				return []string{n}, nil
			}
		}
		return nil, nil
	}})
	withSelector := func(o metav1.ListOptions) metav1.ListOptions {
		o.LabelSelector = ingressSelector
		return o
	}
	c.ings = informer(ctx, &networkingv1.Ingress{},
		func(ctx context.Context, o metav1.ListOptions) (*networkingv1.IngressList, error) {
			return in.List(ctx, withSelector(o))
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return in.Watch(ctx, withSelector(o))
		},
		nil)
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.bump(obj) },
		UpdateFunc: func(_, obj any) { c.bump(obj) },
		DeleteFunc: func(obj any) { c.bump(obj) },
	}
	all := []cache.SharedIndexInformer{c.deps, c.svcs, c.slices, c.ings}
	var syncs []cache.InformerSynced
	for _, i := range all {
		if _, err := i.AddEventHandler(h); err != nil {
			c.err = err
			close(c.synced)
			return
		}
		go i.Run(stop)
		syncs = append(syncs, i.HasSynced)
	}
	if !cache.WaitForCacheSync(stop, syncs...) {
		c.err = fmt.Errorf("readiness: informers of namespace %s stopped before they listed", ns)
	}
	close(c.synced)
}

// bump wakes the waits that obj's event concerns: those on its name (an
// EndpointSlice's: its Service's), and those on the whole namespace. An
// object of unknown name (a deletion seen only as a tombstone) wakes all.
func (c *nsCache) bump(obj any) {
	name, known := "", true
	switch o := obj.(type) {
	case *discoveryv1.EndpointSlice:
		name = o.Labels[discoveryv1.LabelServiceName]
	case metav1.Object:
		name = o.GetName()
	default:
		known = false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.changed)
	c.changed = make(chan struct{})
	if !known {
		for n, ch := range c.byName {
			close(ch)
			delete(c.byName, n)
		}
		return
	}
	if ch, ok := c.byName[name]; ok {
		close(ch)
		delete(c.byName, name)
	}
}

// signal returns a channel closed on the next event concerning name, or
// any event of the namespace for name "".
func (c *nsCache) signal(name string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if name == "" {
		return c.changed
	}
	ch, ok := c.byName[name]
	if !ok {
		ch = make(chan struct{})
		c.byName[name] = ch
	}
	return ch
}

// wake returns a channel closed on the next event that can change ref's
// status: of its own name, and for an Ingress of each backend's name (a
// route's kiln-gateway) and of its upstream Service in that Service's
// namespace (up, nil when it names none). A route wait so wakes for its
// project and the gateway, not for every other route of the batch.
func (c *nsCache) wake(ref Ref, up *nsCache, upName string, done <-chan struct{}) <-chan struct{} {
	chs := []<-chan struct{}{c.signal(ref.Name)}
	if ref.Kind == KindIngress {
		if ing := cached[networkingv1.Ingress](c.ings, ref.Namespace, ref.Name); ing != nil {
			for _, b := range IngressBackends(ing) {
				if b != ref.Name {
					chs = append(chs, c.signal(b))
				}
			}
		}
		if up != nil {
			chs = append(chs, up.signal(upName))
		}
	}
	if len(chs) == 1 {
		return chs[0]
	}
	out := make(chan struct{})
	var once sync.Once
	for _, ch := range chs {
		go func() {
			select {
			case <-ch:
				once.Do(func() { close(out) })
			case <-out:
			case <-done:
			}
		}()
	}
	return out
}

func cached[T any](i cache.SharedIndexInformer, ns, name string) *T {
	obj, ok, err := i.GetIndexer().GetByKey(ns + "/" + name)
	if err != nil || !ok {
		return nil
	}
	t, _ := obj.(*T)
	return t
}

// judge is ref's status as the cache has it; up is the cache of an
// Ingress's upstream namespace (nil: it names no upstream, or the cache
// is not started yet, judged InProgress).
func (c *nsCache) judge(ref Ref, up *nsCache) Result {
	var obj runtime.Object
	switch ref.Kind {
	case KindDeployment:
		if d := cached[appsv1.Deployment](c.deps, ref.Namespace, ref.Name); d != nil {
			obj = d
		}
	case KindService:
		if s := cached[corev1.Service](c.svcs, ref.Namespace, ref.Name); s != nil {
			obj = s
		}
	case KindIngress:
		if i := cached[networkingv1.Ingress](c.ings, ref.Namespace, ref.Name); i != nil {
			obj = i
		}
	}
	if obj == nil {
		return Result{NotFound, "not found"}
	}
	res, err := Judge(ref.Kind, obj)
	if err != nil {
		return Result{Failed, err.Error()}
	}
	if res.Status != Current {
		return res
	}
	switch o := obj.(type) {
	case *corev1.Service:
		return c.service(o)
	case *networkingv1.Ingress:
		backends := IngressBackends(o)
		if len(backends) == 0 {
			return Result{Failed, "no backend services"}
		}
		for _, name := range backends {
			svc := cached[corev1.Service](c.svcs, o.Namespace, name)
			if svc == nil {
				return Result{InProgress, "backend svc/" + name + " missing"}
			}
			if r := c.service(svc); r.Status != Current {
				return Result{InProgress, "backend svc/" + name + " has " + r.Message}
			}
		}
		if ns, name, ok := Upstream(o); ok {
			if up == nil {
				return Result{InProgress, "upstream svc/" + ns + "/" + name + " not read yet"}
			}
			svc := cached[corev1.Service](up.svcs, ns, name)
			if svc == nil {
				return Result{InProgress, "upstream svc/" + ns + "/" + name + " missing"}
			}
			if r := up.service(svc); r.Status != Current {
				return Result{InProgress, "upstream svc/" + ns + "/" + name + " has " + r.Message}
			}
		}
		// The message (backends, address) comes from the confirming
		// Compute; the cache only says the goal looks reached.
		return Result{Current, fmt.Sprintf("%d backend%s ready", len(backends), human.Plural(len(backends)))}
	}
	return res
}

func (c *nsCache) service(svc *corev1.Service) Result {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return Result{Current, "external name"}
	}
	objs, err := c.slices.GetIndexer().ByIndex(indexService, svc.Name)
	if err != nil {
		return Result{InProgress, err.Error()}
	}
	slices := make([]discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		if es, ok := o.(*discoveryv1.EndpointSlice); ok {
			slices = append(slices, *es)
		}
	}
	n := countReady(slices)
	if n == 0 {
		return Result{InProgress, "no ready endpoints"}
	}
	return Result{Current, fmt.Sprintf("%d ready endpoint%s", n, human.Plural(n))}
}

// Absent says whether the cache, listed and watched, holds no object ref
// (ok is false when the Shared does not follow ref's kind). A caller may
// create such an object without reading it first; the cache can lag, so
// the write must be one that is right whether or not the object exists (a
// server-side apply).
func (s *Shared) Absent(ctx context.Context, ref Ref) (absent, ok bool) {
	if s == nil || !sharedKinds[ref.Kind] {
		return false, false
	}
	c, err := s.namespace(ctx, ref.Namespace)
	if err != nil {
		return false, false
	}
	return c.judge(ref, nil).Status == NotFound, true
}

// upstream is the cache of the namespace of the upstream Service that ref
// (an Ingress, as c holds it) names, started on first use, and that
// Service's name; nil when ref names none.
func (s *Shared) upstream(ctx context.Context, c *nsCache, ref Ref) (*nsCache, string, error) {
	if ref.Kind != KindIngress {
		return nil, "", nil
	}
	ing := cached[networkingv1.Ingress](c.ings, ref.Namespace, ref.Name)
	if ing == nil {
		return nil, "", nil
	}
	ns, name, ok := Upstream(ing)
	if !ok {
		return nil, "", nil
	}
	up, err := s.namespace(ctx, ns)
	return up, name, err
}

// followShared is follow for a kind the Shared answers: judged from the
// cache on every change in the namespace, and confirmed from the API
// when the cache says the goal is reached or the object failed.
func (w *Watcher) followShared(ctx context.Context, ref Ref, goal Goal, record func(Result)) error {
	c, err := w.Shared.namespace(ctx, ref.Namespace)
	if err != nil {
		return fmt.Errorf("%s: %w", ref, err)
	}
	report := w.reportChanges(ref, record)
	var lastErr error
	backoff := 100 * time.Millisecond
	done := make(chan struct{})
	defer close(done)
	for {
		up, upName, err := w.Shared.upstream(ctx, c, ref)
		if err != nil {
			return fmt.Errorf("%s: %w", ref, err)
		}
		ch := c.wake(ref, up, upName, done) // before judging, so no change between is missed
		var retry *time.Timer
		r := c.judge(ref, up)
		if !goal(r) && r.Status != Failed {
			report(r)
		} else {
			live, err := Compute(ctx, w.Client, ref)
			switch {
			case err != nil && permanent(err):
				return fmt.Errorf("%s: %w", ref, err)
			case err != nil:
				lastErr = err
				retry = time.NewTimer(backoff)
				backoff = nextBackoff(backoff)
			default:
				backoff = 100 * time.Millisecond
				report(live)
				if goal(live) {
					return nil
				}
				if live.Status == Failed {
					return fmt.Errorf("%s failed: %s", ref, live.Message)
				}
				// The cache is behind the API: its next event comes.
			}
		}
		var tick <-chan time.Time
		if retry != nil {
			tick = retry.C
		}
		select {
		case <-ctx.Done():
			return waitEnded(ctx, lastErr)
		case <-ch:
		case <-tick:
		}
		if retry != nil {
			retry.Stop()
		}
	}
}

package readiness

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kilnctl/kiln/engine/failure"
)

// Goal says when an object is where the caller wants it.
type Goal func(Result) bool

// Ready is the goal of provisioning.
func Ready(r Result) bool { return r.Status == Current }

// Gone is the goal of deprovisioning: the object no longer exists.
func Gone(r Result) bool { return r.Status == NotFound }

// Watcher follows objects until they reach a goal, reporting each status
// change through OnChange.
type Watcher struct {
	Client kubernetes.Interface
	// OnChange is called (serialized) with the first status seen for each
	// object and then on every change of status or message.
	OnChange func(Ref, Result)
	// Shared, when set, answers the kinds it follows from its informers
	// (one per namespace and kind for every wait of a batch) instead of
	// a list and watches per object; see Shared.
	Shared *Shared

	mu sync.Mutex
}

// Until blocks until every ref satisfies goal, the context ends, or the
// object Failed (for the Ready goal). It returns the last result of each ref.
// When ctx's deadline passes, the error is a failure.Timeout naming every
// object that is not there yet.
func (w *Watcher) Until(ctx context.Context, refs []Ref, goal Goal) (map[Ref]Result, error) {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(map[Ref]Result, len(refs))
	var mu sync.Mutex
	errs := make(chan error, len(refs))
	for _, ref := range refs {
		go func() {
			record := func(r Result) {
				mu.Lock()
				results[ref] = r
				mu.Unlock()
			}
			if w.Shared != nil && sharedKinds[ref.Kind] {
				errs <- w.followShared(ctx, ref, goal, record)
				return
			}
			errs <- w.follow(ctx, ref, goal, record)
		}()
	}
	var first error
	for range refs {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel() // one failure ends the wait for the others
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if first == nil {
		return results, nil
	}
	if errors.Is(first, context.DeadlineExceeded) || errors.Is(first, context.Canceled) {
		var pending []string
		for _, ref := range refs {
			if r, ok := results[ref]; !ok || !goal(r) {
				msg := "no status yet"
				if ok {
					msg = string(r.Status) + ": " + r.Message
				}
				pending = append(pending, fmt.Sprintf("%s (%s)", ref, msg))
			}
		}
		sort.Strings(pending)
		what := "not reached: " + strings.Join(pending, "; ")
		if errors.Is(first, context.DeadlineExceeded) {
			return results, failure.Deadline("timed out waiting; %s", what)
		}
		// Report why the caller's context ended (a lost lock, say), not
		// just "context canceled", which reads as a user interrupt.
		cause := context.Cause(parent)
		if cause == nil {
			cause = first
		}
		return results, fmt.Errorf("wait interrupted; %s: %w", what, cause)
	}
	return results, first
}

// follow watches the sources that can change ref's status and recomputes
// the status on each event. An object already at the goal needs no watch:
// one read says so (most of a platform is, when kiln waits for it or
// confirms it gone), where lists and watches of its sources would cost
// three requests or more. Otherwise that read's answer is not reported:
// the watches' first list computes and reports the status again.
func (w *Watcher) follow(ctx context.Context, ref Ref, goal Goal, record func(Result)) error {
	report := w.reportChanges(ref, record)
	if r, err := Compute(ctx, w.Client, ref); err == nil && goal(r) {
		report(r)
		return nil
	}
	kick := make(chan struct{}, 1)
	notify := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	srcs := sources(w.Client, ref)
	if ref.Kind == KindIngress {
		srcs = append(srcs, upstreamSources(ctx, w.Client, ref)...)
	}
	if len(srcs) == 0 {
		return fmt.Errorf("readiness: unsupported kind %q of %s", ref.Kind, ref)
	}
	for _, s := range srcs {
		go s.run(ctx, notify)
	}
	var lastErr error
	backoff := 100 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return waitEnded(ctx, lastErr)
		case <-kick:
		}
		r, err := Compute(ctx, w.Client, ref)
		if err != nil && permanent(err) {
			// Waiting cannot fix a missing permission or a rejected
			// request: fail now, naming it, instead of timing out.
			return fmt.Errorf("%s: %w", ref, err)
		}
		if err != nil {
			lastErr = err
			// The event that kicked this may have been the last one (a
			// rolled-out Deployment goes quiet), so retry an API error
			// on a backoff rather than wait for an event that never comes.
			time.AfterFunc(backoff, notify)
			backoff = nextBackoff(backoff)
			continue
		}
		backoff = 100 * time.Millisecond
		report(r)
		if goal(r) {
			return nil
		}
		if r.Status == Failed && !goal(r) {
			return fmt.Errorf("%s failed: %s", ref, r.Message)
		}
	}
}

// source is one list+watch stream whose events may change a status.
type source struct {
	list  func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watch func(context.Context, metav1.ListOptions) (watch.Interface, error)
	opts  metav1.ListOptions
}

// run lists (to learn the resourceVersion), then watches from there. A
// watch that ends (a cut stream, a server's timeout) resumes from the last
// resourceVersion it delivered, so no event between is missed and nothing
// is listed again; only when that version has expired (410 Gone) does it
// list afresh. Every list and every event kicks.
func (s source) run(ctx context.Context, kick func()) {
	backoff := 100 * time.Millisecond
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			list, err := s.list(ctx, s.opts)
			if err != nil {
				if !retryWait(ctx, &backoff) {
					return
				}
				continue
			}
			lm, err := meta.ListAccessor(list)
			if err != nil {
				return
			}
			rv = lm.GetResourceVersion()
			kick()
		}
		opts := s.opts
		opts.ResourceVersion = rv
		opts.AllowWatchBookmarks = true
		wi, err := s.watch(ctx, opts)
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				rv = ""
			}
			if !retryWait(ctx, &backoff) {
				return
			}
			continue
		}
		next, delivered, expired := drain(ctx, wi, rv, kick)
		rv = next
		if expired {
			rv = "" // relist
		}
		if delivered {
			backoff = 100 * time.Millisecond
		} else if !retryWait(ctx, &backoff) {
			// A stream that ends before delivering anything is a failed
			// watch, not a quiet one: back off before the next. That
			// includes one the server ends at once with 410 Expired: a
			// server that does so to every watch (a relist storm) would
			// otherwise be listed and watched in a loop as fast as the
			// client's rate limit lets it, starving the run's own
			// requests behind it.
			return
		}
	}
}

// drain kicks on every event until the stream ends, and returns the last
// resourceVersion it saw, whether it saw any event, and whether the server
// said the version has expired.
func drain(ctx context.Context, wi watch.Interface, rv string, kick func()) (last string, delivered, expired bool) {
	defer wi.Stop()
	last = rv
	for {
		select {
		case <-ctx.Done():
			return last, delivered, false
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return last, delivered, false
			}
			if ev.Type == watch.Error {
				err := apierrors.FromObject(ev.Object)
				return last, delivered, apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
			}
			delivered = true
			if m, err := meta.Accessor(ev.Object); err == nil && m.GetResourceVersion() != "" {
				last = m.GetResourceVersion()
			}
			if ev.Type != watch.Bookmark {
				kick()
			}
		}
	}
}

// retryWait backs off after a failed list or watch call (an API error, not
// a readiness poll), doubling up to 2s.
func retryWait(ctx context.Context, backoff *time.Duration) bool {
	t := time.NewTimer(*backoff)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	*backoff = nextBackoff(*backoff)
	return true
}

// nextBackoff doubles an API retry's backoff, up to 2s.
func nextBackoff(d time.Duration) time.Duration {
	if d < 2*time.Second {
		return d * 2
	}
	return d
}

// reportChanges returns the function a follow reports each computed status
// to: it records a status, and tells OnChange, only when it differs from
// the last one.
func (w *Watcher) reportChanges(ref Ref, record func(Result)) func(Result) {
	var last *Result
	return func(r Result) {
		if last != nil && *last == r {
			return
		}
		last = &r
		record(r)
		if w.OnChange != nil {
			w.mu.Lock()
			w.OnChange(ref, r)
			w.mu.Unlock()
		}
	}
}

// waitEnded is the error of a wait whose ctx ended, with the last API
// error it retried, if any, so a timeout says what kept failing.
func waitEnded(ctx context.Context, lastErr error) error {
	if lastErr != nil {
		return fmt.Errorf("%w (last error: %v)", ctx.Err(), lastErr)
	}
	return ctx.Err()
}

func byName(name string) metav1.ListOptions {
	return metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}
}

// newSource adapts a typed client's List and Watch.
func newSource[L runtime.Object](list func(context.Context, metav1.ListOptions) (L, error), w func(context.Context, metav1.ListOptions) (watch.Interface, error), opts metav1.ListOptions) source {
	return source{
		list:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return list(ctx, o) },
		watch: w,
		opts:  opts,
	}
}

// sources returns the streams that can change ref's status: the object
// itself, plus EndpointSlices for a Service, plus Services and
// EndpointSlices of the namespace for an Ingress.
func sources(cs kubernetes.Interface, ref Ref) []source {
	ns, self := ref.Namespace, byName(ref.Name)
	slices := cs.DiscoveryV1().EndpointSlices(ns)
	services := cs.CoreV1().Services(ns)
	switch ref.Kind {
	case KindNamespace:
		c := cs.CoreV1().Namespaces()
		return []source{newSource(c.List, c.Watch, self)}
	case KindConfigMap:
		c := cs.CoreV1().ConfigMaps(ns)
		return []source{newSource(c.List, c.Watch, self)}
	case KindSecret:
		c := cs.CoreV1().Secrets(ns)
		return []source{newSource(c.List, c.Watch, self)}
	case KindLease:
		c := cs.CoordinationV1().Leases(ns)
		return []source{newSource(c.List, c.Watch, self)}
	case KindServiceAcc:
		c := cs.CoreV1().ServiceAccounts(ns)
		return []source{newSource(c.List, c.Watch, self)}
	case KindNetworkPolicy:
		c := cs.NetworkingV1().NetworkPolicies(ns)
		return []source{newSource(c.List, c.Watch, self)}
	case KindDeployment:
		c := cs.AppsV1().Deployments(ns)
		return []source{newSource(c.List, c.Watch, self)}
	case KindService:
		return []source{
			newSource(services.List, services.Watch, self),
			newSource(slices.List, slices.Watch, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + ref.Name}),
		}
	case KindIngress:
		c := cs.NetworkingV1().Ingresses(ns)
		return []source{
			newSource(c.List, c.Watch, self),
			newSource(services.List, services.Watch, metav1.ListOptions{}),
			newSource(slices.List, slices.Watch, metav1.ListOptions{}),
		}
	}
	return nil
}

// upstreamSources are the streams of the Service an Ingress's
// AnnotationUpstream names (that Service and its EndpointSlices), read
// from the Ingress as it is when the wait starts: kiln applies a route
// before waiting on it. An Ingress absent then, or naming no upstream,
// adds none.
func upstreamSources(ctx context.Context, cs kubernetes.Interface, ref Ref) []source {
	ing, err := cs.NetworkingV1().Ingresses(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	ns, name, ok := Upstream(ing)
	if !ok {
		return nil
	}
	services := cs.CoreV1().Services(ns)
	slices := cs.DiscoveryV1().EndpointSlices(ns)
	return []source{
		newSource(services.List, services.Watch, byName(name)),
		newSource(slices.List, slices.Watch, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name}),
	}
}

// permanent says whether an API error will come back however often the
// request is repeated.
func permanent(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsInvalid(err) || apierrors.IsMethodNotSupported(err) || apierrors.IsNotAcceptable(err)
}

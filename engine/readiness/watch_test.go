package readiness

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/failure"
)

// recorder collects OnChange calls per object and lets a test wait for one.
type recorder struct {
	mu      sync.Mutex
	seen    map[Ref][]Result
	changed chan struct{}
}

func newRecorder() *recorder {
	return &recorder{seen: map[Ref][]Result{}, changed: make(chan struct{}, 1)}
}

func (r *recorder) onChange(ref Ref, res Result) {
	r.mu.Lock()
	r.seen[ref] = append(r.seen[ref], res)
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) results(ref Ref) []Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Result(nil), r.seen[ref]...)
}

// waitSeen blocks until every ref has reported a result matching cond.
func (r *recorder) waitSeen(t *testing.T, ctx context.Context, cond func(Result) bool, refs ...Ref) {
	t.Helper()
	for {
		all := true
		for _, ref := range refs {
			found := false
			for _, res := range r.results(ref) {
				found = found || cond(res)
			}
			all = all && found
		}
		if all {
			return
		}
		select {
		case <-r.changed:
		case <-ctx.Done():
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("never reported: %v (seen %v)", ctx.Err(), r.seen)
		}
	}
}

type untilResult struct {
	res map[Ref]Result
	err error
}

// startUntil runs w.Until in a goroutine.
func startUntil(ctx context.Context, w *Watcher, refs []Ref, goal Goal) <-chan untilResult {
	done := make(chan untilResult, 1)
	go func() {
		res, err := w.Until(ctx, refs, goal)
		done <- untilResult{res, err}
	}()
	return done
}

func await(t *testing.T, ctx context.Context, done <-chan untilResult) untilResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-ctx.Done():
		t.Fatalf("Until did not return: %v", ctx.Err())
		return untilResult{}
	}
}

func is(status event.Status) func(Result) bool {
	return func(r Result) bool { return r.Status == status }
}

func checkSequence(t *testing.T, ref Ref, seq []Result, final Result) {
	t.Helper()
	if len(seq) < 2 {
		t.Fatalf("%s: OnChange reported %v, want a change from not ready to ready", ref, seq)
	}
	if seq[0].Status == Current {
		t.Errorf("%s: first result %+v, want not Current", ref, seq[0])
	}
	if seq[len(seq)-1] != final {
		t.Errorf("%s: last result %+v, want %+v", ref, seq[len(seq)-1], final)
	}
	for i := 1; i < len(seq); i++ {
		if seq[i] == seq[i-1] {
			t.Errorf("%s: result %d repeats %+v (sequence %v)", ref, i, seq[i], seq)
		}
	}
}

func TestUntilReadyReportsEveryChange(t *testing.T) {
	ctx := testCtx(t)
	ns := cluster.Namespace(t)
	cs := cluster.Client
	dep := Ref{Kind: KindDeployment, Namespace: ns, Name: "web"}
	svc := Ref{Kind: KindService, Namespace: ns, Name: "web"}
	rec := newRecorder()
	w := &Watcher{Client: cs, OnChange: rec.onChange}

	done := startUntil(ctx, w, []Ref{dep, svc}, Ready)
	// The watch is running before anything exists.
	rec.waitSeen(t, ctx, is(NotFound), dep, svc)
	must[*appsv1.Deployment](t)(cs.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "web", 1), metav1.CreateOptions{}))
	must[*corev1.Service](t)(cs.CoreV1().Services(ns).Create(ctx, service(ns, "web", "web"), metav1.CreateOptions{}))

	r := await(t, ctx, done)
	if r.err != nil {
		t.Fatalf("Until: %v", r.err)
	}
	want := map[Ref]Result{dep: {Current, "1/1 replicas available"}, svc: {Current, "1 ready endpoint"}}
	for ref, res := range want {
		if r.res[ref] != res {
			t.Errorf("Until result for %s = %+v, want %+v", ref, r.res[ref], res)
		}
		checkSequence(t, ref, rec.results(ref), res)
	}
	// Deployment progress is reported in the human form.
	for _, res := range rec.results(dep) {
		if res.Status == InProgress && res.Message != "0/1 replicas available" {
			t.Errorf("deployment progress message %q, want 0/1 replicas available", res.Message)
		}
	}
}

func TestUntilReadyAlreadyReadyReturnsAtOnce(t *testing.T) {
	ctx := testCtx(t)
	ns := cluster.Namespace(t)
	ref := Ref{Kind: KindNamespace, Name: ns}
	rec := newRecorder()
	res, err := (&Watcher{Client: cluster.Client, OnChange: rec.onChange}).Until(ctx, []Ref{ref}, Ready)
	if err != nil {
		t.Fatal(err)
	}
	if res[ref].Status != Current {
		t.Errorf("result = %+v, want Current", res[ref])
	}
	if seq := rec.results(ref); len(seq) != 1 || seq[0] != res[ref] {
		t.Errorf("OnChange reported %v, want exactly the one status %+v", seq, res[ref])
	}
}

func TestUntilGone(t *testing.T) {
	ctx := testCtx(t)
	ns := cluster.Namespace(t)
	cs := cluster.Client
	cm := Ref{Kind: KindConfigMap, Namespace: ns, Name: "cfg"}
	dep := Ref{Kind: KindDeployment, Namespace: ns, Name: "web"}
	held := Ref{Kind: KindDeployment, Namespace: ns, Name: "held"}
	must[*corev1.ConfigMap](t)(cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}}, metav1.CreateOptions{}))
	must[*appsv1.Deployment](t)(cs.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "web", 1), metav1.CreateOptions{}))
	withFinalizer := deployment(ns, "held", 1, func(d *appsv1.Deployment) { d.Finalizers = []string{testFinalizer} })
	must[*appsv1.Deployment](t)(cs.AppsV1().Deployments(ns).Create(ctx, withFinalizer, metav1.CreateOptions{}))
	t.Cleanup(func() { dropFinalizer(t, cs, ns, "held") })

	rec := newRecorder()
	done := startUntil(ctx, &Watcher{Client: cs, OnChange: rec.onChange}, []Ref{cm, dep, held}, Gone)
	present := func(r Result) bool { return r.Status != NotFound }
	rec.waitSeen(t, ctx, present, cm, dep, held)

	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "cfg", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web", "held"} {
		if err := cs.AppsV1().Deployments(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The finalizer keeps "held" Terminating; Until must not return yet.
	rec.waitSeen(t, ctx, is(Terminating), held)
	select {
	case r := <-done:
		t.Fatalf("Until returned while held is Terminating: %v, %v", r.res, r.err)
	default:
	}
	dropFinalizer(t, cs, ns, "held")

	r := await(t, ctx, done)
	if r.err != nil {
		t.Fatalf("Until Gone: %v", r.err)
	}
	for _, ref := range []Ref{cm, dep, held} {
		if r.res[ref].Status != NotFound {
			t.Errorf("%s: %+v, want NotFound", ref, r.res[ref])
		}
		seq := rec.results(ref)
		if seq[0].Status == NotFound || seq[len(seq)-1].Status != NotFound {
			t.Errorf("%s: sequence %v, want present first and NotFound last", ref, seq)
		}
	}
	if seq := rec.results(held); len(seq) < 3 || seq[len(seq)-2] != (Result{Terminating, "being deleted"}) {
		t.Errorf("held: sequence %v, want ... Terminating, NotFound", seq)
	}
}

func TestUntilTimeoutNamesWhatIsPending(t *testing.T) {
	ctx := testCtx(t)
	ns := cluster.Namespace(t)
	cs := cluster.Client
	stuck := Ref{Kind: KindDeployment, Namespace: ns, Name: "stuck"}
	cm := Ref{Kind: KindConfigMap, Namespace: ns, Name: "cfg"}
	must[*corev1.ConfigMap](t)(cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}}, metav1.CreateOptions{}))
	must[*appsv1.Deployment](t)(cs.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "stuck", 1, unschedulable), metav1.CreateOptions{}))
	// Let the controller report the pending pod, so the last status is
	// the one a user would see.
	waitFor(t, ctx, stuck, func(Result) bool {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "stuck", metav1.GetOptions{})
		return err == nil && d.Status.Replicas == 1
	})

	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	res, err := (&Watcher{Client: cs}).Until(wctx, []Ref{stuck, cm}, Ready)
	if err == nil {
		t.Fatal("Until succeeded on a deployment whose pods cannot schedule")
	}
	if code := failure.Of(err); code != failure.Timeout {
		t.Errorf("exit code = %d, want %v: %v", code, failure.Timeout, err)
	}
	msg := err.Error()
	if want := "deployment/" + ns + "/stuck (InProgress: 0/1 replicas available)"; !strings.Contains(msg, want) {
		t.Errorf("error %q does not name %q", msg, want)
	}
	if strings.Contains(msg, "configmap/") {
		t.Errorf("error %q names the ready configmap", msg)
	}
	if res[cm].Status != Current || res[stuck].Status != InProgress {
		t.Errorf("results = %v, want configmap Current and deployment InProgress", res)
	}
}

func TestUntilCancelledIsNotATimeout(t *testing.T) {
	lost := errors.New("lost lease kiln-system/kiln-lock")
	tests := []struct {
		name     string
		cause    error
		wantIs   error
		wantKind failure.Kind
	}{
		{"interrupted", nil, context.Canceled, failure.Interrupted},
		// The lock's context ends with a cause; the error must carry it
		// rather than read as a user interrupt.
		{"cancelled with a cause", lost, lost, failure.Failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			ns := cluster.Namespace(t)
			ref := Ref{Kind: KindConfigMap, Namespace: ns, Name: "never"}
			rec := newRecorder()
			wctx, cancel := context.WithCancelCause(ctx)
			done := startUntil(wctx, &Watcher{Client: cluster.Client, OnChange: rec.onChange}, []Ref{ref}, Ready)
			rec.waitSeen(t, ctx, is(NotFound), ref)
			cancel(tt.cause)
			r := await(t, ctx, done)
			if !errors.Is(r.err, tt.wantIs) || failure.Of(r.err) != tt.wantKind {
				t.Errorf("err = %v (kind %v), want %v (kind %v)", r.err, failure.Of(r.err), tt.wantIs, tt.wantKind)
			}
			if r.err != nil && !strings.Contains(r.err.Error(), ref.String()+" (NotFound: not found)") {
				t.Errorf("error %q does not name %s and its last status", r.err, ref)
			}
		})
	}
}

func TestUntilFailedDeploymentIsAnError(t *testing.T) {
	ctx := testCtx(t)
	ns := cluster.Namespace(t)
	cs := cluster.Client
	ref := Ref{Kind: KindDeployment, Namespace: ns, Name: "doomed"}
	// Pods never schedule and the deadline is 1s: the deployment controller
	// itself sets Progressing=False, reason ProgressDeadlineExceeded.
	d := deployment(ns, "doomed", 1, unschedulable, func(d *appsv1.Deployment) { d.Spec.ProgressDeadlineSeconds = ptr.To[int32](1) })
	must[*appsv1.Deployment](t)(cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}))

	rec := newRecorder()
	res, err := (&Watcher{Client: cs, OnChange: rec.onChange}).Until(ctx, []Ref{ref}, Ready)
	if err == nil {
		t.Fatal("Until succeeded on a deployment past its progress deadline")
	}
	if code := failure.Of(err); code != failure.Failed {
		t.Errorf("exit code = %d, want %v (failed, not a timeout): %v", code, failure.Failed, err)
	}
	if want := ref.String() + " failed: Progress deadline exceeded"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
	if res[ref].Status != Failed {
		t.Errorf("result = %+v, want Failed", res[ref])
	}
	if r := compute(t, ctx, ref); r.Status != Failed {
		t.Errorf("Compute = %+v, want Failed", r)
	}
}

func TestUntilUnsupportedKindFailsAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := (&Watcher{Client: cluster.Client}).Until(ctx, []Ref{{Kind: "Pod", Namespace: "default", Name: "x"}}, Ready)
	if err == nil || failure.Of(err) == failure.Timeout || !strings.Contains(err.Error(), `"Pod"`) {
		t.Errorf("err = %v (kind %v), want an immediate error naming kind Pod", err, failure.Of(err))
	}
}

// failFirstGet makes the first GET of one object fail with a 500, as a
// transient API error would, while lists and watches pass.
type failFirstGet struct {
	next   http.RoundTripper
	suffix string
	failed atomic.Bool
}

func (f *failFirstGet) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, f.suffix) && f.failed.CompareAndSwap(false, true) {
		body := `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected failure","reason":"InternalError","code":500}`
		return &http.Response{
			StatusCode: http.StatusInternalServerError,
			Header:     http.Header{"Content-Type": []string{"application/json"}},
			Body:       io.NopCloser(strings.NewReader(body)),
			Request:    req,
		}, nil
	}
	return f.next.RoundTrip(req)
}

// The event that made an object ready may be the last one it ever gets; an
// API error while judging it must be retried, not wait for another event.
func TestUntilRetriesAfterAnAPIError(t *testing.T) {
	ctx := testCtx(t)
	ns := cluster.Namespace(t)
	must[*corev1.ConfigMap](t)(cluster.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}}, metav1.CreateOptions{}))

	flaky := &failFirstGet{suffix: "/namespaces/" + ns + "/configmaps/cfg"}
	rc := rest.CopyConfig(cluster.RESTConfig)
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { flaky.next = rt; return flaky })
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ref := Ref{Kind: KindConfigMap, Namespace: ns, Name: "cfg"}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := (&Watcher{Client: cs}).Until(wctx, []Ref{ref}, Ready)
	if err != nil {
		t.Fatalf("Until after one failed GET: %v", err)
	}
	if !flaky.failed.Load() {
		t.Fatal("the injected failure never happened; the test proves nothing")
	}
	if res[ref].Status != Current {
		t.Errorf("result = %+v, want Current", res[ref])
	}
}

// closingWatch wraps a real watch call: the first n watches it opens end at
// once, the first as a closed channel (a cut stream), the rest with a 410
// Error event (the version expired), the two ways a watch ends early.
type closingWatch struct {
	real  func(context.Context, metav1.ListOptions) (watch.Interface, error)
	n     int32
	calls atomic.Int32
	mu    sync.Mutex
	rvs   []string // the resourceVersion each watch started from
	// live is signalled each time a watch that stays open is established.
	live chan struct{}
}

func (c *closingWatch) watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	c.mu.Lock()
	c.rvs = append(c.rvs, opts.ResourceVersion)
	c.mu.Unlock()
	w, err := c.real(ctx, opts)
	if err != nil {
		return nil, err
	}
	i := c.calls.Add(1)
	if i > c.n {
		select {
		case c.live <- struct{}{}:
		default:
		}
		return w, nil
	}
	w.Stop()
	if i == 1 {
		return w, nil // result channel closes
	}
	fw := watch.NewFake()
	go fw.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version"})
	return fw, nil
}

// A cut watch resumes from the version it had reached, without listing
// again; only a 410 (the version expired) makes it list afresh.
func TestSourceResumesAfterCutAndRelistsOnGone(t *testing.T) {
	ctx := testCtx(t)
	ns := cluster.Namespace(t)
	cms := cluster.Client.CoreV1().ConfigMaps(ns)

	var lists atomic.Int32
	var listRVs []string
	var mu sync.Mutex
	list := func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		lists.Add(1)
		l, err := cms.List(ctx, o)
		if err == nil {
			mu.Lock()
			listRVs = append(listRVs, l.ResourceVersion)
			mu.Unlock()
		}
		return l, err
	}
	cw := &closingWatch{real: cms.Watch, n: 2, live: make(chan struct{}, 1)}
	src := source{list: list, watch: cw.watch, opts: byName("late")}
	kicks := make(chan struct{}, 100)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go src.run(sctx, func() { kicks <- struct{}{} })

	select {
	case <-cw.live:
	case <-ctx.Done():
		t.Fatalf("no watch established after %d lists", lists.Load())
	}
	// The initial list, and one after the 410; none after the cut.
	if got := lists.Load(); got != 2 {
		t.Errorf("lists = %d, want 2 (none after a cut stream, one after 410 Gone)", got)
	}
	mu.Lock()
	cw.mu.Lock()
	if len(listRVs) != 2 || len(cw.rvs) != 3 || cw.rvs[0] != listRVs[0] || cw.rvs[1] != listRVs[0] || cw.rvs[2] != listRVs[1] {
		t.Errorf("watches started from %v, lists returned %v; want the cut watch resumed from the first list's version and the expired one relisted", cw.rvs, listRVs)
	}
	cw.mu.Unlock()
	mu.Unlock()
	if got := len(kicks); got != 2 {
		t.Errorf("kicks before any change = %d, want one per list (2)", got)
	}
	for len(kicks) > 0 {
		<-kicks
	}
	// The watch in place now still delivers real events.
	must[*corev1.ConfigMap](t)(cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{}))
	select {
	case <-kicks:
	case <-ctx.Done():
		t.Fatal("creating the object after a resume and a relist did not kick")
	}
}

func TestUntilFollowsAnObjectCreatedLater(t *testing.T) {
	ctx := testCtx(t)
	ns := cluster.Namespace(t)
	cs := cluster.Client
	tests := []struct {
		ref    Ref
		create func() error
	}{
		{Ref{Kind: KindConfigMap, Namespace: ns, Name: "late"}, func() error {
			_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{})
			return err
		}},
		{Ref{Kind: KindSecret, Namespace: ns, Name: "late"}, func() error {
			_, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{})
			return err
		}},
		{Ref{Kind: KindIngress, Namespace: ns, Name: "late"}, func() error {
			if _, err := cs.NetworkingV1().Ingresses(ns).Create(ctx, ingress(ns, "late", "late"), metav1.CreateOptions{}); err != nil {
				return err
			}
			if _, err := cs.CoreV1().Services(ns).Create(ctx, service(ns, "late", "late"), metav1.CreateOptions{}); err != nil {
				return err
			}
			_, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "late", 1), metav1.CreateOptions{})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.ref.Kind, func(t *testing.T) {
			rec := newRecorder()
			done := startUntil(ctx, &Watcher{Client: cs, OnChange: rec.onChange}, []Ref{tt.ref}, Ready)
			rec.waitSeen(t, ctx, is(NotFound), tt.ref)
			if err := tt.create(); err != nil {
				t.Fatal(err)
			}
			r := await(t, ctx, done)
			if r.err != nil {
				t.Fatalf("Until: %v", r.err)
			}
			checkSequence(t, tt.ref, rec.results(tt.ref), r.res[tt.ref])
			if r.res[tt.ref].Status != Current {
				t.Errorf("result = %+v, want Current", r.res[tt.ref])
			}
		})
	}
}

// A server that ends every watch at once with 410 Expired (a relist
// storm) is listed and watched again only after a backoff: a source must
// not loop as fast as the client lets it, or its own run's requests wait
// behind it in the client's rate limiter (seen end to end:
// TestCommandsCompleteUnderHostileAnswers). Each relist still kicks, so a
// wait goes on learning the state.
func TestSourceBacksOffARelistStorm(t *testing.T) {
	var lists, watches, kicks atomic.Int64
	src := source{
		list: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			lists.Add(1)
			return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}}, nil
		},
		watch: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			watches.Add(1)
			w := watch.NewFake()
			go w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: "too old resource version"})
			return w, nil
		},
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	src.run(ctx, func() { kicks.Add(1) })
	// With the backoff (100 ms doubling to 2 s): about 5 rounds in 2 s.
	// Without it: thousands.
	if n := lists.Load(); n > 50 || n < 2 {
		t.Errorf("%d lists and %d watches in 2 s of a relist storm: want a few, backed off", n, watches.Load())
	}
	if kicks.Load() != lists.Load() {
		t.Errorf("%d kicks for %d lists: every relist must kick", kicks.Load(), lists.Load())
	}
}

// reqLog records the requests a client sends.
type reqLog struct {
	next http.RoundTripper
	mu   sync.Mutex
	urls []string
}

func (l *reqLog) RoundTrip(req *http.Request) (*http.Response, error) {
	l.mu.Lock()
	l.urls = append(l.urls, req.Method+" "+req.URL.RequestURI())
	l.mu.Unlock()
	return l.next.RoundTrip(req)
}

// An object already at the goal is confirmed with one read: no list, no
// watch (kiln wait on a ready platform, destroy confirming what is gone).
func TestUntilAtTheGoalReadsOnceAndWatchesNothing(t *testing.T) {
	ctx := testCtx(t)
	ns := cluster.Namespace(t)
	log := &reqLog{}
	rc := rest.CopyConfig(cluster.RESTConfig)
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { log.next = rt; return log })
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ready := Ref{Kind: KindNamespace, Name: ns}
	gone := Ref{Kind: KindConfigMap, Namespace: ns, Name: "never-made"}
	rec := newRecorder()
	w := &Watcher{Client: cs, OnChange: rec.onChange}
	if _, err := w.Until(ctx, []Ref{ready}, Ready); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Until(ctx, []Ref{gone}, Gone); err != nil {
		t.Fatal(err)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.urls) != 2 {
		t.Errorf("requests: %q, want one GET of each object", log.urls)
	}
	for _, u := range log.urls {
		if strings.Contains(u, "watch=true") || strings.Contains(u, "fieldSelector") {
			t.Errorf("request %q: a list or watch of an object already at the goal", u)
		}
	}
	if seq := rec.results(ready); len(seq) != 1 || seq[0].Status != Current {
		t.Errorf("OnChange for %s: %v, want one Current", ready, seq)
	}
	if seq := rec.results(gone); len(seq) != 1 || seq[0].Status != NotFound {
		t.Errorf("OnChange for %s: %v, want one NotFound", gone, seq)
	}
}

package lock

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/kubeapi"
)

// renewalOutage fails every lease renewal (PUT on a lease) while down is
// set, as a control plane that stopped answering would, and records when
// each write reached the API server and whether it succeeded.
type renewalOutage struct {
	next http.RoundTripper
	down atomic.Bool
	mu   sync.Mutex
	log  []sent
}

type sent struct {
	at     time.Time
	method string
	path   string
	code   int
}

func (o *renewalOutage) RoundTrip(req *http.Request) (*http.Response, error) {
	if o.down.Load() && req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/leases/") {
		return nil, errors.New("connection reset by peer (outage)")
	}
	resp, err := o.next.RoundTrip(req)
	if err == nil && req.Method != http.MethodGet {
		o.mu.Lock()
		o.log = append(o.log, sent{time.Now(), req.Method, req.URL.Path, resp.StatusCode})
		o.mu.Unlock()
	}
	return resp, err
}

// firstOK is when the first successful request matching method and path
// part reached the server at or after since (zero when none).
func (o *renewalOutage) firstOK(method, part string, since time.Time) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.log {
		if s.method == method && strings.Contains(s.path, part) && s.code < 300 && !s.at.Before(since) {
			return s.at
		}
	}
	return time.Time{}
}

// gatedClient is a client as kiln's providers build it: kubeapi's retrying
// Transport (which waits on the locks' gates) over the outage.
func gatedClient(t *testing.T, o *renewalOutage) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(cluster.RESTConfig)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper { o.next = next; return o })
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return &kubeapi.Transport{Next: next, Policy: kubeapi.Policy{Attempts: 1000, Base: 20 * time.Millisecond, Max: 100 * time.Millisecond, Within: time.Minute}}
	})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func writeConfigMap(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	return err
}

// A Gated holder that cannot renew for ⅔ of the lease's duration holds its
// operation's writes back — a write issued then reaches the server only
// after a renewal, preconditioned on the lease's resourceVersion, has
// succeeded — and then goes on: the run is not ended, since nobody took
// the lease.
func TestGatedHolderHoldsWritesUntilItRenewsAndGoesOn(t *testing.T) {
	ctx := testCtx(t)
	ns := cluster.Namespace(t)
	o := &renewalOutage{}
	cs := gatedClient(t, o)
	var logs []string
	var logMu sync.Mutex
	holder, hctx, err := Acquire(ctx, cs, Options{Namespace: ns, Name: leaseName, Operation: "create dev1", Duration: 3 * time.Second, Gated: true,
		Logf: func(f string, a ...any) { logMu.Lock(); logs = append(logs, f); logMu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Release(context.Background()) })
	if err := writeConfigMap(hctx, cs, ns, "before"); err != nil {
		t.Fatal(err)
	}

	o.down.Store(true)
	// Past ⅔ of the duration without a renewal, writes are held back.
	deadline := time.Now().Add(30 * time.Second)
	for {
		holder.mu.Lock()
		paused := holder.paused != nil
		holder.mu.Unlock()
		if paused {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the holder never held writes back")
		}
		time.Sleep(20 * time.Millisecond)
	}
	issued := time.Now()
	done := make(chan error, 1)
	go func() { done <- writeConfigMap(hctx, cs, ns, "during") }()
	select {
	case err := <-done:
		t.Fatalf("a write went through while the lease could not be renewed: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if !o.firstOK(http.MethodPost, "/configmaps", issued).IsZero() {
		t.Fatal("the held write reached the API server")
	}

	o.down.Store(false) // the control plane answers again
	if err := <-done; err != nil {
		t.Fatalf("the held write failed once the lease was renewed: %v", err)
	}
	renewed := o.firstOK(http.MethodPut, "/leases/", issued)
	wrote := o.firstOK(http.MethodPost, "/configmaps", issued)
	if renewed.IsZero() || wrote.Before(renewed) {
		t.Fatalf("the held write reached the server at %v, before the renewal at %v", wrote, renewed)
	}
	if hctx.Err() != nil {
		t.Fatalf("the operation was ended though nobody took the lease: %v", context.Cause(hctx))
	}
	logMu.Lock()
	defer logMu.Unlock()
	joined := strings.Join(logs, "\n")
	if !strings.Contains(joined, "holding every write back") || !strings.Contains(joined, "writes resume") {
		t.Errorf("the holder did not say it held writes back and resumed:\n%s", joined)
	}
}

// When another operation took the lease while the holder could not renew,
// the holder's first renewal that gets through sees it: the held write is
// never sent, and the operation ends with exit 4 naming the new holder.
func TestGatedHolderThatLostTheLeaseNeverSendsTheHeldWrite(t *testing.T) {
	ctx := testCtx(t)
	ns := cluster.Namespace(t)
	o := &renewalOutage{}
	cs := gatedClient(t, o)
	holder, hctx, err := Acquire(ctx, cs, Options{Namespace: ns, Name: leaseName, Operation: "create dev1", Duration: 3 * time.Second, Gated: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Release(context.Background()) })
	if err := writeConfigMap(hctx, cs, ns, "before"); err != nil {
		t.Fatal(err)
	}
	o.down.Store(true)
	done := make(chan error, 1)
	go func() {
		for {
			holder.mu.Lock()
			paused := holder.paused != nil
			holder.mu.Unlock()
			if paused {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		done <- writeConfigMap(hctx, cs, ns, "held")
	}()

	// A contender whose clock is an hour ahead sees stale timestamps,
	// watches the lease unchanged for its duration and takes it.
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	other, _, err := Acquire(ctx, cluster.Client, Options{Namespace: ns, Name: leaseName, Operation: "destroy dev1", Now: ahead})
	if err != nil {
		t.Fatalf("contender: %v", err)
	}
	t.Cleanup(func() { _ = other.Release(context.Background()) })
	if hctx.Err() != nil {
		t.Fatalf("the holder ended before anything showed it lost the lease: %v", context.Cause(hctx))
	}
	o.down.Store(false)

	err = <-done
	if failure.Of(err) != failure.Locked || !strings.Contains(err.Error(), "destroy dev1") {
		t.Fatalf("the held write: want locked naming the new holder, got %v: %v", failure.Of(err), err)
	}
	if _, gerr := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "held", metav1.GetOptions{}); gerr == nil {
		t.Fatal("the held write was sent after the lease was lost")
	}
	<-hctx.Done()
	if cause := context.Cause(hctx); failure.Of(cause) != failure.Locked || !strings.Contains(cause.Error(), "destroy dev1") {
		t.Errorf("cause = %v, want exit 4 naming destroy dev1", cause)
	}
}

// The server gone after the lease was taken but before the operation's
// first write: a read through kubeapi's Transport has shown the gate in
// use, so the holder holds the coming write back instead of ending the
// run, and lets it go after a renewal.
func TestGatedHolderHoldsWritesBackBeforeItsFirstWrite(t *testing.T) {
	ctx := testCtx(t)
	ns := cluster.Namespace(t)
	o := &renewalOutage{}
	cs := gatedClient(t, o)
	holder, hctx, err := Acquire(ctx, cs, Options{Namespace: ns, Name: leaseName, Operation: "project suspend", Duration: 3 * time.Second, Gated: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Release(context.Background()) })
	if _, err := cs.CoreV1().ConfigMaps(ns).List(hctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	o.down.Store(true)
	deadline := time.Now().Add(30 * time.Second)
	for {
		holder.mu.Lock()
		paused := holder.paused != nil
		holder.mu.Unlock()
		if paused {
			break
		}
		if hctx.Err() != nil {
			t.Fatalf("the operation was ended before its first write: %v", context.Cause(hctx))
		}
		if time.Now().After(deadline) {
			t.Fatal("the holder never held writes back")
		}
		time.Sleep(20 * time.Millisecond)
	}
	issued := time.Now()
	done := make(chan error, 1)
	go func() { done <- writeConfigMap(hctx, cs, ns, "first") }()
	time.Sleep(500 * time.Millisecond) // the outage goes on a while: not a wait for a result
	o.down.Store(false)
	if err := <-done; err != nil {
		t.Fatalf("the held write failed once the lease was renewed: %v", err)
	}
	renewed := o.firstOK(http.MethodPut, "/leases/", issued)
	if wrote := o.firstOK(http.MethodPost, "/configmaps", issued); renewed.IsZero() || wrote.Before(renewed) {
		t.Fatalf("the held write reached the server at %v, before the renewal at %v", wrote, renewed)
	}
	if hctx.Err() != nil {
		t.Fatalf("the operation was ended though nobody took the lease: %v", context.Cause(hctx))
	}
}

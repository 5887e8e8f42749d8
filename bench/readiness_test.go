package bench

import (
	"context"
	"fmt"
	"os/exec"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/readiness"
	"github.com/kilnctl/kiln/internal/testenv/testcluster"
)

// pace is the interval at which iterations start (the wait is not timed).
// Back-to-back iterations make the fake cluster itself slower: the rollout
// of a Deployment grows from about 50 ms to 200-260 ms after a few
// create/delete rounds without a pause (observed on kwok, cause not
// established). A method that answers sooner would then run against a
// slower cluster, so every method gets the same schedule: one Deployment
// every pace, which also covers the slowest method (poll-1s, about 1.2 s
// per iteration with the removal).
const pace = 1500 * time.Millisecond

// detector blocks until it has concluded that Deployment ns/name is ready.
type detector func(ctx context.Context, c *testcluster.Cluster, ns, name string) error

// BenchmarkReadinessDetection compares how soon five methods report that
// a new Deployment is ready. Every method judges the same object: the
// gateway Deployment (kiln-system/kiln-gateway) of an installed kiln
// platform (the project benchmarks' bench-proj), so `kiln wait` can judge
// it too. Each iteration creates the gateway Deployment afresh (from the
// one kiln created), runs the method until it says "ready", and removes the
// Deployment again (untimed); iterations start every pace. After the last
// method the gateway is created once more and left ready.
//
//	kiln-wait               kiln wait kube bench-proj, a process (what a
//	                        pipeline runs): discovery, the platform read,
//	                        the watch, the token check
//	kubectl-rollout-status  kubectl rollout status deployment/kiln-gateway,
//	                        a process
//	kubectl-wait            kubectl wait --for=condition=Available
//	                        deployment/kiln-gateway, a process
//	kiln-watch              kiln's watcher in this process
//	                        (readiness.Watcher): the engine overhead, with
//	                        no process start, discovery or token check
//	poll-1s                 kiln's judgement (readiness.Compute), once a
//	                        second, in this process
//
// Metrics:
//
//   - ready-ms: creation to the moment an independent watch sees the
//     Deployment's own status say it rolled out (the reference: no method
//     can know earlier);
//   - detect-ms: creation to the moment the method reports ready;
//   - lag-ms, lag-max-ms: the method's report minus the reference, mean
//     and worst: the time the method itself adds.
func BenchmarkReadinessDetection(b *testing.B) {
	c := needCluster(b)
	tmpl := projectPlatform(b, c)
	const ns, name = "kiln-system", "kiln-gateway"
	gw, err := c.Client.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		b.Fatalf("the platform's gateway: %v", err)
	}
	fresh := func() *appsv1.Deployment {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: gw.Name, Namespace: gw.Namespace, Labels: gw.Labels, Annotations: map[string]string{}},
			Spec:       *gw.Spec.DeepCopy(),
		}
		for k, v := range gw.Annotations {
			if k != "deployment.kubernetes.io/revision" {
				d.Annotations[k] = v
			}
		}
		return d
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := c.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			return
		}
		if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, fresh(), metav1.CreateOptions{FieldManager: "kiln"}); err != nil {
			b.Errorf("restore the gateway: %v", err)
			return
		}
		if err := kilnWatch(ctx, c, ns, name); err != nil {
			b.Errorf("restored gateway not ready: %v", err)
		}
	})
	env := &kilnEnv{bin: tmpl.env.bin, vars: tmpl.env.vars}
	kilnWait := func(ctx context.Context, c *testcluster.Cluster, ns, name string) error {
		return env.runIn(2*time.Minute, c.KubeconfigPath, "wait", "kube", projCluster, "--context", c.ContextName, "--timeout", "2m")
	}
	methods := []struct {
		name    string
		detect  detector
		kubectl bool
	}{
		{"kiln-wait", kilnWait, false},
		{"kubectl-rollout-status", kubectlRolloutStatus, true},
		{"kubectl-wait", kubectlWait, true},
		{"kiln-watch", kilnWatch, false},
		{"poll-1s", poll1s, false},
	}
	ref := startReference(b, c, ns)
	for _, m := range methods {
		b.Run(m.name, func(b *testing.B) {
			if m.kubectl {
				if _, err := exec.LookPath("kubectl"); err != nil {
					b.Skip("kubectl not on PATH")
				}
			}
			// One iteration: create, detect, compare with the reference,
			// then remove (untimed) so every iteration starts without the
			// Deployment.
			measure := func() (ready, detect, lag time.Duration) {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				b.StopTimer()
				removeDeployment(ctx, b, c, ns, name)
				b.StartTimer()
				start := time.Now()
				d, err := c.Client.AppsV1().Deployments(ns).Create(ctx, fresh(), metav1.CreateOptions{FieldManager: "kiln"})
				if err != nil {
					b.Fatalf("create deployment %s/%s: %v", ns, name, err)
				}
				if err := m.detect(ctx, c, ns, name); err != nil {
					b.Fatalf("%s: deployment %s/%s: %v", m.name, ns, name, err)
				}
				reported := time.Now()
				readyAt, err := ref.wait(ctx, string(d.UID))
				if err != nil {
					b.Fatalf("reference watch never saw %s/%s ready, although %s reported it: %v", ns, name, m.name, err)
				}
				return readyAt.Sub(start), reported.Sub(start), reported.Sub(readyAt)
			}
			// A warm-up, not measured: the first Deployment of a method
			// pays for caches (controllers, kubectl discovery) the others
			// do not.
			next := time.Now().Add(pace)
			measure()
			var ready, detect, lag durations
			for b.Loop() {
				b.StopTimer()
				time.Sleep(time.Until(next))
				next = time.Now().Add(pace)
				b.StartTimer()
				r, d, l := measure()
				ready, detect, lag = append(ready, r), append(detect, d), append(lag, l)
			}
			b.ReportMetric(ready.meanMS(), "ready-ms")
			b.ReportMetric(detect.meanMS(), "detect-ms")
			b.ReportMetric(lag.meanMS(), "lag-ms")
			b.ReportMetric(lag.maxMS(), "lag-max-ms")
		})
	}
}

// kiln-watch is how kiln waits, in this process: readiness.Watcher
// (list+watch, kstatus). The engine overhead of kiln-wait.
func kilnWatch(ctx context.Context, c *testcluster.Cluster, ns, name string) error {
	w := &readiness.Watcher{Client: c.Client}
	_, err := w.Until(ctx, []readiness.Ref{{Kind: readiness.KindDeployment, Namespace: ns, Name: name}}, readiness.Ready)
	return err
}

// kubectl-rollout-status is what a script does: a kubectl process that
// watches the Deployment and exits when it rolled out.
func kubectlRolloutStatus(ctx context.Context, c *testcluster.Cluster, ns, name string) error {
	out, err := exec.CommandContext(ctx, "kubectl", "--kubeconfig", c.KubeconfigPath,
		"-n", ns, "rollout", "status", "deployment/"+name, "--timeout=2m").CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl rollout status: %w\n%s", err, out)
	}
	return nil
}

// kubectl-wait is the other thing a script does: a kubectl process that
// waits for the Deployment's Available condition.
func kubectlWait(ctx context.Context, c *testcluster.Cluster, ns, name string) error {
	out, err := exec.CommandContext(ctx, "kubectl", "--kubeconfig", c.KubeconfigPath,
		"-n", ns, "wait", "--for=condition=Available", "deployment/"+name, "--timeout=2m").CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl wait: %w\n%s", err, out)
	}
	return nil
}

// poll-1s judges the Deployment exactly as kiln does (readiness.Compute:
// GET + kstatus) but once a second instead of on watch events.
func poll1s(ctx context.Context, c *testcluster.Cluster, ns, name string) error {
	ref := readiness.Ref{Kind: readiness.KindDeployment, Namespace: ns, Name: name}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		r, err := readiness.Compute(ctx, c.Client, ref)
		if err == nil && r.Status == readiness.Current {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v %v)", ctx.Err(), r, err)
		case <-t.C:
		}
	}
}

// reference is an independent watch on a namespace's Deployments that
// records when each one (by UID: the benchmark re-creates one name) first
// says in its status that it rolled out. It is a plain
// list+watch (client-go's informers would pull a module kiln's go.mod does
// not carry) and shares no code with the methods it judges.
type reference struct {
	mu      sync.Mutex
	readyAt map[string]time.Time
	changed chan struct{} // closed and replaced on every record
	err     error         // why the watch stopped, when it did
}

func startReference(b *testing.B, c *testcluster.Cluster, ns string) *reference {
	b.Helper()
	r := &reference{readyAt: map[string]time.Time{}, changed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	deps := c.Client.AppsV1().Deployments(ns)
	// list records what is already there and says where to watch from.
	list := func() (string, error) {
		l, err := deps.List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", fmt.Errorf("list deployments in %s: %w", ns, err)
		}
		for i := range l.Items {
			if rolledOut(&l.Items[i]) {
				r.record(string(l.Items[i].UID), time.Now())
			}
		}
		return l.ResourceVersion, nil
	}
	rv, err := list()
	if err != nil {
		b.Fatalf("reference: %v", err)
	}
	done := make(chan struct{})
	b.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			w, err := deps.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				r.stop(fmt.Errorf("watch deployments in %s: %w", ns, err))
				return
			}
			expired := false
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					expired = true // e.g. resourceVersion too old: relist
					break
				}
				d, ok := ev.Object.(*appsv1.Deployment)
				if !ok {
					continue
				}
				rv = d.ResourceVersion
				if ev.Type != watch.Bookmark && rolledOut(d) {
					r.record(string(d.UID), time.Now())
				}
			}
			w.Stop()
			if expired && ctx.Err() == nil {
				if rv, err = list(); err != nil {
					r.stop(err)
					return
				}
			}
		}
	}()
	return r
}

func (r *reference) record(uid string, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, seen := r.readyAt[uid]; !seen {
		r.readyAt[uid] = t
		close(r.changed)
		r.changed = make(chan struct{})
	}
}

func (r *reference) stop(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
	close(r.changed)
	r.changed = make(chan struct{})
}

// wait returns when the watch saw the Deployment with uid ready.
func (r *reference) wait(ctx context.Context, uid string) (time.Time, error) {
	for {
		r.mu.Lock()
		t, ok := r.readyAt[uid]
		ch, err := r.changed, r.err
		r.mu.Unlock()
		if ok {
			return t, nil
		}
		if err != nil {
			return time.Time{}, err
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-ch:
		}
	}
}

// rolledOut is the Deployment's own status saying the current generation
// is fully rolled out and available — the earliest moment any client can
// know.
func rolledOut(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	return s.ObservedGeneration >= d.Generation &&
		s.Replicas == want && s.UpdatedReplicas == want &&
		s.ReadyReplicas == want && s.AvailableReplicas == want
}

// removeDeployment deletes in the foreground and waits (by watch) until
// the Deployment, and with it its ReplicaSet and pods, is gone.
func removeDeployment(ctx context.Context, b *testing.B, c *testcluster.Cluster, ns, name string) {
	b.Helper()
	ref := readiness.Ref{Kind: readiness.KindDeployment, Namespace: ns, Name: name}
	if err := platform.Delete(ctx, c.Client, ref); err != nil {
		b.Fatal(err)
	}
	w := &readiness.Watcher{Client: c.Client}
	if _, err := w.Until(ctx, []readiness.Ref{ref}, readiness.Gone); err != nil {
		b.Fatalf("deployment %s/%s not gone: %v", ns, name, err)
	}
}

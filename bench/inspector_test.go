package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/provider/kube"
)

// BenchmarkInspector measures the wizard's live inspector (engine.Watch,
// what kiln inspect and the inspect screens run) on the bench cluster with
// KILN_BENCH_INSPECT_PROJECTS projects (default 100), once their
// Deployments are available or KILN_BENCH_SETTLE_S seconds (default 150)
// have passed:
//
//   - update latency: from a change made by another client (the template
//     project's Service deleted, then created again) to the first status
//     Watch delivers that shows it; each iteration is one delete and one
//     create, so b.N iterations are 2*b.N samples. Watch re-reads only the
//     changed project (engine/watch.go);
//   - the peer, in the same run: a plain client-go informer on the tenant
//     namespace's Services (no kiln code), from the same change to its
//     event — what any watch-based view costs at least;
//   - requests per change: everything the inspector sent for those
//     changes, divided by their number;
//   - idle requests: everything the inspector sends through the counting
//     proxy during KILN_BENCH_IDLE_S seconds (default 20) with nothing
//     changing, as requests per minute;
//   - for comparison, the requests of one engine.Inspect read, which the
//     inspect screens made every 3 s before (20 reads a minute), and the
//     wall time of three such reads: a full re-read, which Watch made on
//     every change before it re-read only the changed project.
func BenchmarkInspector(b *testing.B) {
	c := needCluster(b)
	tmpl := projectPlatform(b, c)
	n := envInt("KILN_BENCH_INSPECT_PROJECTS", 100)
	have := 1
	if n > have {
		if err := tmpl.seed(c, "scale", projectNames("insp", have, n), false); err != nil {
			b.Fatal(err)
		}
	}
	start0 := time.Now()
	avail := settle(c, n, time.Duration(envInt("KILN_BENCH_SETTLE_S", 150))*time.Second)
	b.Logf("%d of %d project Deployments available after %s", avail, n, time.Since(start0).Round(time.Second))
	p := startAPIProxy(b, c, "bench")
	target := engine.Target{Provider: kube.New(p.Kubeconfig, p.ContextName), Name: projCluster, TokenDir: b.TempDir()}
	quiet := engine.SinkFunc(func(engine.Event) {})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// One polled read, as the inspect screens made every 3 s before; and
	// the wall time of three: about what every change cost when Watch read
	// everything again (that read, plus Inspect's discovery, which Watch
	// does once).
	p.take()
	var poll apiCounts
	var full durations
	for i := range 3 {
		t0 := time.Now()
		if _, err := (&engine.Engine{Sink: quiet}).Inspect(ctx, target); err != nil {
			b.Fatal(err)
		}
		full = append(full, time.Since(t0))
		if i == 0 {
			poll = p.take()
		}
	}
	p.take()

	type upd struct {
		st *engine.ClusterStatus
		at time.Time
	}
	updates := make(chan upd, 1024)
	done := make(chan error, 1)
	go func() {
		done <- (&engine.Engine{Sink: quiet}).Watch(ctx, target, func(st *engine.ClusterStatus, err error) {
			if err != nil {
				b.Errorf("watch read: %v", err)
				return
			}
			updates <- upd{st, time.Now()}
		})
	}()
	svcStatus := func(st *engine.ClusterStatus) event.Status {
		for _, pr := range st.Projects {
			if pr.Tenant == tmplTenant && pr.Project == tmplProject {
				for _, o := range pr.Objects {
					if o.Kind == "Service" {
						return o.Status
					}
				}
			}
		}
		return ""
	}
	wait := func(what string, ok func(*engine.ClusterStatus) bool) upd {
		deadline := time.After(2 * time.Minute)
		for {
			select {
			case u := <-updates:
				if ok(u.st) {
					return u
				}
			case err := <-done:
				b.Fatalf("watch ended waiting for %s: %v", what, err)
			case <-deadline:
				b.Fatalf("no status with %s", what)
			}
		}
	}
	all := func(st *engine.ClusterStatus) bool { return len(st.Projects) >= n }
	wait("every project", all)
	// The informers' initial adds cause exactly one more read once they
	// have synced; the idle span starts after it.
	wait("the read after the informers' sync", all)
	start := p.take() // discovery, the informers' lists and the first reads

	// Idle: nothing changes; whatever the inspector sends is its idle cost.
	idle := time.Duration(envInt("KILN_BENCH_IDLE_S", 20)) * time.Second
	idleStart := time.Now()
	drainUntil := time.After(idle)
	idleUpdates := 0
idleLoop:
	for {
		select {
		case u := <-updates:
			idleUpdates++
			if idleUpdates <= 3 {
				b.Logf("idle delivery at +%s", u.at.Sub(idleStart).Round(time.Millisecond))
			}
		case <-drainUntil:
			break idleLoop
		}
	}
	idleCounts := p.take()

	// The peer: a plain informer on the same Services, straight to the
	// API server (not counted), started and synced before the changes.
	type seen struct {
		gone bool
		at   time.Time
	}
	peerEvents := make(chan seen, 1024)
	isTmpl := func(obj any) bool {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		svc, ok := obj.(*corev1.Service)
		return ok && svc.Name == tmplProject
	}
	peerFactory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace("kiln-tenant-"+tmplTenant))
	peerInf := peerFactory.Core().V1().Services().Informer()
	if _, err := peerInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if isTmpl(obj) {
				peerEvents <- seen{false, time.Now()}
			}
		},
		DeleteFunc: func(obj any) {
			if isTmpl(obj) {
				peerEvents <- seen{true, time.Now()}
			}
		},
	}); err != nil {
		b.Fatal(err)
	}
	peerStop := make(chan struct{})
	peerFactory.Start(peerStop)
	defer func() { close(peerStop); peerFactory.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), peerInf.HasSynced) {
		b.Fatal("peer informer never synced")
	}
	peerWait := func(gone bool) time.Time {
		deadline := time.After(2 * time.Minute)
		for {
			select {
			case e := <-peerEvents:
				if e.gone == gone {
					return e.at
				}
			case <-deadline:
				b.Fatalf("the peer informer saw no change (gone %v)", gone)
			}
		}
	}

	svcs := c.Client.CoreV1().Services("kiln-tenant-" + tmplTenant)
	orig, err := svcs.Get(ctx, tmplProject, metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var lat, peer durations
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if err := svcs.Delete(ctx, tmplProject, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		u := wait("the Service gone", func(st *engine.ClusterStatus) bool { return svcStatus(st) == engine.StatusNotFound })
		lat = append(lat, u.at.Sub(t0))
		peer = append(peer, peerWait(true).Sub(t0))
		re := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: orig.Name, Namespace: orig.Namespace, Labels: orig.Labels, Annotations: orig.Annotations}, Spec: corev1.ServiceSpec{Selector: orig.Spec.Selector, Ports: orig.Spec.Ports, Type: orig.Spec.Type}}
		t1 := time.Now()
		if _, err := svcs.Create(ctx, re, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		u = wait("the Service back", func(st *engine.ClusterStatus) bool {
			s := svcStatus(st)
			return s != "" && s != engine.StatusNotFound
		})
		lat = append(lat, u.at.Sub(t1))
		peer = append(peer, peerWait(false).Sub(t1))
	}
	b.StopTimer()
	changes := p.take()
	cancel()
	if err := <-done; err != nil {
		b.Fatalf("watch returned %v", err)
	}
	perMin := float64(idleCounts.Total()) / idle.Minutes()
	perChange := float64(changes.Total()) / float64(len(lat))
	b.ReportMetric(lat.meanMS(), "update-mean-ms")
	b.ReportMetric(lat.maxMS(), "update-max-ms")
	b.ReportMetric(peer.meanMS(), "informer-mean-ms")
	b.ReportMetric(peer.maxMS(), "informer-max-ms")
	b.ReportMetric(perChange, "requests/change")
	b.ReportMetric(full.meanMS(), "full-read-mean-ms")
	b.ReportMetric(perMin, "idle-requests/min")
	b.ReportMetric(float64(poll.Total())*20, "polling-requests/min")
	b.Logf("%d projects; start: %s", n, short(start))
	b.Logf("idle %s: %d requests (%s), %d status deliveries", idle, idleCounts.Total(), short(idleCounts), idleUpdates)
	b.Logf("one engine.Inspect read (polled every 3 s before): %s; 3 reads took mean %.0f ms, max %.0f ms (a full read with discovery: about what every change cost when Watch re-read everything)", short(poll), full.meanMS(), full.maxMS())
	b.Logf("%d changes: latency mean %.0f ms, max %.0f ms; requests for the re-reads: %s (%.1f per change)", len(lat), lat.meanMS(), lat.maxMS(), short(changes), perChange)
	b.Logf("peer (a plain informer on the Services): mean %.0f ms, max %.0f ms; inspector/peer %.1f× (mean)", peer.meanMS(), peer.maxMS(), lat.meanMS()/max(peer.meanMS(), 0.001))
	fmt.Println() // keep the benchmark line on its own
}

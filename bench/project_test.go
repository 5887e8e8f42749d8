package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kilnctl/kiln/internal/testenv/testcluster"
)

// The project benchmarks run against one kiln platform, installed with
// this config: tenant small holds the 10-project case, scale the rest of
// the 1,000, bulk the projects that `start --all` starts, peer the kubectl
// script's copies of them.
const (
	projCluster = "bench-proj"
	projConfig  = `apiVersion: kiln.dev/v1alpha1
kind: ClusterConfig
spec:
  tenants: [small, scale, bulk, peer]
  domain: bench.example.test
  stacks:
    - {name: web, image: "nginx:1.27-alpine", port: 80, cpu: 50m, memory: 64Mi}
`
	// tmplProject is the project kiln itself creates; every other project
	// of the benchmarks is a copy of its objects under another name.
	tmplTenant, tmplProject = "small", "seedtmpl"
)

// projectTemplate is the objects of a project kiln created (ConfigMap
// kiln-project-P, Secret P-auth, Deployment, Service P and the route,
// Ingress kiln-system/T.P), as
// JSON with the server-set fields removed. Seeding copies them with the
// project and tenant names replaced: the same objects kiln creates, written
// straight to the API with many workers, which is far faster than running
// kiln create 1,000 times (each waits for its Deployment to roll out).
type projectTemplate struct {
	objs map[string]string // by kind
	env  *kilnEnv
}

var projSetup struct {
	once sync.Once
	tmpl *projectTemplate
	err  error
}

// projectPlatform installs the platform and the template project once per
// test binary.
func projectPlatform(b *testing.B, c *testcluster.Cluster) *projectTemplate {
	b.Helper()
	projSetup.once.Do(func() {
		kiln := kilnBinary(b)
		p := startAPIProxy(b, c, "bench")
		// The user's state and keyring outlive the benchmark that installs
		// the platform (later ones run kiln wait with its token dir): not
		// b.TempDir, removed after the run by cleanupBuilds.
		home, err := os.MkdirTemp("", "kiln-bench-user-")
		if err != nil {
			projSetup.err = err
			return
		}
		builds.extra = append(builds.extra, home)
		e := &kilnEnv{bin: kiln, p: p, vars: []string{
			"XDG_STATE_HOME=" + filepath.Join(home, "state"),
			"XDG_DATA_HOME=" + filepath.Join(home, "data"),
			"KILN_KEYRING_PASSPHRASE=bench",
		}}
		dir, err := os.MkdirTemp("", "kiln-bench-proj-")
		if err != nil {
			projSetup.err = err
			return
		}
		defer os.RemoveAll(dir)
		cfg := filepath.Join(dir, "kiln.yaml")
		if err := os.WriteFile(cfg, []byte(projConfig), 0o600); err != nil {
			projSetup.err = err
			return
		}
		if err := e.run("create", "kube", projCluster, "-c", cfg); err != nil {
			projSetup.err = err
			return
		}
		if err := e.run("project", "create", "kube", projCluster, tmplTenant+"/"+tmplProject); err != nil {
			projSetup.err = err
			return
		}
		projSetup.tmpl, projSetup.err = readTemplate(c.Client)
		if projSetup.tmpl != nil {
			projSetup.tmpl.env = e
		}
	})
	if projSetup.err != nil {
		b.Fatal(projSetup.err)
	}
	return projSetup.tmpl
}

func readTemplate(cs kubernetes.Interface) (*projectTemplate, error) {
	ctx := context.Background()
	ns := "kiln-tenant-" + tmplTenant
	t := &projectTemplate{objs: map[string]string{}}
	clean := func(kind, apiVersion string, obj any) error {
		data, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			return err
		}
		m["kind"], m["apiVersion"] = kind, apiVersion
		delete(m, "status")
		md := m["metadata"].(map[string]any)
		for _, k := range []string{"resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"} {
			delete(md, k)
		}
		if a, ok := md["annotations"].(map[string]any); ok {
			delete(a, "deployment.kubernetes.io/revision")
		}
		if kind == "Service" {
			spec := m["spec"].(map[string]any)
			delete(spec, "clusterIP")
			delete(spec, "clusterIPs")
		}
		out, err := json.Marshal(m)
		t.objs[kind] = string(out)
		return err
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "kiln-project-"+tmplProject, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	sec, err := cs.CoreV1().Secrets(ns).Get(ctx, tmplProject+"-auth", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	dep, err := cs.AppsV1().Deployments(ns).Get(ctx, tmplProject, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	svc, err := cs.CoreV1().Services(ns).Get(ctx, tmplProject, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	// The route: Ingress kiln-system/T.P, to kiln-gateway.
	ing, err := cs.NetworkingV1().Ingresses("kiln-system").Get(ctx, tmplTenant+"."+tmplProject, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	for _, x := range []struct {
		kind, version string
		obj           any
	}{{"ConfigMap", "v1", cm}, {"Secret", "v1", sec}, {"Deployment", "apps/v1", dep}, {"Service", "v1", svc}, {"Ingress", "networking.k8s.io/v1", ing}} {
		if err := clean(x.kind, x.version, x.obj); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// object returns the template's kind for project p of tenant tenant; a
// suspended project's spec says so.
func (t *projectTemplate) object(kind, tenant, p string, suspended bool) string {
	s := t.objs[kind]
	// The route's name, T.P, carries the tenant too.
	s = strings.ReplaceAll(s, `"`+tmplTenant+"."+tmplProject+`"`, `"`+tenant+"."+tmplProject+`"`)
	s = strings.ReplaceAll(s, tmplProject, p)
	s = strings.ReplaceAll(s, "kiln-tenant-"+tmplTenant, "kiln-tenant-"+tenant)
	s = strings.ReplaceAll(s, `"kiln.dev/tenant":"`+tmplTenant+`"`, `"kiln.dev/tenant":"`+tenant+`"`)
	s = strings.ReplaceAll(s, "."+tmplTenant+".bench.example.test", "."+tenant+".bench.example.test")
	s = strings.ReplaceAll(s, `\"tenant\":\"`+tmplTenant+`\"`, `\"tenant\":\"`+tenant+`\"`)
	if suspended {
		s = strings.ReplaceAll(s, `\"state\":\"running\"`, `\"state\":\"suspended\"`)
	}
	return s
}

// seed creates projects names of tenant through the API with many
// workers: every object of a running project, or the ConfigMap and Secret
// of a suspended one (what a suspended project keeps).
func (t *projectTemplate) seed(c *testcluster.Cluster, tenant string, names []string, suspended bool) error {
	rc := rest.CopyConfig(c.RESTConfig)
	rc.QPS, rc.Burst = 2000, 4000
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	ctx := context.Background()
	ns := "kiln-tenant-" + tenant
	kinds := []string{"ConfigMap", "Secret", "Deployment", "Service", "Ingress"}
	if suspended {
		kinds = kinds[:2]
	}
	create := func(kind, p string) error {
		data := []byte(t.object(kind, tenant, p, suspended))
		co := metav1.CreateOptions{FieldManager: "kiln"}
		var err error
		switch kind {
		case "ConfigMap":
			var o corev1.ConfigMap
			if err = json.Unmarshal(data, &o); err == nil {
				_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &o, co)
			}
		case "Secret":
			var o corev1.Secret
			if err = json.Unmarshal(data, &o); err == nil {
				_, err = cs.CoreV1().Secrets(ns).Create(ctx, &o, co)
			}
		case "Deployment":
			var o appsv1.Deployment
			if err = json.Unmarshal(data, &o); err == nil {
				_, err = cs.AppsV1().Deployments(ns).Create(ctx, &o, co)
			}
		case "Service":
			var o corev1.Service
			if err = json.Unmarshal(data, &o); err == nil {
				_, err = cs.CoreV1().Services(ns).Create(ctx, &o, co)
			}
		case "Ingress":
			var o networkingv1.Ingress
			if err = json.Unmarshal(data, &o); err == nil {
				_, err = cs.NetworkingV1().Ingresses("kiln-system").Create(ctx, &o, co)
			}
		}
		if err != nil {
			return fmt.Errorf("seed %s %s/%s: %w", kind, ns, p, err)
		}
		return nil
	}
	// A loaded API server times some creates out (10,000 projects are
	// 50,000 objects): each is tried again, and one that landed after all
	// is there.
	retried := func(kind, p string) error {
		var err error
		for try := range 8 {
			if err = create(kind, p); err == nil || apierrors.IsAlreadyExists(errors.Unwrap(err)) {
				return nil
			}
			time.Sleep(time.Duration(try+1) * 500 * time.Millisecond)
		}
		return err
	}
	// Kind by kind, so every project's Secret exists before any of its
	// Deployments (as kiln orders them).
	for _, kind := range kinds {
		if err := parallel(64, len(names), func(i int) error { return retried(kind, names[i]) }); err != nil {
			return err
		}
	}
	return nil
}

// parallel runs f(0..n-1) on workers goroutines and returns the first error.
func parallel(workers, n int, f func(int) error) error {
	var mu sync.Mutex
	var first error
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

func projectNames(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s%04d", prefix, i))
	}
	return out
}

// settle waits (at most limit) until n project Deployments are available,
// and returns how many are.
func settle(c *testcluster.Cluster, n int, limit time.Duration) int {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	avail := 0
	for {
		deps, err := c.Client.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: "kiln.dev/project"})
		if err == nil {
			avail = 0
			for _, d := range deps.Items {
				if d.Status.AvailableReplicas > 0 {
					avail++
				}
			}
			if avail >= n {
				return avail
			}
		}
		select {
		case <-ctx.Done():
			return avail
		case <-time.After(2 * time.Second):
		}
	}
}

// measured is one kiln run: wall time, peak RSS and stdout.
type measured struct {
	wall   time.Duration
	rssKB  int64
	stdout []byte
}

// runMeasured runs kiln like run and reads the process's peak RSS
// (getrusage ru_maxrss of the child, in KiB on Linux) after it exited.
func (e *kilnEnv) runMeasured(args ...string) (measured, error) {
	return e.runMeasuredIn(e.p.Kubeconfig, append(args, "--context", e.p.ContextName)...)
}

// runMeasuredIn is runMeasured against kubeconfig kc, with no --context
// added.
func (e *kilnEnv) runMeasuredIn(kc string, args ...string) (measured, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args = append(args, "--kubeconfig", kc, "--keyring-backend", "file", "--headless", "-o", "json")
	cmd := exec.CommandContext(ctx, e.bin, args...)
	cmd.Env = append(os.Environ(), e.vars...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	m := measured{wall: time.Since(start), stdout: stdout.Bytes()}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		m.rssKB = ru.Maxrss
	}
	if err != nil {
		return m, fmt.Errorf("kiln %v: %w\n--- stdout (tail)\n%s--- stderr\n%s", args, err, tail(stdout.Bytes(), 2000), stderr.Bytes())
	}
	return m, nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// projectStates counts the project events of NDJSON output by state.
func projectStates(out []byte) (int, string) {
	states := map[string]int{}
	n := 0
	for _, line := range bytes.Split(out, []byte("\n")) {
		if !bytes.Contains(line, []byte(`"type":"project"`)) {
			continue
		}
		var ev struct {
			State string `json:"state"`
		}
		if json.Unmarshal(line, &ev) == nil {
			n++
			states[ev.State]++
		}
	}
	var parts []string
	for s, k := range states {
		parts = append(parts, fmt.Sprintf("%s %d", s, k))
	}
	sort.Strings(parts)
	return n, strings.Join(parts, ", ")
}

// BenchmarkProjectScale answers `kiln project list` and `kiln status` at
// growing numbers of projects (running, every object present), and gives
// each size two peers: one `kubectl get` of the eight kinds kiln lists,
// across namespaces by kiln's label selector, as JSON (kubectl-get-all);
// and a script that reads every project with one
// `kubectl get` per object (ConfigMap kiln-project-P, Secret P-auth,
// Deployment, Service, Ingress P), KILN_BENCH_CONCURRENCY processes at a
// time. With $KILN_BENCH_KILN_BEFORE set, that kiln binary answers too
// (list-before, status-before). The sizes are $KILN_BENCH_SCALE_SIZES (default "10,100,1000");
// each size seeds the projects it lacks (tenant scale) and waits at most
// $KILN_BENCH_SETTLE_S for their Deployments. Each kiln op is one kiln
// process, start to exit, through the counting proxy; the peer runs
// $KILN_BENCH_PEER_ITER times (default 1) whatever -benchtime says (its
// further iterations do nothing), since at 1,000 projects it starts 5,000
// processes, and only up to $KILN_BENCH_PEER_MAX projects (default 1000).
//
//	wall-ms      wall time (mean)
//	lists/op     LIST requests (collection GETs without watch)
//	requests/op  every request, reads and writes
//	rss-MB       the process's peak RSS (ru_maxrss), the max over ops; for
//	             the peer, of its largest kubectl process
//	projects     the projects the output reported (the peer: read)
//	runs         the peer's runs (b.N counts its idle iterations too)
//
// lists/op grows with the pages, not the projects: list and status read
// every project object with one paginated LIST per kind (1,000 objects a
// page). The budgets (logged as met or missed) are 1 s and 150 MB at 1,000
// projects, 2 s and 250 MB at 10,000.
func BenchmarkProjectScale(b *testing.B) {
	c := needCluster(b)
	tmpl := projectPlatform(b, c)
	sizes := envInts("KILN_BENCH_SCALE_SIZES", []int{10, 100, envInt("KILN_BENCH_PROJECTS", 1000)})
	settleLimit := time.Duration(envInt("KILN_BENCH_SETTLE_S", 150)) * time.Second
	conc := envInt("KILN_BENCH_CONCURRENCY", 8)
	peerIter := envInt("KILN_BENCH_PEER_ITER", 1)
	peerMax := envInt("KILN_BENCH_PEER_MAX", 1000)
	p := startAPIProxy(b, c, "bench")
	e := &kilnEnv{bin: tmpl.env.bin, p: p, vars: tmpl.env.vars}
	// The timed runs of kiln and of kubectl get reach the API server
	// straight (direct), the same cluster and context name as through the
	// proxy: the proxy's TLS and HTTP/2 on both sides cost as much CPU as a
	// tenth of the API server's, on the same two cores. One more run of
	// each, untimed, goes through the proxy for its requests.
	direct := directKubeconfig(b, c, p.ContextName)
	_, kubectlErr := exec.LookPath("kubectl")
	// An older kiln, when named, answers too (list-before, status-before):
	// before and after a change in the same run.
	before := os.Getenv("KILN_BENCH_KILN_BEFORE")
	// KILN_BENCH_SCALE_HOLD=FILE: after the sizes, write to FILE the
	// command line of a kiln run against this cluster, and keep the
	// cluster up until FILE is removed (for profiling by hand).
	if hold := os.Getenv("KILN_BENCH_SCALE_HOLD"); hold != "" {
		defer holdCluster(b, hold, e, direct)
	}
	for _, n := range sizes {
		have, err := projectRefs(c)
		if err != nil {
			b.Fatal(err)
		}
		if len(have) < n {
			start := time.Now()
			next := len(have)
			if err := tmpl.seed(c, "scale", projectNames("scale", next, n), false); err != nil {
				b.Fatal(err)
			}
			b.Logf("seeded %d projects (%d objects) through the API in %s", n-next, 5*(n-next), time.Since(start).Round(time.Millisecond))
			if have, err = projectRefs(c); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		avail := settle(c, len(have), settleLimit)
		b.Logf("%d projects: %d Deployments available after %s more (limit %s)", len(have), avail, time.Since(start).Round(time.Second), settleLimit)
		cmds := []string{"list", "status"}
		if before != "" {
			cmds = append(cmds, "list-before", "status-before")
		}
		for _, cmd := range cmds {
			b.Run(fmt.Sprintf("%s/projects=%d", cmd, n), func(b *testing.B) {
				e := e
				if strings.HasSuffix(cmd, "-before") {
					e = &kilnEnv{bin: before, p: p, vars: tmpl.env.vars}
				}
				args := []string{"project", "list", "kube", projCluster}
				if strings.HasPrefix(cmd, "status") {
					args = []string{"status", "kube", projCluster}
				}
				var walls durations
				var rss int64
				var got int
				var states string
				for b.Loop() {
					m, err := e.runMeasuredIn(direct, append(args, "--context", p.ContextName)...)
					if err != nil {
						b.Fatal(err)
					}
					walls = append(walls, m.wall)
					rss = max(rss, m.rssKB)
					got, states = projectStates(m.stdout)
				}
				// One more run, untimed, through the proxy: its requests.
				p.take()
				if _, err := e.runMeasured(args...); err != nil {
					b.Fatal(err)
				}
				total := p.take()
				reportScale(b, walls, total, 1, rss, got)
				b.Logf("%s with %d projects (%s): %d ops: %s", cmd, got, states, len(walls), short(total))
				if budget, ok := scaleBudgets[n]; ok {
					verdict := "met"
					if walls.meanMS() > budget.ms || float64(rss)/1024 > budget.mb {
						verdict = "MISSED"
					}
					b.Logf("budget at %d projects (%.0f ms, %.0f MB): %s (%.0f ms mean, %.1f MB peak)", n, budget.ms, budget.mb, verdict, walls.meanMS(), float64(rss)/1024)
				}
			})
		}
		b.Run(fmt.Sprintf("kubectl-get-all/projects=%d", n), func(b *testing.B) {
			if kubectlErr != nil {
				b.Skip("kubectl not on PATH")
			}
			k := &kubectlScript{p: p, kubeconfig: direct}
			args := []string{"get", peerKinds, "-A", "-l", "kiln.dev/cluster=" + projCluster + ",kiln.dev/project", "-o", "json"}
			var walls durations
			var rss int64
			for b.Loop() {
				start := time.Now()
				kb, err := k.runRSSDiscard(args...)
				if err != nil {
					b.Fatal(err)
				}
				walls = append(walls, time.Since(start))
				rss = max(rss, kb)
			}
			p.take()
			if _, err := (&kubectlScript{p: p}).runRSSDiscard(args...); err != nil {
				b.Fatal(err)
			}
			total := p.take()
			reportScale(b, walls, total, 1, rss, len(have))
			b.Logf("kubectl %s, %d projects: %d runs: %s", strings.Join(args, " "), len(have), len(walls), short(total))
		})
		b.Run(fmt.Sprintf("kubectl-get/projects=%d", n), func(b *testing.B) {
			if kubectlErr != nil {
				b.Skip("kubectl not on PATH")
			}
			if n > peerMax {
				b.Skipf("the script runs up to KILN_BENCH_PEER_MAX=%d projects (%d processes per run here)", peerMax, 5*n)
			}
			k := &kubectlScript{p: p}
			var walls durations
			var total apiCounts
			var rss int64
			i := 0
			p.take()
			for b.Loop() {
				i++
				if i > peerIter {
					continue
				}
				start := time.Now()
				var mu sync.Mutex
				err := parallel(conc, len(have)*5, func(j int) error {
					pr := have[j/5]
					obj := []string{"configmap/kiln-project-" + pr.project, "secret/" + pr.project + "-auth",
						"deployment/" + pr.project, "service/" + pr.project, "ingress/" + pr.tenant + "." + pr.project}[j%5]
					ns := platformTenantNS(pr.tenant)
					if j%5 == 4 {
						ns = "kiln-system" // the route
					}
					kb, err := k.runRSS("-n", ns, "get", obj, "-o", "json", "--ignore-not-found")
					mu.Lock()
					rss = max(rss, kb)
					mu.Unlock()
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
				walls = append(walls, time.Since(start))
				total.add(p.take())
			}
			reportScale(b, walls, total, len(walls), rss, len(have))
			b.ReportMetric(float64(len(walls)), "runs")
			b.Logf("kubectl get per object, %d projects, %d processes per run, %d at a time: %d runs: %s", len(have), 5*len(have), conc, len(walls), short(total))
		})
	}
}

// peerKinds are the kinds kiln's project snapshot lists, for the
// kubectl-get-all peer: one `kubectl get` of all of them across
// namespaces, by kiln's label selector (kubectl pages its LISTs, 500
// objects a page, as kiln does).
const peerKinds = "configmaps,secrets,deployments,services,ingresses,leases,endpointslices,pods"

// scaleBudgets are each kiln command's budgets by number of projects:
// issue 14's at 1,000, issue 30's at 10,000.
var scaleBudgets = map[int]struct{ ms, mb float64 }{1000: {1000, 150}, 10000: {2000, 250}}

// projectRef names one project.
type projectRef struct{ tenant, project string }

// projectRefs lists every project on the bench cluster: its spec
// ConfigMaps (kiln-project-P, labelled kiln.dev/project) in every tenant
// namespace.
func projectRefs(c *testcluster.Cluster) ([]projectRef, error) {
	cms, err := c.Client.CoreV1().ConfigMaps("").List(context.Background(), metav1.ListOptions{LabelSelector: "kiln.dev/project"})
	if err != nil {
		return nil, fmt.Errorf("list project ConfigMaps: %w", err)
	}
	var out []projectRef
	for _, cm := range cms.Items {
		if p, ok := strings.CutPrefix(cm.Name, "kiln-project-"); ok {
			if t, ok := strings.CutPrefix(cm.Namespace, "kiln-tenant-"); ok {
				out = append(out, projectRef{t, p})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].tenant+"/"+out[i].project < out[j].tenant+"/"+out[j].project })
	return out, nil
}

func platformTenantNS(t string) string { return "kiln-tenant-" + t }

// BenchmarkProjectBulkStart starts 100 suspended projects, by kiln and by
// the kubectl peer, in the same run on the same control plane:
//
//	kiln:    kiln project start kube NAME --all --tenant bulk --concurrency N
//	kubectl: N workers, each per project: kubectl apply -f (the project's
//	         ConfigMap, Secret, Deployment, Service, Ingress: the objects
//	         kiln writes), kubectl rollout status, kubectl wait (a ready
//	         endpoint)
//
//	unordered: the cluster's own limit — one kubectl apply --server-side
//	         of every project's objects at once, unordered, then one
//	         informer per kind until every Deployment is available and
//	         every Service has a ready endpoint
//
// The log gives kiln's time per step and the ratios kiln ÷ unordered (goal
// ≤ 1.10) and kiln ÷ script (goal < 1).
//
// kiln's projects start from their ConfigMap and Secret (what suspend
// keeps); the peers' from nothing. Between iterations kiln's projects are
// suspended again and the peer's deleted (not timed).
func BenchmarkProjectBulkStart(b *testing.B) {
	c := needCluster(b)
	if _, err := exec.LookPath("kubectl"); err != nil {
		b.Skip("kubectl not on PATH")
	}
	tmpl := projectPlatform(b, c)
	n := envInt("KILN_BENCH_BULK", 100)
	conc := envInt("KILN_BENCH_CONCURRENCY", 8)
	if err := tmpl.seed(c, "bulk", projectNames("bulk", 0, n), true); err != nil {
		b.Fatal(err)
	}
	b.Run(fmt.Sprintf("kiln/projects=%d/concurrency=%d", n, conc), func(b *testing.B) {
		p := startAPIProxy(b, c, "bench")
		e := &kilnEnv{bin: tmpl.env.bin, p: p, vars: tmpl.env.vars}
		args := []string{"project", "start", "kube", projCluster, "--all", "--tenant", "bulk", "--concurrency", strconv.Itoa(conc)}
		var walls durations
		var total apiCounts
		var rss int64
		var breakdownLine string
		first := true
		for b.Loop() {
			b.StopTimer()
			if !first {
				if err := e.run("project", "suspend", "kube", projCluster, "--all", "--tenant", "bulk", "--concurrency", strconv.Itoa(conc)); err != nil {
					b.Fatal(err)
				}
			}
			first = false
			p.take()
			b.StartTimer()
			m, err := e.runMeasured(args...)
			if err != nil {
				b.Fatal(err)
			}
			walls = append(walls, m.wall)
			rss = max(rss, m.rssKB)
			total.add(p.take())
			breakdownLine = logLine(m.stdout, "per step: ")
		}
		out, err := exec.Command(e.bin, "project", "list", "kube", projCluster, "--tenant", "bulk", "-o", "json",
			"--context", p.ContextName, "--kubeconfig", p.Kubeconfig, "--headless").Output()
		if err != nil {
			b.Fatal(err)
		}
		got, states := projectStates(out)
		if !strings.Contains(states, fmt.Sprintf("running %d", n)) {
			b.Errorf("after start --all, %d projects: %s", got, states)
		}
		k := float64(len(walls))
		b.ReportMetric(walls.meanMS(), "wall-ms")
		b.ReportMetric(float64(total.OtherWrites()+total.LeaseWrites())/k, "writes/op")
		b.ReportMetric(float64(total.Total())/k, "requests/op")
		b.ReportMetric(float64(rss)/1024, "rss-MB")
		b.Logf("kiln start --all: %d ops: %s; then %s", len(walls), short(total), states)
		b.Logf("kiln start --all, where the time went (last run): %s", breakdownLine)
		bulkWalls["kiln"] = walls.meanMS()
	})
	// The peers' manifests: every project's objects, one List per project.
	dir := b.TempDir()
	names := projectNames("peer", 0, n)
	for _, name := range names {
		var items []string
		for _, kind := range []string{"ConfigMap", "Secret", "Deployment", "Service", "Ingress"} {
			items = append(items, tmpl.object(kind, "peer", name, false))
		}
		list := `{"apiVersion":"v1","kind":"List","items":[` + strings.Join(items, ",") + `]}`
		if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(list), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	const ns = "kiln-tenant-peer"
	b.Run(fmt.Sprintf("kubectl/projects=%d/concurrency=%d", n, conc), func(b *testing.B) {
		p := startAPIProxy(b, c, "bench")
		k := &kubectlScript{p: p}
		var walls durations
		var total apiCounts
		first := true
		for b.Loop() {
			b.StopTimer()
			if !first {
				if err := k.run("delete", "-f", dir, "--wait=true", "--cascade=foreground", "--timeout=3m"); err != nil {
					b.Fatal(err)
				}
			}
			first = false
			p.take()
			b.StartTimer()
			start := time.Now()
			err := parallel(conc, n, func(i int) error {
				name := names[i]
				if err := k.run("apply", "-f", filepath.Join(dir, name+".json")); err != nil {
					return err
				}
				if err := k.run("-n", ns, "rollout", "status", "deployment/"+name, "--timeout=3m"); err != nil {
					return err
				}
				return k.run("-n", ns, "wait", "endpointslice", "-l", "kubernetes.io/service-name="+name,
					"--for=jsonpath={.endpoints[0].conditions.ready}=true", "--timeout=3m")
			})
			if err != nil {
				b.Fatal(err)
			}
			walls = append(walls, time.Since(start))
			total.add(p.take())
		}
		kk := float64(len(walls))
		b.ReportMetric(walls.meanMS(), "wall-ms")
		b.ReportMetric(float64(total.OtherWrites()+total.LeaseWrites())/kk, "writes/op")
		b.ReportMetric(float64(total.Total())/kk, "requests/op")
		b.Logf("kubectl script: %d ops: %s", len(walls), short(total))
		bulkWalls["script"] = walls.meanMS()
		// The script's objects go before the unordered peer applies the
		// same ones again (not timed).
		if err := k.run("delete", "-f", dir, "--wait=true", "--cascade=foreground", "--timeout=3m"); err != nil {
			b.Fatal(err)
		}
	})
	// The cluster's own limit: every project's objects applied at once,
	// unordered, by one kubectl apply --server-side of all manifests, then
	// one informer per kind waiting until every Deployment is available
	// and every Service has a ready endpoint (what kiln's Ingress step
	// confirms). No lease, no order, no verification between objects.
	b.Run(fmt.Sprintf("unordered/projects=%d/concurrency=%d", n, conc), func(b *testing.B) {
		p := startAPIProxy(b, c, "bench")
		k := &kubectlScript{p: p}
		var walls durations
		var total apiCounts
		first := true
		for b.Loop() {
			b.StopTimer()
			if !first {
				if err := k.run("delete", "-f", dir, "--wait=true", "--cascade=foreground", "--timeout=3m"); err != nil {
					b.Fatal(err)
				}
			}
			first = false
			p.take()
			b.StartTimer()
			start := time.Now()
			if err := k.run("apply", "--server-side", "--field-manager=bench", "-f", dir); err != nil {
				b.Fatal(err)
			}
			if err := waitAllReady(p, ns, names, 3*time.Minute); err != nil {
				b.Fatal(err)
			}
			walls = append(walls, time.Since(start))
			total.add(p.take())
		}
		kk := float64(len(walls))
		b.ReportMetric(walls.meanMS(), "wall-ms")
		b.ReportMetric(float64(total.OtherWrites()+total.LeaseWrites())/kk, "writes/op")
		b.ReportMetric(float64(total.Total())/kk, "requests/op")
		b.Logf("unordered apply + watch: %d ops: %s", len(walls), short(total))
		bulkWalls["unordered"] = walls.meanMS()
		if kl, u, sc := bulkWalls["kiln"], bulkWalls["unordered"], bulkWalls["script"]; kl > 0 && u > 0 && sc > 0 {
			b.Logf("ratios: kiln ÷ unordered limit = %.2f (goal ≤ 1.10), kiln ÷ ordered script = %.2f (goal < 1)", kl/u, kl/sc)
		}
	})
}

// bulkWalls are the mean walls of one BenchmarkProjectBulkStart run, by
// peer, for the ratios it logs.
var bulkWalls = map[string]float64{}

// waitAllReady waits until every Deployment of names in ns is available
// and every Service of names has a ready endpoint: one informer per kind
// (through the proxy, so counted), judged on every event.
func waitAllReady(p *apiProxy, ns string, names []string, limit time.Duration) error {
	rc, err := clientcmd.BuildConfigFromFlags("", p.Kubeconfig)
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = 200, 400
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	kick := make(chan struct{}, 1)
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify(kick) },
		UpdateFunc: func(any, any) { notify(kick) },
		DeleteFunc: func(any) { notify(kick) },
	}
	d, s := cs.AppsV1().Deployments(ns), cs.DiscoveryV1().EndpointSlices(ns)
	deps := cache.NewSharedIndexInformer(&cache.ListWatch{
		ListFunc:  func(o metav1.ListOptions) (runtime.Object, error) { return d.List(ctx, o) },
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) { return d.Watch(ctx, o) },
	}, &appsv1.Deployment{}, 0, cache.Indexers{})
	slices := cache.NewSharedIndexInformer(&cache.ListWatch{
		ListFunc:  func(o metav1.ListOptions) (runtime.Object, error) { return s.List(ctx, o) },
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) { return s.Watch(ctx, o) },
	}, &discoveryv1.EndpointSlice{}, 0, cache.Indexers{})
	for _, i := range []cache.SharedIndexInformer{deps, slices} {
		if _, err := i.AddEventHandler(h); err != nil {
			return err
		}
		go i.Run(ctx.Done())
	}
	for {
		avail, ready := 0, 0
		for _, o := range deps.GetStore().List() {
			dep := o.(*appsv1.Deployment)
			if want[dep.Name] && dep.Status.ObservedGeneration >= dep.Generation && dep.Status.AvailableReplicas >= 1 && dep.Status.UpdatedReplicas >= 1 {
				avail++
			}
		}
		seen := map[string]bool{}
		for _, o := range slices.GetStore().List() {
			es := o.(*discoveryv1.EndpointSlice)
			svc := es.Labels[discoveryv1.LabelServiceName]
			if !want[svc] || seen[svc] {
				continue
			}
			for _, ep := range es.Endpoints {
				if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
					seen[svc] = true
					ready++
					break
				}
			}
		}
		if avail == len(names) && ready == len(names) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("unordered peer: %d/%d Deployments available, %d/%d Services with a ready endpoint after %s", avail, len(names), ready, len(names), limit)
		case <-kick:
		}
	}
}

func notify(kick chan struct{}) {
	select {
	case kick <- struct{}{}:
	default:
	}
}

// logLine is the message of the last log event of NDJSON output that
// contains sub.
func logLine(out []byte, sub string) string {
	msg := ""
	for _, line := range bytes.Split(out, []byte("\n")) {
		if !bytes.Contains(line, []byte(`"type":"log"`)) || !bytes.Contains(line, []byte(sub)) {
			continue
		}
		var ev struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(line, &ev) == nil {
			msg = ev.Message
		}
	}
	return msg
}

// short is the counts with writes grouped by verb and resource type,
// not by object (hundreds of projects make one line per object unreadable).
func short(c apiCounts) string {
	group := func(m map[string]int) string {
		g := map[string]int{}
		for k, v := range m {
			if i := strings.Index(k, "/"); i >= 0 {
				k = k[:i]
			}
			g[k] += v
		}
		var parts []string
		for k, v := range g {
			parts = append(parts, fmt.Sprintf("%s ×%d", k, v))
		}
		sort.Strings(parts)
		return strings.Join(parts, ", ")
	}
	return fmt.Sprintf("reads %d (lists %d, watches %d); writes %d [%s]", c.Reads, c.Lists, c.Watches,
		c.LeaseWrites()+c.OtherWrites(), group(c.Writes))
}

// envInts reads a comma-separated list of positive integers, def when
// unset or malformed.
func envInts(name string, def []int) []int {
	var out []int
	for _, f := range strings.Split(os.Getenv(name), ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v <= 0 {
			return def
		}
		out = append(out, v)
	}
	return out
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// reportScale reports one scale case's figures per op: mean wall time,
// LISTs, requests and writes sent, the peak RSS of its processes and how
// many projects it found.
func reportScale(b *testing.B, walls durations, total apiCounts, counted int, rss int64, projects int) {
	b.Helper()
	k := float64(counted)
	b.ReportMetric(walls.meanMS(), "wall-ms")
	b.ReportMetric(float64(total.Lists)/k, "lists/op")
	b.ReportMetric(float64(total.Total())/k, "requests/op")
	b.ReportMetric(float64(total.OtherWrites()+total.LeaseWrites())/k, "writes/op")
	b.ReportMetric(float64(rss)/1024, "rss-MB")
	b.ReportMetric(float64(projects), "projects")
}

// directKubeconfig writes the cluster's own kubeconfig with its context
// named name, and returns its path.
func directKubeconfig(b *testing.B, c *testcluster.Cluster, name string) string {
	b.Helper()
	cfg, err := clientcmd.LoadFromFile(c.KubeconfigPath)
	if err != nil {
		b.Fatal(err)
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		b.Fatalf("%s has no current context", c.KubeconfigPath)
	}
	cfg.Contexts = map[string]*clientcmdapi.Context{name: ctx}
	cfg.CurrentContext = name
	path := filepath.Join(b.TempDir(), "kubeconfig-direct")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		b.Fatal(err)
	}
	return path
}

// holdCluster writes to file an env and kiln command lines that reach the
// bench's cluster (through the proxy, and straight), and waits until file
// is removed.
func holdCluster(b *testing.B, file string, e *kilnEnv, direct string) {
	var sb strings.Builder
	for _, v := range e.vars {
		fmt.Fprintf(&sb, "export %s\n", shellQuote(v))
	}
	fmt.Fprintf(&sb, "kiln_args=%s\n", shellQuote(strings.Join([]string{"--kubeconfig", e.p.Kubeconfig, "--context", e.p.ContextName, "--keyring-backend", "file", "--headless", "-o", "json"}, " ")))
	fmt.Fprintf(&sb, "kiln_direct_args=%s\n", shellQuote(strings.Join([]string{"--kubeconfig", direct, "--context", e.p.ContextName, "--keyring-backend", "file", "--headless", "-o", "json"}, " ")))
	fmt.Fprintf(&sb, "kiln_bin=%s\n", shellQuote(e.bin))
	if err := os.WriteFile(file, []byte(sb.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	b.Logf("holding the cluster until %s is removed", file)
	for {
		if _, err := os.Stat(file); err != nil {
			return
		}
		time.Sleep(time.Second)
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

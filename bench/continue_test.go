package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kilnctl/kiln/internal/testenv/testcluster"
)

// BenchmarkCreateContinueReady re-runs an install on a cluster whose
// platform is installed and ready: what automation does on every pipeline
// ("create or continue"). Each op is one run, start to exit:
//
//	kiln:          kiln create kube NAME --continue
//	kubectl-apply: the peer script on the same objects (testdata/platform.yaml):
//	               kubectl apply -f; kubectl rollout status; kubectl wait (a
//	               ready endpoint)
//	kubectl-apply-server-side:
//	               the same with kubectl apply --server-side --force-conflicts
//	               --field-manager=kiln-bench: no OpenAPI download and no
//	               client-side patch computation, as kiln applies
//
// Besides the wall time it reports the API requests of each op, counted by
// a proxy in front of the API server. On a converged cluster kiln's goal is
// no persisted write besides its lock's Lease.
//
//	mutating/op        persisted writes (POST/PUT/PATCH/DELETE)
//	lease-writes/op    of those, the lock Lease
//	other-writes/op    of those, everything else (goal: 0)
//	dryrun/op          dryRun=All applies (compared, never persisted)
//	reads/op           GET requests: get, list and watch
func BenchmarkCreateContinueReady(b *testing.B) {
	c := needCluster(b)
	b.Run("kiln", func(b *testing.B) {
		kiln := kilnBinary(b)
		p := startAPIProxy(b, c, "bench")
		e := newKilnEnv(b, kiln, p)
		const name = "bench-continue"
		if err := e.run("create", "kube", name); err != nil {
			b.Fatal(err)
		}
		b.Logf("fresh create (setup, not measured): %s", p.take())
		b.Cleanup(func() {
			if err := e.run("destroy", "kube", name, "--yes"); err != nil {
				b.Error(err)
			}
		})
		rerun(b, p, func() error { return e.run("create", "kube", name, "--continue") })
	})
	b.Run("kubectl-apply", func(b *testing.B) {
		k := newKubectlScript(b, c)
		if err := k.install(); err != nil {
			b.Fatal(err)
		}
		b.Logf("first apply (setup, not measured): %s", k.p.take())
		b.Cleanup(func() {
			if err := k.uninstall(); err != nil {
				b.Error(err)
			}
		})
		rerun(b, k.p, k.install)
	})
	b.Run("kubectl-apply-server-side", func(b *testing.B) {
		k := newKubectlScript(b, c)
		k.serverSide = true
		if err := k.install(); err != nil {
			b.Fatal(err)
		}
		b.Logf("first apply (setup, not measured): %s", k.p.take())
		b.Cleanup(func() {
			if err := k.uninstall(); err != nil {
				b.Error(err)
			}
		})
		rerun(b, k.p, k.install)
	})
}

// rerun measures op once per iteration and reports its API requests.
func rerun(b *testing.B, p *apiProxy, op func() error) {
	var total apiCounts
	for b.Loop() {
		if err := op(); err != nil {
			b.Fatal(err)
		}
		total.add(p.take())
	}
	n := float64(b.N)
	b.ReportMetric(float64(total.LeaseWrites()+total.OtherWrites())/n, "mutating/op")
	b.ReportMetric(float64(total.LeaseWrites())/n, "lease-writes/op")
	b.ReportMetric(float64(total.OtherWrites())/n, "other-writes/op")
	b.ReportMetric(float64(total.DryRuns())/n, "dryrun/op")
	b.ReportMetric(float64(total.Reads)/n, "reads/op")
	b.Logf("%d ops in total: %s", b.N, total)
}

// BenchmarkCreateDestroy is one fresh install and removal of the platform,
// by kiln and by the kubectl peer over the same objects:
//
//	kiln:    kiln create kube NAME; kiln destroy kube NAME --yes
//	kubectl: kubectl apply -f; kubectl rollout status; kubectl wait (a ready
//	         endpoint); kubectl delete -f --cascade=foreground --wait
//
// Both go through the counting proxy. kiln does more than the script —
// discovery, key generation, token directory and keyring, the lock,
// read-back of kiln-auth and kiln-config, each object confirmed before the
// next — so this is context for the continue numbers, not a like-for-like
// race.
func BenchmarkCreateDestroy(b *testing.B) {
	c := needCluster(b)
	b.Run("kiln", func(b *testing.B) {
		kiln := kilnBinary(b)
		p := startAPIProxy(b, c, "bench")
		const name = "bench-kiln"
		cycle(b, p, func(step string) error {
			// A fresh user for each op: its own token dir and keyring.
			e := newKilnEnv(b, kiln, p)
			if step == "create" {
				return e.run("create", "kube", name)
			}
			return e.run("destroy", "kube", name, "--yes")
		})
	})
	b.Run("kubectl", func(b *testing.B) {
		k := newKubectlScript(b, c)
		cycle(b, k.p, func(step string) error {
			if step == "create" {
				return k.install()
			}
			return k.uninstall()
		})
	})
}

// nsQuiet is how long after one removal the next starts (untimed). The
// namespace controller processes a deleted namespace 5 s after the event
// that marked it (its namespaceDeletionGracePeriod), and every update of
// a terminating namespace queues its name again 5 s later. A queued name
// outlives the namespace: a namespace of the same name deleted within
// those 5 s is processed when the stale entry fires, earlier than its own
// 5 s, by however long the create between the two removals took. Without
// the pause a destroy measured its predecessor's timing (a slower create
// made the next removal faster), not its own.
const nsQuiet = 6 * time.Second

// lastRemoval is when the last removal of any sub-benchmark ended.
var lastRemoval time.Time

// cycle times op("create"), then op("destroy"), once per iteration, and
// reports both halves and their persisted API writes. Each destroy starts
// at least nsQuiet after the previous one ended.
func cycle(b *testing.B, p *apiProxy, op func(step string) error) {
	var create, destroy durations
	var cw, dw apiCounts
	for b.Loop() {
		start := time.Now()
		if err := op("create"); err != nil {
			b.Fatal(err)
		}
		created := time.Since(start)
		cw.add(p.take())
		b.StopTimer()
		time.Sleep(time.Until(lastRemoval.Add(nsQuiet)))
		b.StartTimer()
		mid := time.Now()
		if err := op("destroy"); err != nil {
			b.Fatal(err)
		}
		lastRemoval = time.Now()
		create = append(create, created)
		destroy = append(destroy, lastRemoval.Sub(mid))
		dw.add(p.take())
	}
	n := float64(b.N)
	b.ReportMetric(create.meanMS(), "create-ms")
	b.ReportMetric(destroy.meanMS(), "destroy-ms")
	b.ReportMetric(float64(cw.LeaseWrites()+cw.OtherWrites())/n, "create-writes/op")
	b.ReportMetric(float64(dw.LeaseWrites()+dw.OtherWrites())/n, "destroy-writes/op")
	b.Logf("create, %d ops: %s", b.N, cw)
	b.Logf("destroy, %d ops: %s", b.N, dw)
}

// kubectlScript is the peer: what a script author writes with kubectl to
// install and remove the objects kiln installs, through the counting proxy.
type kubectlScript struct {
	p *apiProxy
	// kubeconfig, when set, is used instead of the proxy's.
	kubeconfig string
	manifests  string
	// serverSide applies with kubectl apply --server-side (field manager
	// kiln-bench, taking over fields another manager set).
	serverSide bool
}

func newKubectlScript(b *testing.B, c *testcluster.Cluster) *kubectlScript {
	b.Helper()
	if _, err := exec.LookPath("kubectl"); err != nil {
		b.Skip("kubectl not on PATH")
	}
	manifests, err := filepath.Abs(filepath.Join("testdata", "platform.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	return &kubectlScript{p: startAPIProxy(b, c, "bench"), manifests: manifests}
}

// install applies and waits until the gateway rolled out and its Service
// has a ready endpoint, as kiln's create does.
func (k *kubectlScript) install() error {
	apply := []string{"apply", "-f", k.manifests}
	if k.serverSide {
		apply = append(apply, "--server-side", "--force-conflicts", "--field-manager=kiln-bench")
	}
	if err := k.run(apply...); err != nil {
		return err
	}
	if err := k.run("-n", "kiln-system", "rollout", "status", "deployment/kiln-gateway", "--timeout=2m"); err != nil {
		return err
	}
	return k.run("-n", "kiln-system", "wait", "endpointslice",
		"-l", "kubernetes.io/service-name=kiln-gateway",
		"--for=jsonpath={.endpoints[0].conditions.ready}=true", "--timeout=2m")
}

// uninstall deletes everything and waits until it is gone (foreground, as
// kiln deletes).
func (k *kubectlScript) uninstall() error {
	return k.run("delete", "-f", k.manifests, "--cascade=foreground", "--wait=true", "--timeout=2m")
}

// runRSS runs kubectl like run and returns the process's peak RSS (KiB).
func (k *kubectlScript) runRSS(args ...string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", k.kc()}, args...)...)
	out, err := cmd.CombinedOutput()
	var kb int64
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			kb = ru.Maxrss
		}
	}
	if err != nil {
		return kb, fmt.Errorf("kubectl %v: %w\n%s", args, err, out)
	}
	return kb, nil
}

// runRSSDiscard is runRSS with stdout thrown away (not held in the
// benchmark's memory: a `kubectl get -A -o json` of 10,000 projects prints
// hundreds of MB).
func (k *kubectlScript) runRSSDiscard(args ...string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", k.kc()}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr // stdout: the null device
	err := cmd.Run()
	var kb int64
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			kb = ru.Maxrss
		}
	}
	if err != nil {
		return kb, fmt.Errorf("kubectl %v: %w\n%s", args, err, stderr.Bytes())
	}
	return kb, nil
}

func (k *kubectlScript) kc() string {
	if k.kubeconfig != "" {
		return k.kubeconfig
	}
	return k.p.Kubeconfig
}

func (k *kubectlScript) run(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", k.kc()}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl %v: %w\n%s", args, err, out)
	}
	return nil
}

// kilnEnv is one user's machine: its own state and keyring dirs, and a
// kubeconfig that reaches the cluster through the counting proxy.
type kilnEnv struct {
	bin  string
	p    *apiProxy
	vars []string
}

func newKilnEnv(b *testing.B, bin string, p *apiProxy) *kilnEnv {
	d := b.TempDir()
	return &kilnEnv{bin: bin, p: p, vars: []string{
		"XDG_STATE_HOME=" + filepath.Join(d, "state"),
		"XDG_DATA_HOME=" + filepath.Join(d, "data"),
		"KILN_KEYRING_PASSPHRASE=bench",
	}}
}

// run runs kiln headless with NDJSON events to completion, on the bench
// cluster's context.
func (e *kilnEnv) run(args ...string) error {
	return e.runIn(3*time.Minute, e.p.Kubeconfig, append(args, "--context", e.p.ContextName)...)
}

// The kiln binary is $KILN_BENCH_KILN when set (bench/run.sh builds it
// once for all its runs), else built from the working tree once per test
// binary, on first use.
var builds struct {
	once  sync.Once
	dir   string
	kiln  string
	err   error
	extra []string // more directories to remove after the run
}

func kilnBinary(b *testing.B) string {
	b.Helper()
	builds.once.Do(func() {
		if bin := os.Getenv("KILN_BENCH_KILN"); bin != "" {
			if _, err := os.Stat(bin); err != nil {
				builds.err = fmt.Errorf("KILN_BENCH_KILN: %w", err)
			}
			builds.kiln = bin
			return
		}
		root, err := testcluster.RepoRoot()
		if err != nil {
			builds.err = err
			return
		}
		if builds.dir, err = os.MkdirTemp("", "kiln-bench-bin-"); err != nil {
			builds.err = err
			return
		}
		builds.kiln = filepath.Join(builds.dir, "kiln")
		cmd := exec.Command("go", "build", "-o", builds.kiln, "./cmd/kiln")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			builds.err = fmt.Errorf("go build ./cmd/kiln: %w\n%s", err, out)
		}
	})
	if builds.err != nil {
		b.Fatal(builds.err)
	}
	return builds.kiln
}

// cleanupBuilds removes the built binaries (TestMain, after the run).
func cleanupBuilds() {
	if builds.dir != "" {
		_ = os.RemoveAll(builds.dir)
	}
	for _, d := range builds.extra {
		_ = os.RemoveAll(d)
	}
}

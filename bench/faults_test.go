package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kilnctl/kiln/internal/testenv/faultproxy"
	"github.com/kilnctl/kiln/internal/testenv/testcluster"
)

// BenchmarkFaultCompletion is the share of runs that complete (exit 0)
// through an API proxy failing a share of requests the way loaded API
// servers do: 500, 429 with Retry-After, a reset before the request, a
// write whose answer is lost, a watch cut after 0.2–2 s
// (faultproxy.Uniform). Each iteration is one run of each command, on a
// platform installed and ready beforehand without faults:
//
//	kiln:    kiln create kube NAME --continue; then kiln project suspend or
//	         start (alternating) of one project
//	kubectl: kubectl apply --server-side -f (the same objects as kiln's
//	         platform, testdata/platform.yaml); kubectl rollout status
//
// Metrics: continue-%, project-% (kiln), apply-rollout-% (kubectl): runs
// that exited 0, in percent; faults/run: faults the proxy injected per
// iteration. The goal is 100% for kiln, reported beside kubectl. The rates
// are $KILN_BENCH_FAULT_RATES (percent, default "3,10").
//
// Then the scenarios of $KILN_BENCH_FAULT_SCENARIOS (default
// "mix,storm,latency,restart"; "none" for none), the same commands under:
//
//	mix=20%:     20% of requests failed, every kind, watch-gone included
//	             (faultproxy.Mix)
//	storm:       every watch answered 410 Expired (faultproxy.WatchGone at
//	             rate 1): a relist storm
//	latency=2s:  every request 2 s late (kiln with --discovery-timeout 30s:
//	             its 5 s default is a few requests at this latency)
//	restart:     the API server killed (SIGKILL) once the command has sent
//	             its 5th request, and started again 8 s later; through the
//	             proxy, which answers 502 while the server is down, as a
//	             load balancer in front of a control plane does. Metric
//	             restarts/run instead of faults/run (kiln: one per command).
func BenchmarkFaultCompletion(b *testing.B) {
	c := needCluster(b)
	var scenarios []faultScenario
	for _, rate := range envInts("KILN_BENCH_FAULT_RATES", []int{3, 10}) {
		scenarios = append(scenarios, faultScenario{
			name: fmt.Sprintf("rate=%d%%", rate), key: fmt.Sprint(rate),
			set: func(p *faultproxy.Proxy) { p.SetRates(faultproxy.Uniform(float64(rate) / 100)) },
		})
	}
	all := map[string]faultScenario{
		"mix": {name: "mix=20%", set: func(p *faultproxy.Proxy) { p.SetRates(faultproxy.Mix(0.20)) }},
		"storm": {name: "storm", set: func(p *faultproxy.Proxy) {
			p.SetRates(map[faultproxy.Kind]float64{faultproxy.WatchGone: 1})
		}},
		"latency": {name: "latency=2s", set: func(p *faultproxy.Proxy) { p.SetLatency(2 * time.Second) },
			kilnArgs: []string{"--discovery-timeout", "30s"}},
		"restart": {name: "restart", restart: true},
	}
	names := os.Getenv("KILN_BENCH_FAULT_SCENARIOS")
	if names == "" {
		names = "mix,storm,latency,restart"
	}
	for _, n := range strings.Split(names, ",") {
		n = strings.TrimSpace(n)
		if n == "none" {
			continue
		}
		sc, ok := all[n]
		if !ok {
			b.Fatalf("KILN_BENCH_FAULT_SCENARIOS: no scenario %q (mix, storm, latency, restart, none)", n)
		}
		sc.key = n
		scenarios = append(scenarios, sc)
	}
	for _, sc := range scenarios {
		b.Run(sc.name+"/kiln", func(b *testing.B) {
			kiln := kilnBinary(b)
			p := startAPIProxy(b, c, "bench")
			e := newKilnEnv(b, kiln, p)
			name := "bench-faults-" + sc.key
			if err := e.run("create", "kube", name); err != nil {
				b.Fatal(err)
			}
			if err := e.run("project", "create", "kube", name, "default/app"); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				sc.clear(p.Fault)
				if err := e.run("destroy", "kube", name, "--yes"); err != nil {
					b.Error(err)
				}
			})
			sc.apply(p.Fault)
			before := p.Fault.Injected()
			var cont, proj tally
			restarts := 0
			i := 0
			for b.Loop() {
				cont.add(sc.around(b, c, p, &restarts, func() error {
					return e.run(append([]string{"create", "kube", name, "--continue", "--timeout", "2m"}, sc.kilnArgs...)...)
				}))
				op := "suspend"
				if i%2 == 1 {
					op = "start"
				}
				proj.add(sc.around(b, c, p, &restarts, func() error {
					return e.run(append([]string{"project", op, "kube", name, "default/app", "--timeout", "2m"}, sc.kilnArgs...)...)
				}))
				i++
			}
			b.ReportMetric(cont.percent(), "continue-%")
			b.ReportMetric(proj.percent(), "project-%")
			sc.report(b, p, before, restarts)
			b.Logf("kiln, %s: create --continue %s; project suspend/start %s; proxy: %s%s", sc.name, cont, proj, p.Fault, sc.restarted(restarts))
		})
		b.Run(sc.name+"/kubectl", func(b *testing.B) {
			k := newKubectlScript(b, c)
			if err := k.install(); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				sc.clear(k.p.Fault)
				if err := k.uninstall(); err != nil {
					b.Error(err)
				}
			})
			sc.apply(k.p.Fault)
			before := k.p.Fault.Injected()
			var runs tally
			restarts := 0
			for b.Loop() {
				runs.add(sc.around(b, c, k.p, &restarts, func() error {
					err := k.run("apply", "--server-side", "-f", k.manifests)
					if err == nil {
						err = k.run("-n", "kiln-system", "rollout", "status", "deployment/kiln-gateway", "--timeout=2m")
					}
					return err
				}))
			}
			b.ReportMetric(runs.percent(), "apply-rollout-%")
			sc.report(b, k.p, before, restarts)
			b.Logf("kubectl, %s: apply --server-side + rollout status %s; proxy: %s%s", sc.name, runs, k.p.Fault, sc.restarted(restarts))
		})
	}
}

// faultScenario is one row of BenchmarkFaultCompletion: faults set on the
// proxy for the measured runs, or an API server restart in each run.
type faultScenario struct {
	name, key string
	set       func(*faultproxy.Proxy)
	kilnArgs  []string
	restart   bool
}

func (sc faultScenario) apply(p *faultproxy.Proxy) {
	if sc.set != nil {
		sc.set(p)
	}
}

func (sc faultScenario) clear(p *faultproxy.Proxy) {
	p.SetRates(nil)
	p.SetLatency(0)
}

func (sc faultScenario) report(b *testing.B, p *apiProxy, before, restarts int) {
	if sc.restart {
		b.ReportMetric(float64(restarts)/float64(b.N), "restarts/run")
		return
	}
	b.ReportMetric(float64(p.Fault.Injected()-before)/float64(b.N), "faults/run")
}

func (sc faultScenario) restarted(n int) string {
	if !sc.restart {
		return ""
	}
	return fmt.Sprintf("; %d API server restarts", n)
}

// around runs one command; for the restart scenario it kills the API
// server once the command has sent its 5th request through the proxy (so
// it is under way and has heard the server), starts it again 8 s later,
// and waits for the command. A command that ends before its 5th request
// meets no restart.
func (sc faultScenario) around(b *testing.B, c *testcluster.Cluster, p *apiProxy, restarts *int, run func() error) error {
	if !sc.restart {
		return run()
	}
	start := p.Fault.Requests()
	done := make(chan error, 1)
	go func() { done <- run() }()
	for p.Fault.Requests() < start+5 {
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := c.KillAPIServer(); err != nil {
		b.Fatal(err)
	}
	time.Sleep(8 * time.Second) // the outage: not a wait for a result
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.StartAPIServer(ctx); err != nil {
		b.Fatalf("restart the API server: %v", err)
	}
	*restarts++
	return <-done
}

// tally counts runs that completed, and keeps the first line of each
// failure.
type tally struct {
	ok, runs int
	failures []string
}

func (t *tally) add(err error) {
	t.runs++
	if err == nil {
		t.ok++
		return
	}
	msg := err.Error()
	// kiln's own last word is its result event; kubectl's is its error.
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	last := lines[len(lines)-1]
	for _, l := range lines {
		var ev struct{ Type, Message string }
		if json.Unmarshal([]byte(l), &ev) == nil && ev.Type == "result" {
			last = ev.Message
		}
	}
	if len(last) > 200 {
		last = last[:200]
	}
	t.failures = append(t.failures, last)
}

func (t tally) percent() float64 {
	if t.runs == 0 {
		return 0
	}
	return 100 * float64(t.ok) / float64(t.runs)
}

func (t tally) String() string {
	s := fmt.Sprintf("%d of %d completed", t.ok, t.runs)
	if len(t.failures) > 0 {
		s += "; failures: " + strings.Join(t.failures, " | ")
	}
	return s
}

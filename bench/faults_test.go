package bench

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kilnctl/kiln/internal/faultproxy"
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
func BenchmarkFaultCompletion(b *testing.B) {
	c := needCluster(b)
	for _, rate := range envInts("KILN_BENCH_FAULT_RATES", []int{3, 10}) {
		b.Run(fmt.Sprintf("rate=%d%%/kiln", rate), func(b *testing.B) {
			kiln := kilnBinary(b)
			p := startAPIProxy(b, c, "bench")
			e := newKilnEnv(b, kiln, p)
			name := fmt.Sprintf("bench-faults-%d", rate)
			if err := e.run("create", "kube", name); err != nil {
				b.Fatal(err)
			}
			if err := e.run("project", "create", "kube", name, "default/app"); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				p.Fault.SetRates(nil)
				if err := e.run("destroy", "kube", name, "--yes"); err != nil {
					b.Error(err)
				}
			})
			p.Fault.SetRates(faultproxy.Uniform(float64(rate) / 100))
			before := p.Fault.Injected()
			var cont, proj tally
			i := 0
			for b.Loop() {
				cont.add(e.run("create", "kube", name, "--continue", "--timeout", "2m"))
				op := "suspend"
				if i%2 == 1 {
					op = "start"
				}
				proj.add(e.run("project", op, "kube", name, "default/app", "--timeout", "2m"))
				i++
			}
			b.ReportMetric(cont.percent(), "continue-%")
			b.ReportMetric(proj.percent(), "project-%")
			b.ReportMetric(float64(p.Fault.Injected()-before)/float64(b.N), "faults/run")
			b.Logf("kiln at %d%%: create --continue %s; project suspend/start %s; proxy: %s", rate, cont, proj, p.Fault)
		})
		b.Run(fmt.Sprintf("rate=%d%%/kubectl", rate), func(b *testing.B) {
			k := newKubectlScript(b, c)
			if err := k.install(); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				k.p.Fault.SetRates(nil)
				if err := k.uninstall(); err != nil {
					b.Error(err)
				}
			})
			k.p.Fault.SetRates(faultproxy.Uniform(float64(rate) / 100))
			before := k.p.Fault.Injected()
			var runs tally
			for b.Loop() {
				err := k.run("apply", "--server-side", "-f", k.manifests)
				if err == nil {
					err = k.run("-n", "kiln-system", "rollout", "status", "deployment/kiln-gateway", "--timeout=2m")
				}
				runs.add(err)
			}
			b.ReportMetric(runs.percent(), "apply-rollout-%")
			b.ReportMetric(float64(k.p.Fault.Injected()-before)/float64(b.N), "faults/run")
			b.Logf("kubectl at %d%%: apply --server-side + rollout status %s; proxy: %s", rate, runs, k.p.Fault)
		})
	}
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

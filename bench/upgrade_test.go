package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// upgradeCluster is the platform BenchmarkUpgrade installs (run it alone:
// a cluster hosts one kiln platform, and the project benchmarks install
// theirs). Its config is projConfig's tenant and stack, so the project
// template and seeding of the project benchmarks apply.
const upgradeCluster = "bench-upgrade"

// BenchmarkUpgrade measures kiln upgrade on a platform with 100 running
// projects (kiln creates one, 99 are copies of its objects written through
// the API):
//
//	domain-change   upgrade -c FILE --yes where FILE changes spec.domain:
//	                kiln-config, and every project's route re-applied and
//	                watched until ready (alternating between two domains)
//	no-op           upgrade -c FILE --yes with the installed config: the
//	                plan is empty; goal: no write but the lock Lease
//
// Metrics: wall-ms, requests/op, lease-writes/op, other-writes/op,
// dryrun/op (server-side dry-run applies: the plan's comparisons).
//
//	go test -run XXX -bench BenchmarkUpgrade -benchtime 3x ./bench/
func BenchmarkUpgrade(b *testing.B) {
	c := needCluster(b)
	n := envInt("KILN_BENCH_UPGRADE_PROJECTS", 100)
	kiln := kilnBinary(b)
	p := startAPIProxy(b, c, "bench")
	e := newKilnEnv(b, kiln, p)
	dir := b.TempDir()
	write := func(name, domain string) string {
		path := filepath.Join(dir, name)
		cfg := strings.Replace(projConfig, "bench.example.test", domain, 1)
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			b.Fatal(err)
		}
		return path
	}
	cfgs := []string{write("a.yaml", "bench.example.test"), write("b.yaml", "next.example.test")}
	if err := e.run("create", "kube", upgradeCluster, "-c", cfgs[0]); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := e.run("destroy", "kube", upgradeCluster, "--yes"); err != nil {
			b.Error(err)
		}
	})
	if err := e.run("project", "create", "kube", upgradeCluster, tmplTenant+"/"+tmplProject); err != nil {
		b.Fatal(err)
	}
	tmpl, err := readTemplate(c.Client)
	if err != nil {
		b.Fatal(err)
	}
	if err := tmpl.seed(c, tmplTenant, projectNames(tmplTenant, 1, n), false); err != nil {
		b.Fatal(err)
	}
	if avail := settle(c, n, 3*time.Minute); avail < n {
		b.Fatalf("only %d of %d project Deployments available", avail, n)
	}
	b.Logf("setup (not measured): %s", short(p.take()))
	current := 0
	measure := func(b *testing.B, next func() int) {
		var walls durations
		var total apiCounts
		p.take()
		for b.Loop() {
			i := next()
			start := time.Now()
			if err := e.run("upgrade", "kube", upgradeCluster, "-c", cfgs[i], "--yes"); err != nil {
				b.Fatal(err)
			}
			walls = append(walls, time.Since(start))
			current = i
			total.add(p.take())
		}
		k := float64(len(walls))
		b.ReportMetric(walls.meanMS(), "wall-ms")
		b.ReportMetric(float64(total.Total())/k, "requests/op")
		b.ReportMetric(float64(total.LeaseWrites())/k, "lease-writes/op")
		b.ReportMetric(float64(total.OtherWrites())/k, "other-writes/op")
		b.ReportMetric(float64(total.DryRuns())/k, "dryrun/op")
		b.Logf("%d ops: %s", len(walls), short(total))
	}
	b.Run("domain-change/projects="+strconv.Itoa(n), func(b *testing.B) {
		measure(b, func() int { return 1 - current })
	})
	b.Run("no-op/projects="+strconv.Itoa(n), func(b *testing.B) {
		measure(b, func() int { return current })
	})
}

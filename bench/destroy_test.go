package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// destroyConfig is the platform BenchmarkPlatformDestroy removes: three
// tenants, each with projects (kiln project create, so every object is
// what kiln makes: Deployment, Service, Ingress, Secret, spec ConfigMap,
// Lease).
const destroyConfig = `apiVersion: kiln.dev/v1alpha1
kind: ClusterConfig
spec:
  tenants: [alpha, beta, gamma]
  domain: bench.example.test
  stacks:
    - {name: web, image: "nginx:1.27-alpine", port: 80, cpu: 50m, memory: 64Mi}
`

var destroyTenants = []string{"alpha", "beta", "gamma"}

// BenchmarkPlatformDestroy removes the same platform — kiln-system with the
// gateway, three tenant namespaces with KILN_BENCH_DESTROY_PROJECTS
// projects each (default 2) — by each tool, measured in the same run on
// the same control plane:
//
//	kiln:    kiln destroy kube NAME --yes (each object confirmed gone, the
//	         lock held throughout)
//	kubectl: kubectl delete namespace kiln-system kiln-tenant-… --wait
//	         (every object kiln installs lives in those namespaces; kiln
//	         installs no cluster-scoped object)
//
// Each iteration installs the platform afresh with kiln (not timed).
func BenchmarkPlatformDestroy(b *testing.B) {
	c := needCluster(b)
	kiln := kilnBinary(b)
	perTenant := envInt("KILN_BENCH_DESTROY_PROJECTS", 2)
	dir := b.TempDir()
	cfg := filepath.Join(dir, "kiln.yaml")
	if err := os.WriteFile(cfg, []byte(destroyConfig), 0o600); err != nil {
		b.Fatal(err)
	}
	const name = "bench-destroy"
	install := func(e *kilnEnv) error {
		if err := e.run("create", "kube", name, "-c", cfg); err != nil {
			return err
		}
		for _, t := range destroyTenants {
			for i := range perTenant {
				if err := e.run("project", "create", "kube", name, fmt.Sprintf("%s/app%d", t, i)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, tool := range []string{"kiln", "kubectl"} {
		b.Run(fmt.Sprintf("%s/tenants=%d/projects=%d", tool, len(destroyTenants), perTenant*len(destroyTenants)), func(b *testing.B) {
			p := startAPIProxy(b, c, "bench")
			k := &kubectlScript{p: p}
			var walls durations
			var total apiCounts
			for b.Loop() {
				b.StopTimer()
				e := newKilnEnv(b, kiln, p)
				if err := install(e); err != nil {
					b.Fatal(err)
				}
				p.take()
				b.StartTimer()
				start := time.Now()
				var err error
				if tool == "kiln" {
					err = e.run("destroy", "kube", name, "--yes")
				} else {
					args := []string{"delete", "namespace", "kiln-system"}
					for _, t := range destroyTenants {
						args = append(args, "kiln-tenant-"+t)
					}
					err = k.run(append(args, "--wait=true", "--timeout=3m")...)
				}
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
			b.Logf("%s destroy: %d ops: %s", tool, len(walls), short(total))
			destroyWalls[tool] = walls.meanMS()
			if kd, ok := destroyWalls["kiln"]; ok && tool == "kubectl" && walls.meanMS() > 0 {
				b.Logf("kiln destroy ÷ kubectl delete --wait = %.2f", kd/walls.meanMS())
			}
		})
	}
}

var destroyWalls = map[string]float64{}

package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kilnctl/kiln/internal/testenv/testcluster"
)

// cluster is the one control plane every benchmark of the package runs
// against; nil when skipReason says why there is none.
var (
	cluster    *testcluster.Cluster
	skipReason string
)

func TestMain(m *testing.M) {
	flag.Parse()
	switch {
	case testing.Short():
		skipReason = "-short: the benchmarks need a real control plane"
	case flag.Lookup("test.bench").Value.String() == "":
		// `go test ./bench` without -bench runs nothing here: do not pay
		// for a control plane.
		skipReason = "no -bench flag"
	default:
		if err := testbinPresent(); err != nil {
			skipReason = err.Error()
			fmt.Fprintln(os.Stderr, "bench: skipping every benchmark:", skipReason)
		}
	}
	if skipReason != "" {
		os.Exit(m.Run())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	c, err := testcluster.Start(ctx, testcluster.Options{ContextName: "kiln-bench", ControllerQPS: envInt("KILN_BENCH_CONTROLLER_QPS", 0)})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: start control plane:", err)
		os.Exit(1)
	}
	cluster = c
	code := m.Run()
	cleanupBuilds()
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "bench: stop control plane:", err)
	}
	os.Exit(code)
}

// needCluster skips b when there is no control plane.
func needCluster(b *testing.B) *testcluster.Cluster {
	b.Helper()
	if cluster == nil {
		b.Skip(skipReason)
	}
	return cluster
}

// testbinPresent says whether the control-plane binaries testcluster needs
// are built, so a missing build skips with a clear message instead of
// failing the start.
func testbinPresent() error {
	dir := os.Getenv("KILN_TESTBIN_DIR")
	if dir == "" {
		root, err := testcluster.RepoRoot()
		if err != nil {
			return err
		}
		dir = filepath.Join(root, ".cache", "testbin")
	}
	for _, f := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kwok-stages.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return fmt.Errorf("control-plane binary %s missing in %s: run `make testbin` first", f, dir)
		}
	}
	return nil
}

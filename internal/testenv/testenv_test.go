package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const harnessPrefix = "github.com/kilnctl/kiln/internal/testenv"

// deps lists the packages pkg imports (transitively) when built for goos.
func deps(t *testing.T, root, goos, pkg string) []string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "list", "-deps", pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s for %s: %v", pkg, goos, err)
	}
	return strings.Fields(string(out))
}

func harnessDeps(list []string) []string {
	var found []string
	for _, p := range list {
		if p == harnessPrefix || strings.HasPrefix(p, harnessPrefix+"/") {
			found = append(found, p)
		}
	}
	return found
}

// TestProductImportsNoHarness holds the line the path draws: no build of
// the kiln binary for a released OS imports a package under
// internal/testenv, and kumo (the AWS emulator, built from a module of its
// own) is not in kiln's module graph. hack/cluster, the demo's cluster
// tool, does import testcluster: the control shows the check finds a
// harness import where there is one.
func TestProductImportsNoHarness(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if got := harnessDeps(deps(t, root, "linux", "./hack/cluster")); len(got) == 0 {
		t.Fatal("control: hack/cluster imports testcluster, but no harness package was found in its deps")
	}
	for _, goos := range []string{"linux", "darwin", "windows"} {
		if got := harnessDeps(deps(t, root, goos, "./cmd/kiln")); len(got) > 0 {
			t.Errorf("kiln for %s imports test harness packages: %v", goos, got)
		}
	}

	cmd := exec.CommandContext(t.Context(), "go", "list", "-m", "all")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m all: %v", err)
	}
	if !strings.Contains(string(out), "k8s.io/client-go ") {
		t.Fatalf("control: go list -m all does not list client-go:\n%s", out)
	}
	if strings.Contains(string(out), "github.com/sivchari/kumo") {
		t.Error("kiln's module graph lists github.com/sivchari/kumo: the emulator belongs in internal/testenv/awsemu/kumoregion's own go.mod")
	}
}

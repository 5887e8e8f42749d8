package exit

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const self = "github.com/kilnctl/kiln/internal/exit"

// top are the only packages (with those under them) that turn failures
// into exit numbers.
var top = []string{"github.com/kilnctl/kiln/internal/cli", "github.com/kilnctl/kiln/cmd/kiln"}

func atTop(p string) bool {
	for _, t := range top {
		if p == t || strings.HasPrefix(p, t+"/") {
			return true
		}
	}
	return false
}

// TestOnlyTheTopImportsExit holds the line of DESIGN.md §4: the engine,
// its providers, creds and the wizard classify errors with engine/failure;
// exit numbers are the CLI's. No package but internal/cli and cmd/kiln
// (and the packages under them, such as internal/cli/ndjson) imports this
// one, in product code or in tests. The control shows the
// check finds an import where there is one (internal/cli's).
func TestOnlyTheTopImportsExit(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	var importers []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] != self && slices.Contains(f[1:], self) {
			importers = append(importers, f[0])
		}
	}
	if !slices.Contains(importers, top[0]) {
		t.Fatalf("control: internal/cli imports %s, but the check did not find it (importers %v)", self, importers)
	}
	for _, p := range importers {
		if !atTop(p) {
			t.Errorf("%s imports internal/exit: below the CLI's top, classify errors with engine/failure (failure.Of, failure.Input, ...)", p)
		}
	}
}

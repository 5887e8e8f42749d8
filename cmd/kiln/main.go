// Command kiln is a terminal wizard and headless CLI for the lifecycle of
// kiln clusters and the projects that run on them.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/internal/cli"
	"github.com/kilnctl/kiln/internal/exit"
)

// Set through -ldflags "-X main.version=... -X main.commit=... -X main.date=...".
var (
	version = "dev"
	commit  = "none"
	date    = "unknown"
)

func main() {
	os.Exit(run(nil))
}

// run is kiln. hooks are test hooks (see engine.Hooks), handed to the
// command tree (cli.Options) and from it to every engine and provider it
// builds: the kiln binary passes none; the e2e test binary, which runs as
// kiln, passes the ones its environment configures.
func run(hooks engine.Hooks) int {
	// Every informer lists then watches, never client-go's watch-list:
	// client-go v0.37.2 sends a watch-list the server ends with 410 again
	// at once, with no backoff, so a server answering every watch so (a
	// relist storm) would be asked hundreds of times a second per
	// informer. engine/readiness opts its informers out itself; this
	// covers the wizard's live view (client-go's informer factory), read
	// once by client-go at its first feature check. A value the user set
	// is kept.
	if _, set := os.LookupEnv("KUBE_FEATURE_WatchListClient"); !set {
		_ = os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	}
	tuneGC()
	// The first Ctrl-C cancels the context: the engine stops at a safe point
	// and reports what was left. A second one kills the process outright.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // restore default handling: the next signal ends the process
	}()

	root := cli.NewRootWith(cli.BuildInfo{Version: version, Commit: commit, Date: date}, cli.Options{Hooks: hooks})
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exit.OK
	}
	// This is the one place where errors become exit codes.
	code := exit.Code(err)
	if ctx.Err() != nil && code == exit.Failed {
		code = exit.Interrupted
	}
	if !cli.Reported(err) {
		fmt.Fprintf(os.Stderr, "kiln: %v\n", err)
	}
	return code
}

// Garbage collection for a short-lived command that reads a lot: status
// and project list decode page after page of objects they drop at once,
// and at Go's default (GOGC=100) collected about 20% of their CPU at
// 10,000 projects. GC runs when the heap has grown 4× past what is live,
// and never lets it pass gcLimit (a soft limit: the collector works
// harder near it, it does not fail): at 10,000 projects 0.3 s less CPU
// for about 20 MB more peak memory, under the 250 MB budget
// (docs/benchmarks.md). GOGC and GOMEMLIMIT in the environment win.
const (
	gcPercent = 400
	gcLimit   = 180 << 20
)

func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(gcLimit)
	}
}

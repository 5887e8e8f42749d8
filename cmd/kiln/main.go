// Command kiln is a terminal wizard and headless CLI for the lifecycle of
// kiln clusters and the projects that run on them.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
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

package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnctl/kiln/engine/event"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/trace"
)

func TestTeeSinkShowsDebugOnlyWithVerboseAndLogsEverything(t *testing.T) {
	dir := t.TempDir()
	for _, verbose := range []int{0, 1} {
		path := filepath.Join(dir, fmt.Sprintf("log-%d", verbose))
		r := &record{verbose: verbose, path: path}
		if err := r.open(); err != nil {
			t.Fatal(err)
		}
		var front bytes.Buffer
		s := r.tee(&textPrinter{w: &front})
		s.Emit(engine.Event{Payload: event.LogEvent{Level: engine.LevelDebug, Message: "k8s GET /x -> 200 (1ms)"}})
		// An operation binds the trace to its Reporter on its sink, as
		// every engine operation does (Engine.traced).
		op := trace.To(r.context(context.Background()), event.NewReporter(s, nil).Debug)
		trace.Logf(op, "traced %d", verbose)
		s.Emit(engine.Event{Payload: event.LogEvent{Level: engine.LevelInfo, Message: "hello"}})
		r.close()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(data), `"level":"debug"`); n != 2 || !strings.Contains(string(data), "hello") {
			t.Errorf("verbose %d: log file %s", verbose, data)
		}
		info, _ := os.Stat(path)
		if info.Mode().Perm() != 0o600 {
			t.Errorf("log file mode %v", info.Mode())
		}
		shown := strings.Contains(front.String(), "debug: k8s GET") && strings.Contains(front.String(), "debug: traced")
		if shown != (verbose > 0) || !strings.Contains(front.String(), "hello") {
			t.Errorf("verbose %d: frontend showed %q", verbose, front.String())
		}
	}
}

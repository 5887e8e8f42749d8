package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/kilnctl/kiln/engine/event"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/trace"
)

// record is -v and --log-file: which debug events a frontend shows, and
// the file that gets every event.
type record struct {
	verbose int
	path    string

	file *os.File
	log  *jsonPrinter
}

// open opens --log-file (0600, appended).
func (r *record) open() error {
	if r.path == "" {
		return nil
	}
	f, err := os.OpenFile(r.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return failure.BadInput("--log-file: %v", err)
	}
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close()
		return failure.BadInput("--log-file: %v", err)
	}
	r.file, r.log = f, newJSONPrinter(f)
	return nil
}

func (r *record) close() {
	if r.file != nil {
		_ = r.file.Close()
	}
}

// tracing says whether debug events are wanted at all.
func (r *record) tracing() bool { return r.verbose > 0 || r.log != nil }

// context carries the API request trace when debug events are wanted.
// Each engine operation binds it to its own Reporter (trace.To), so a
// request's line reaches that operation's frontend; a request made
// outside any operation goes to the log file only.
func (r *record) context(ctx context.Context) context.Context {
	if !r.tracing() {
		return ctx
	}
	detail := r.verbose
	if r.log != nil {
		detail = 2 // the file gets everything
	}
	return trace.With(ctx, func(msg string) {
		if r.log != nil {
			event.NewReporter(r.log, nil).Debug(msg)
		}
	}, detail)
}

// tee wraps a frontend's sink: every event also goes to the log file,
// debug events reach the frontend only with -v.
func (r *record) tee(front engine.Sink) engine.Sink {
	return &teeSink{front: front, r: r}
}

type teeSink struct {
	front engine.Sink
	r     *record
}

func (s *teeSink) Emit(e engine.Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	if s.r.log != nil {
		s.r.log.Emit(e)
	}
	if l, ok := e.Payload.(event.LogEvent); ok && l.Level == event.LevelDebug && s.r.verbose == 0 {
		return
	}
	s.front.Emit(e)
}

// String names the record for errors.
func (r *record) String() string { return fmt.Sprintf("verbose %d, log file %q", r.verbose, r.path) }

// frontend is the frontend's own sink behind tee.
func frontend(s engine.Sink) engine.Sink {
	if t, ok := s.(*teeSink); ok {
		return t.front
	}
	return s
}

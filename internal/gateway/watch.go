package gateway

import (
	"context"
	"log/slog"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watchDirs calls reload on every file event in dirs and every interval
// besides, until ctx ends. kubelet swaps a mounted ConfigMap or Secret by
// renaming a `..data` symlink, which shows up as an event in the
// directory, not on the file; the poll is the safety net for filesystems
// that deliver no events (then, and when a directory cannot be watched,
// what — "keys", "the certificate" — is polled only, as the log says).
func watchDirs(ctx context.Context, dirs []string, interval time.Duration, log *slog.Logger, what string, reload func()) {
	var events chan fsnotify.Event
	var errs chan error
	if w, err := fsnotify.NewWatcher(); err != nil {
		log.Warn("no file watcher; polling "+what+" only", "error", err.Error())
	} else {
		defer w.Close()
		watched := true
		for _, dir := range dirs {
			if err := w.Add(dir); err != nil {
				log.Warn("cannot watch the directory of "+what+"; polling "+what+" only", "dir", dir, "error", err.Error())
				watched = false
			}
		}
		if watched {
			events, errs = w.Events, w.Errors
		}
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-events:
			reload()
		case err := <-errs:
			log.Warn("file watcher error; the poll still reloads "+what, "error", err.Error())
		case <-tick.C:
			reload()
		}
	}
}

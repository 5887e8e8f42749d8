package tui

import (
	"context"
	"runtime"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/kilnctl/kiln/engine"
)

// blockingWatcher is Ops (the interface embedded, unused) whose Watch
// blocks until its context ends.
type blockingWatcher struct{ Ops }

func (blockingWatcher) Watch(ctx context.Context, _ engine.ClusterRef, _ engine.WatchFunc) error {
	<-ctx.Done()
	return nil
}

// TestUpdateStartsNoGoroutine: opening the inspect screen (its live
// watch) starts nothing inside Update: the watch is a command Bubble Tea
// runs, as every operation is.
func TestUpdateStartsNoGoroutine(t *testing.T) {
	m := New(Options{Ops: blockingWatcher{}})
	m.clusters = []Cluster{{Provider: "kube", Name: "dev1", Location: "kiln-local"}}
	before := runtime.NumGoroutine()
	_, cmd := m.Update(tea.KeyPressMsg{Code: 'i', Text: "i"})
	if m.screen != screenInspect || cmd == nil {
		t.Fatalf("i did not open the inspect screen with its watch (screen %d)", m.screen)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("Update started %d goroutine(s)", after-before)
	}
	// The watch runs when its command does, and ends with the screen.
	done := make(chan struct{})
	go func() {
		for _, c := range cmd().(tea.BatchMsg) {
			if c != nil {
				go c()
			}
		}
		close(done)
	}()
	<-done
	m.closeInspect()
	finished := make(chan struct{})
	go func() { m.ops.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end with the inspect screen")
	}
}

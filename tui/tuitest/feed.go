package tuitest

import (
	"context"
	"sync"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/tui"
)

// FeedBackend is a WatchBackend that also feeds the project screen
// (tui.ProjectFeed): ProjectEvents returns Events; FollowLogs sends
// Logs's first lines, then each line sent on Lines, until its context
// ends. Following and Followed report each follow's start and end.
type FeedBackend struct {
	*WatchBackend
	Events []engine.EventInfo
	Logs   []engine.PodLogLine
	Lines  chan engine.PodLogLine
	// Following receives the ref of each follow that starts; Followed
	// receives once per follow that returned.
	Following chan string
	Followed  chan struct{}

	mu         sync.Mutex
	eventReads int
	tails      []int
}

// NewFeedBackend wraps b (live from a watch, as WatchBackend).
func NewFeedBackend(b *Backend) *FeedBackend {
	return &FeedBackend{WatchBackend: NewWatchBackend(b), Lines: make(chan engine.PodLogLine),
		Following: make(chan string, 8), Followed: make(chan struct{}, 8)}
}

func (f *FeedBackend) ProjectEvents(ctx context.Context, _ engine.ClusterRef, _ string) ([]engine.EventInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.eventReads++
	return f.Events, nil
}

func (f *FeedBackend) FollowLogs(ctx context.Context, _ engine.ClusterRef, ref string, tail int, fn func(engine.PodLogLine)) error {
	f.mu.Lock()
	f.tails = append(f.tails, tail)
	f.mu.Unlock()
	f.Following <- ref
	defer func() { f.Followed <- struct{}{} }()
	for _, l := range f.Logs {
		fn(l)
	}
	for {
		select {
		case l := <-f.Lines:
			fn(l)
		case <-ctx.Done():
			return nil
		}
	}
}

// EventReads is how many times the Events were read.
func (f *FeedBackend) EventReads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.eventReads
}

// RegionBackend is a Backend whose discovery reports AWS regions' search: every region starts, those before Gate's close
// end first (Early), the rest after; Failed regions end with their cause.
type RegionBackend struct {
	*Backend
	Regions []string
	Early   int
	Failed  map[string]string
	Gate    chan struct{}
}

// Clusters reports the regions' search to fn, then returns List and a
// row per failed region.
func (r *RegionBackend) Clusters(ctx context.Context, fn func(engine.SearchProgress)) ([]tui.Cluster, error) {
	for _, reg := range r.Regions {
		fn(engine.SearchProgress{Provider: "aws", Location: reg})
	}
	end := func(reg string) {
		fn(engine.SearchProgress{Provider: "aws", Location: reg, Done: true, Err: r.Failed[reg]})
	}
	for _, reg := range r.Regions[:r.Early] {
		end(reg)
	}
	select {
	case <-r.Gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for _, reg := range r.Regions[r.Early:] {
		end(reg)
	}
	out := append([]tui.Cluster(nil), r.List...)
	for _, reg := range r.Regions {
		if cause := r.Failed[reg]; cause != "" {
			out = append(out, tui.Cluster{Provider: "aws", Location: reg, Platform: "?", Err: cause})
		}
	}
	return out, nil
}

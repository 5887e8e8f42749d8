package engine

import "context"

// SearchProgress is one location's progress in a search across locations
// (List's discovery of every AWS region): Done false when its search
// starts, true when it ends, with Err saying why it failed ("" when it
// was searched).
type SearchProgress struct {
	Provider, Location string
	Done               bool
	Err                string
}

type progressKey struct{}

// WithSearchProgress returns ctx carrying fn: a provider that searches
// locations one by one reports each to fn (from its goroutines, so fn
// must be safe for concurrent use). List sets it from ListRequest.Progress.
func WithSearchProgress(ctx context.Context, fn func(SearchProgress)) context.Context {
	if fn == nil {
		return ctx
	}
	return context.WithValue(ctx, progressKey{}, fn)
}

// ReportSearch reports one location's progress to the function ctx
// carries (WithSearchProgress), if any. locs are the location's results
// when done: the first error of a result that is the location itself (no
// Cluster) is its cause. A cluster found there but unreachable is that
// cluster's row, not a failed search of the location.
func ReportSearch(ctx context.Context, provider, location string, done bool, locs ...Location) {
	fn, _ := ctx.Value(progressKey{}).(func(SearchProgress))
	if fn == nil {
		return
	}
	p := SearchProgress{Provider: provider, Location: location, Done: done}
	for _, l := range locs {
		if l.Err != nil && l.Cluster == "" {
			p.Err = l.Err.Error()
			break
		}
	}
	fn(p)
}

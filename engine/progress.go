package engine

// SearchProgress is one location's progress in a search across locations
// (List's discovery of every AWS region): Done false when its search
// starts, true when it ends, with Err saying why it failed ("" when it
// was searched).
type SearchProgress struct {
	Provider, Location string
	Done               bool
	Err                string
}

// ReportSearch reports one location's progress to fn, if any: a provider
// that searches locations one by one (Lister.ListClusters) calls it from
// its goroutines, so fn must be safe for concurrent use. locs are the
// location's results when done: the first error of a result that is the
// location itself (no Cluster) is its cause. A cluster found there but
// unreachable is that cluster's row, not a failed search of the location.
func ReportSearch(fn func(SearchProgress), provider, location string, done bool, locs ...Location) {
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

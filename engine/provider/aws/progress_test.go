package aws

import (
	"context"
	"sync"
	"testing"

	"github.com/kilnctl/kiln/engine"
)

// TestListReportsEachRegionsProgress: engine.List's Progress hears every
// region searched start and end (the wizard's spinner per region), and a
// region that cannot be searched ends with its cause, while the list
// itself succeeds.
func TestListReportsEachRegionsProgress(t *testing.T) {
	e := emulator(t)
	p := newTestProvider(t, e)
	p.SearchRegions = append(e.Regions(), "sa-east-1")
	var mu sync.Mutex
	started, done := map[string]int{}, map[string]string{}
	progress := func(sp engine.SearchProgress) {
		mu.Lock()
		defer mu.Unlock()
		if sp.Provider != "aws" {
			t.Errorf("progress of provider %q", sp.Provider)
		}
		if !sp.Done {
			started[sp.Location]++
			return
		}
		if started[sp.Location] != 1 {
			t.Errorf("%s ended before it started", sp.Location)
		}
		done[sp.Location] = "ok"
		if sp.Err != "" {
			done[sp.Location] = sp.Err
		}
	}
	quiet := engine.SinkFunc(func(engine.Event) {})
	rows, err := (&engine.Engine{Sink: quiet}).List(context.Background(), engine.ListRequest{Optional: []engine.Provider{p}, TokenDir: t.TempDir(), Progress: progress})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range p.SearchRegions {
		if started[r] != 1 || done[r] == "" {
			t.Errorf("region %s: started %d times, ended %q", r, started[r], done[r])
		}
	}
	for _, r := range e.Regions() {
		if done[r] != "ok" {
			t.Errorf("region %s served by the emulator ended with %q", r, done[r])
		}
	}
	if d := done["sa-east-1"]; d == "ok" || d == "" {
		t.Errorf("sa-east-1 (not served) ended with %q, want its cause", d)
	}
	failed := false
	for _, r := range rows {
		failed = failed || r.Location == "sa-east-1" && r.Err != ""
	}
	if !failed {
		t.Errorf("sa-east-1 not a row with its cause: %+v", rows)
	}
}

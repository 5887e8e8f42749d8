package aws

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kilnctl/kiln/internal/testenv/awsemu"
)

// benchLatency is injected before every request to every region.
const benchLatency = 200 * time.Millisecond

var (
	benchOnce sync.Once
	benchEmu  *awsemu.Emulator
	benchErr  error
)

// benchEmulator serves the 17 built-in regions, each 200 ms away.
func benchEmulator(b *testing.B) *awsemu.Emulator {
	b.Helper()
	benchOnce.Do(func() {
		lat := map[string]time.Duration{}
		for _, r := range Regions {
			lat[r] = benchLatency
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		benchEmu, benchErr = awsemu.Start(ctx, awsemu.Options{Regions: Regions, Latency: lat})
	})
	if benchErr != nil {
		b.Fatalf("start AWS emulator: %v", benchErr)
	}
	return benchEmu
}

// BenchmarkDiscover compares discovery of the 17 built-in regions (in
// parallel, the default), of one region, and of the 17 regions one after
// another (Concurrency 1), with 200 ms latency per request.
func BenchmarkDiscover(b *testing.B) {
	e := benchEmulator(b)
	for _, bc := range []struct {
		name        string
		regions     []string
		concurrency int
	}{
		{"regions=17/parallel", Regions, 0},
		{"regions=1", []string{"eu-west-1"}, 0},
		{"regions=17/sequential", Regions, 1},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := &Provider{SearchRegions: bc.regions, Concurrency: bc.concurrency, LoadConfig: e.Config}
			ctx := context.Background()
			// The first call also validates the configuration (once per
			// provider, no request); measure the scans after it.
			if _, err := p.Discover(ctx, "bench"); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				locs, err := p.Discover(ctx, "bench")
				if err != nil {
					b.Fatal(err)
				}
				for _, l := range locs {
					if l.Err != nil {
						b.Fatalf("%s: %v", l.Name, l.Err)
					}
				}
			}
		})
	}
}

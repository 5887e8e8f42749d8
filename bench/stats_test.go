package bench

import (
	"slices"
	"time"
)

// durations collects one measurement per benchmark iteration.
type durations []time.Duration

func (d durations) meanMS() float64 {
	if len(d) == 0 {
		return 0
	}
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return ms(sum) / float64(len(d))
}

func (d durations) maxMS() float64 {
	if len(d) == 0 {
		return 0
	}
	return ms(slices.Max(d))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

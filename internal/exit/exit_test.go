package exit

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/kilnctl/kiln/engine/failure"
)

func TestCode(t *testing.T) {
	cases := []struct {
		err  error
		want int
	}{
		{nil, OK},
		{errors.New("boom"), Failed},
		{failure.BadInput("--output: bad"), BadInput},
		{failure.NeedsConfirm("installed"), NeedConfirm},
		{failure.Lock("held"), Locked},
		{failure.Deadline("slow"), Timeout},
		{failure.Interrupt("stop"), Interrupted},
		{fmt.Errorf("wrapped: %w", failure.Lock("held")), Locked},
		{context.Canceled, Interrupted},
		{fmt.Errorf("wait: %w", context.DeadlineExceeded), Timeout},
		// An explicit class wins over the context error it wraps.
		{failure.BadInput("bad: %w", context.Canceled), BadInput},
	}
	for _, tc := range cases {
		if got := Code(tc.err); got != tc.want {
			t.Errorf("Code(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// Every failure kind has its exit code of DESIGN.md §4.
func TestCodeOfEveryKind(t *testing.T) {
	want := map[failure.Kind]int{failure.None: 0, failure.Failed: 1, failure.Input: 2, failure.Confirm: 3, failure.Locked: 4, failure.Timeout: 5, failure.Interrupted: 130}
	for k := failure.None; k <= failure.Interrupted; k++ {
		if got := CodeOf(k); got != want[k] {
			t.Errorf("CodeOf(%v) = %d, want %d", k, got, want[k])
		}
	}
}

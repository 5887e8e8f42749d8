package exit

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestCode(t *testing.T) {
	cases := []struct {
		err  error
		want int
	}{
		{nil, OK},
		{errors.New("boom"), Failed},
		{Usage("--output: bad"), BadInput},
		{Confirm("installed"), NeedConfirm},
		{Lock("held"), Locked},
		{Deadline("slow"), Timeout},
		{Interrupt("stop"), Interrupted},
		{fmt.Errorf("wrapped: %w", Lock("held")), Locked},
		{context.Canceled, Interrupted},
		{fmt.Errorf("wait: %w", context.DeadlineExceeded), Timeout},
		// An explicit class wins over the context error it wraps.
		{Usage("bad: %w", context.Canceled), BadInput},
	}
	for _, tc := range cases {
		if got := Code(tc.err); got != tc.want {
			t.Errorf("Code(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

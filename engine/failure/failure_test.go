package failure

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestOf(t *testing.T) {
	locked := Lock("kiln-system/kiln-lock is locked by ci since 10:00")
	for _, c := range []struct {
		name string
		err  error
		want Kind
	}{
		{"nil", nil, None},
		{"plain", errors.New("boom"), Failed},
		{"input", BadInput("--nodes 0: must be 1 to 10"), Input},
		{"confirm", NeedsConfirm("already installed; nothing was changed"), Confirm},
		{"locked wrapped", fmt.Errorf("create: %w", locked), Locked},
		{"timeout", Deadline("not ready after 5m"), Timeout},
		{"interrupt", Interrupt("interrupted"), Interrupted},
		{"canceled", fmt.Errorf("read: %w", context.Canceled), Interrupted},
		{"deadline", fmt.Errorf("read: %w", context.DeadlineExceeded), Timeout},
		// The first classified failure in the chain decides, not a
		// context error it wraps.
		{"classified over context", Wrap(Failed, fmt.Errorf("apply: %w", context.Canceled)), Failed},
	} {
		if got := Of(c.err); got != c.want {
			t.Errorf("%s: Of = %v, want %v", c.name, got, c.want)
		}
	}
	if Wrap(Input, nil) != nil {
		t.Error("Wrap(kind, nil) is not nil")
	}
	if got := Lock("x %d", 1).Error(); got != "x 1" {
		t.Errorf("message = %q", got)
	}
}

// NothingChanged is a fact of the failure, never read from its words.
func TestNothingChanged(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"confirm", NeedsConfirm("needs --yes"), true},
		{"confirm wrapped", fmt.Errorf("destroy: %w", NeedsConfirm("needs --yes")), true},
		{"marked", Unchanged(Interrupted, "interrupted during discover"), true},
		{"marked wrapped", fmt.Errorf("x: %w", Unchanged(Interrupted, "interrupted")), true},
		{"words alone", Interrupt("interrupted: nothing was changed"), false},
		{"plain words", errors.New("nothing was changed"), false},
		{"interrupted", Interrupt("interrupted during platform: partly removed"), false},
	} {
		if got := NothingChanged(c.err); got != c.want {
			t.Errorf("%s: NothingChanged = %v, want %v", c.name, got, c.want)
		}
	}
	if k := Of(Unchanged(Interrupted, "x")); k != Interrupted {
		t.Errorf("Unchanged kind = %v", k)
	}
}

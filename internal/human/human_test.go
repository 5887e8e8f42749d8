package human

import (
	"testing"
	"time"
)

func TestWords(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{Age(-3 * time.Second), "0s"},
		{Age(45 * time.Second), "45s"},
		{Age(7*time.Minute + 30*time.Second), "7m30s"},
		{Age(5*time.Hour + 30*time.Minute), "5h30m"},
		{Age(76 * time.Hour), "3d4h"},
		{Elapsed(250 * time.Millisecond), "250ms"},
		{Elapsed(1340 * time.Millisecond), "1.3s"},
		{Plural(1), ""},
		{Plural(0), "s"},
		{Plural(2), "s"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

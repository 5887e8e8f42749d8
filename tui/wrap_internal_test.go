package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// TestWrapKeepsNamesAndPathsWhole: lines break at spaces, never at a
// hyphen inside a name or flag; a path wider than the line breaks after a
// slash; nothing is lost and no line is wider than asked.
func TestWrapKeepsNamesAndPathsWhole(t *testing.T) {
	path := "/home/dev/.local/state/kiln/kube/a-rather-long-cluster-name/tokens"
	for _, tc := range []struct {
		s     string
		width int
		whole []string // each must appear unbroken on one line
	}{
		{"run kiln rotate-key kube kiln-demo-cluster --context kiln-local --token-dir " + path, 40,
			[]string{"rotate-key", "kiln-demo-cluster", "--context", "kiln-local", "--token-dir"}},
		{"Tokens   " + path, 30, []string{"a-rather-long-cluster-name/"}},
		{"\x1b[1mkiln-tenant-team-a\x1b[m is terminating (finalizer kubernetes)", 24, []string{"kiln-tenant-team-a"}},
	} {
		lines := wrap(tc.s, tc.width, 2)
		plain := make([]string, len(lines))
		for i, l := range lines {
			plain[i] = ansi.Strip(l)
			if w := ansi.StringWidth(l); w > tc.width {
				t.Errorf("line %q is %d cells, wider than %d", plain[i], w, tc.width)
			}
			if strings.HasSuffix(plain[i], "-") {
				t.Errorf("line %q breaks at a hyphen:\n%s", plain[i], strings.Join(plain, "\n"))
			}
		}
		for _, w := range tc.whole {
			found := false
			for _, l := range plain {
				found = found || strings.Contains(l, w)
			}
			if !found {
				t.Errorf("%q is broken across lines:\n%s", w, strings.Join(plain, "\n"))
			}
		}
		var words []string
		for _, l := range plain {
			words = append(words, strings.TrimSpace(l))
		}
		if got, want := strings.ReplaceAll(strings.Join(words, ""), " ", ""), strings.ReplaceAll(ansi.Strip(tc.s), " ", ""); got != want {
			t.Errorf("wrapping lost text:\n got %q\nwant %q", got, want)
		}
	}
}

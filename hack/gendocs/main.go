// Command gendocs writes kiln's command reference, docs/reference/, from
// the real cobra command tree (`make docs`). Run it from the repository
// root; internal/refdoc's test fails when the committed pages are stale.
package main

import (
	"fmt"
	"os"

	"github.com/kilnctl/kiln/internal/refdoc"
)

func main() {
	dir := refdoc.Dir
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	if err := refdoc.Write(dir); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}

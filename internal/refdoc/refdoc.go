// Package refdoc writes kiln's command reference (docs/reference/): one
// markdown page per command, generated from the real cobra command tree
// with github.com/spf13/cobra/doc, so that the reference never drifts
// from the commands. `make docs` (hack/gendocs) writes it; a test fails
// when the pages in docs/ differ from what this package generates.
//
// The package is kept out of the kiln binary: only hack/gendocs and tests
// import it.
package refdoc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/kilnctl/kiln/internal/cli"
)

// Dir is the reference's directory, relative to the repository root.
const Dir = "docs/reference"

// Pages generates the reference: file name (kiln_project_create.md) to
// content. It builds the command tree afresh, with no version stamped in
// and no date footer, so the pages depend on kiln's sources alone.
func Pages() (map[string][]byte, error) {
	root := cli.NewRoot(cli.BuildInfo{})
	disableAutoGenTag(root)
	tmp, err := os.MkdirTemp("", "kiln-refdoc-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := doc.GenMarkdownTree(root, tmp); err != nil {
		return nil, err
	}
	// Help topics (kiln help environment) are left out of the tree by
	// cobra/doc; they are pages of the reference too.
	var topics []*cobra.Command
	walk(root, func(c *cobra.Command) {
		if c.IsAdditionalHelpTopicCommand() {
			topics = append(topics, c)
		}
	})
	for _, c := range topics {
		var buf bytes.Buffer
		if err := doc.GenMarkdown(c, &buf); err != nil {
			return nil, err
		}
		name := strings.ReplaceAll(c.CommandPath(), " ", "_") + ".md"
		if err := os.WriteFile(filepath.Join(tmp, name), buf.Bytes(), 0o644); err != nil {
			return nil, err
		}
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return nil, err
	}
	pages := make(map[string][]byte, len(entries))
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(tmp, e.Name()))
		if err != nil {
			return nil, err
		}
		pages[e.Name()] = data
	}
	return pages, nil
}

// Write replaces the reference in dir with freshly generated pages:
// pages of commands that no longer exist are removed.
func Write(dir string) error {
	pages, err := Pages()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if _, ok := pages[filepath.Base(f)]; !ok {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	for _, name := range Names(pages) {
		if err := os.WriteFile(filepath.Join(dir, name), pages[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Stale compares the reference in dir with the generated pages and names
// every file that is missing, differs or should not be there.
func Stale(dir string) ([]string, error) {
	pages, err := Pages()
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, name := range Names(pages) {
		have, err := os.ReadFile(filepath.Join(dir, name))
		switch {
		case os.IsNotExist(err):
			stale = append(stale, fmt.Sprintf("%s: missing", filepath.Join(dir, name)))
		case err != nil:
			return nil, err
		case !bytes.Equal(have, pages[name]):
			stale = append(stale, fmt.Sprintf("%s: differs from the command tree", filepath.Join(dir, name)))
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if _, ok := pages[filepath.Base(f)]; !ok {
			stale = append(stale, fmt.Sprintf("%s: no such command any more", f))
		}
	}
	return stale, nil
}

// Names is the sorted file names of pages.
func Names(pages map[string][]byte) []string {
	names := make([]string, 0, len(pages))
	for n := range pages {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func disableAutoGenTag(c *cobra.Command) {
	walk(c, func(c *cobra.Command) { c.DisableAutoGenTag = true })
}

func walk(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, sub := range c.Commands() {
		walk(sub, f)
	}
}

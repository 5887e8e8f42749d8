package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Problem is one thing wrong with a config.
type Problem struct {
	File   string // empty when the config did not come from a file
	Line   int    // 1-based; 0 when unknown
	Column int    // 1-based; 0 when unknown
	// Path is the field path, e.g. spec.stacks[0].cpu; empty for the
	// document itself.
	Path    string
	Message string
}

// String renders FILE:LINE:COL: PATH: MESSAGE, leaving out what is unknown.
func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
			if p.Column > 0 {
				fmt.Fprintf(&b, ":%d", p.Column)
			}
		}
		b.WriteString(": ")
	}
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Problems is the error for an invalid config: one problem per line. The
// errors returned by this package wrap it (find it with errors.As).
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// sortProblems orders problems by position, then path, then message.
func sortProblems(ps Problems) {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(
			cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Column, b.Column),
			cmp.Compare(a.Path, b.Path),
			cmp.Compare(a.Message, b.Message),
		)
	})
}

// parentPath drops the last element of a field path: spec.stacks[0].cpu ->
// spec.stacks[0] -> spec.stacks -> spec -> "".
func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

func joinPath(parent, field string) string {
	if parent == "" {
		return field
	}
	return parent + "." + field
}

func indexPath(parent string, i int) string { return fmt.Sprintf("%s[%d]", parent, i) }

func stackPath(i int) string { return indexPath("spec.stacks", i) }

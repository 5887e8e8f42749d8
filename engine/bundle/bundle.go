// Package bundle writes a support bundle: one .tar.gz a support engineer
// can attach to a ticket, with an index of what is where. It holds what
// kiln read from a cluster, made safe to share: Secrets are reduced to
// name, type and key names, the trusted public keys to their ids, and
// server-side bookkeeping (managedFields, last-applied annotations) is
// dropped.
package bundle

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Bundle is a support bundle being written.
type Bundle struct {
	root  string
	now   time.Time
	tw    *tar.Writer
	gz    *gzip.Writer
	f     *os.File
	tmp   string
	path  string
	index []entry
	// Problems are what could not be collected (a denied list, an
	// unreachable log), written to problems.txt.
	Problems []string
	// Notes are what the bundle leaves out by design (Secrets under a
	// role that may not read them), written to notes.txt.
	Notes []string
	// Logs are the log files written, listed in logs.json.
	Logs []LogEntry
}

type entry struct{ name, what string }

// Create starts a bundle that Close writes to path (mode 0600): it is
// written to a temporary file beside path and renamed on Close, so a
// failed run leaves no half bundle. root is the directory inside the
// archive.
func Create(path, root string, now time.Time) (*Bundle, error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".kiln-support-*.tmp")
	if err != nil {
		return nil, fmt.Errorf("create support bundle %s: %w", path, err)
	}
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, fmt.Errorf("create support bundle %s: %w", path, err)
	}
	gz := gzip.NewWriter(f)
	return &Bundle{root: root, now: now, tw: tar.NewWriter(gz), gz: gz, f: f, tmp: f.Name(), path: path}, nil
}

// Add writes one file; what says in the index what it holds.
func (b *Bundle) Add(name, what string, data []byte) error {
	hdr := &tar.Header{Name: b.root + "/" + name, Mode: 0o600, Size: int64(len(data)), ModTime: b.now, Typeflag: tar.TypeReg}
	if err := b.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("support bundle: write %s: %w", name, err)
	}
	if _, err := b.tw.Write(data); err != nil {
		return fmt.Errorf("support bundle: write %s: %w", name, err)
	}
	b.index = append(b.index, entry{name, what})
	return nil
}

// AddJSON writes v as indented JSON.
func (b *Bundle) AddJSON(name, what string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("support bundle: encode %s: %w", name, err)
	}
	return b.Add(name, what, append(data, '\n'))
}

// Problem records something that could not be collected.
func (b *Bundle) Problem(format string, args ...any) {
	b.Problems = append(b.Problems, fmt.Sprintf(format, args...))
}

// Note records something left out by design, not a failure.
func (b *Bundle) Note(format string, args ...any) {
	b.Notes = append(b.Notes, fmt.Sprintf(format, args...))
}

// Files is how many files the bundle holds so far.
func (b *Bundle) Files() int { return len(b.index) }

// Close writes problems.txt and index.txt, finishes the archive and moves
// it to its path. Abort instead discards it.
func (b *Bundle) Close() error {
	logs := b.Logs
	if logs == nil {
		logs = []LogEntry{}
	}
	if err := b.AddJSON("logs.json", "every log file of the bundle: pod, container, lines, bytes, and whether it was truncated", logs); err != nil {
		b.Abort()
		return err
	}
	if len(b.Notes) > 0 {
		if err := b.Add("notes.txt", "what the bundle leaves out by design", []byte(strings.Join(b.Notes, "\n")+"\n")); err != nil {
			b.Abort()
			return err
		}
	}
	if len(b.Problems) > 0 {
		if err := b.Add("problems.txt", "what could not be collected, and why", []byte(strings.Join(b.Problems, "\n")+"\n")); err != nil {
			b.Abort()
			return err
		}
	}
	var idx strings.Builder
	fmt.Fprintf(&idx, "kiln support bundle, written %s\n\n", b.now.UTC().Format(time.RFC3339))
	entries := append([]entry{{"index.txt", "this index"}}, b.index...)
	sort.SliceStable(entries[1:], func(i, j int) bool { return entries[1+i].name < entries[1+j].name })
	for _, e := range entries {
		fmt.Fprintf(&idx, "%-60s %s\n", e.name, e.what)
	}
	if err := b.Add("index.txt", "this index", []byte(idx.String())); err != nil {
		b.Abort()
		return err
	}
	for _, c := range []io.Closer{b.tw, b.gz, b.f} {
		if err := c.Close(); err != nil {
			_ = os.Remove(b.tmp)
			return fmt.Errorf("write support bundle %s: %w", b.path, err)
		}
	}
	if err := os.Rename(b.tmp, b.path); err != nil {
		_ = os.Remove(b.tmp)
		return fmt.Errorf("write support bundle %s: %w", b.path, err)
	}
	return nil
}

// Abort discards the bundle.
func (b *Bundle) Abort() {
	_ = b.f.Close()
	_ = os.Remove(b.tmp)
}

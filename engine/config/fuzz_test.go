package config

import (
	"reflect"
	"testing"

	"github.com/kilnctl/kiln/engine/failure"
)

// FuzzParse checks that Parse never panics, that every failure is bad input
// (exit code 2), and that every accepted config survives Canonical and
// ParseCanonical unchanged. Without -fuzz it runs the seeds only.
func FuzzParse(f *testing.F) {
	seeds := []string{
		"",
		hdr,
		exampleFile,
		hdr + "---\n" + hdr,
		hdr + "spec: [\n",
		hdr + "spec:\n  tenants: &t [a, *t]\n",
		hdr + "spec:\n  domain: &d {a: b}\n  gateway: {image: *d}\n",
		hdr + "spec:\n  gateway:\n    <<: {image: x}\n",
		hdr + "spec:\n  ? [a]\n  : b\n",
		hdr + "spec:\n  stacks:\n  - {name: Web, image: \"a\tb\", port: 0, cpu: \"\", memory: lots}\n",
		hdr + "spec:\n  gateway: {replicas: 4294967297}\n",
		hdr + "spec:\n  tenants: [true, ~, 1, 1.5, 2001-12-14]\n",
		hdr + "metadata: {name: dev2}\nkind: x\n",
		"- a\n",
		"{a: *b}\n",
		"\xff\xfe",
		"!!binary aGVsbG8=",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("f.yaml", data, "dev1")
		if err != nil {
			if c != nil {
				t.Fatalf("config and error both returned")
			}
			if code := failure.Of(err); code != failure.Input {
				t.Fatalf("kind %v for %v", code, err)
			}
			return
		}
		if err := c.Validate("dev1"); err != nil {
			t.Fatalf("Parse accepted an invalid config: %v", err)
		}
		out, err := c.Canonical()
		if err != nil {
			t.Fatalf("Canonical: %v", err)
		}
		back, err := ParseCanonical(out)
		if err != nil {
			t.Fatalf("ParseCanonical(%q): %v", out, err)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip:\n%+v\nwant\n%+v", back, c)
		}
		if d := Diff(c, back); len(d) != 0 {
			t.Fatalf("Diff after round trip: %q", d)
		}
	})
}

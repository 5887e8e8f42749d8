// Over 400 lines on purpose: the config decoder walks the YAML node tree
// once, reporting every problem with its FILE:LINE:COL; each field's check
// is a few lines of one decoder.

package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/input"
)

// MaxFileSize bounds a config file.
const MaxFileSize = 1 << 20

// MaxProblems bounds the problems reported for one file; the rest are
// counted in a last line.
const MaxProblems = 100

// CanonicalSource names the stored config in error messages.
const CanonicalSource = "kiln-system/kiln-config[config.yaml]"

// Load reads the config file at path (given with -c/--config) and returns
// the effective config for cluster NAME; see Parse. A file that cannot be
// read is failure.BadInput naming the path and -c/--config.
func Load(path string, name string) (*ClusterConfig, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data, name)
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, input.New(failure.Input, input.Config, path, "{input} %q: cannot read: %v", path, pathErr(err))
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, input.New(failure.Input, input.Config, path, "{input} %q: cannot read: is a directory", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, input.New(failure.Input, input.Config, path, "{input} %q: cannot read: %v", path, pathErr(err))
	}
	if len(data) > MaxFileSize {
		return nil, input.New(failure.Input, input.Config, path, "{input} %q: larger than %d bytes; not a cluster config", path, MaxFileSize)
	}
	return data, nil
}

// pathErr drops the path an *fs.PathError repeats.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Parse decodes data (named filename in messages) strictly, fills defaults
// and validates the result for cluster NAME. Every problem (syntax, unknown
// or duplicate field, wrong type, bad value) is reported in one error, one
// line each as FILE:LINE:COL: PATH: MESSAGE; the error is failure.BadInput and
// wraps Problems. A field spelled out with an empty value (`tenants: []`,
// `replicas: 0`, `domain: ""`) is an error rather than a request for the
// default; null (`domain: ~`) means unset.
func Parse(filename string, data []byte, name string) (*ClusterConfig, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	c, ps := parse(filename, data, name)
	if len(ps) > 0 {
		return nil, failure.BadInput("%w", ps)
	}
	return c, nil
}

// ParseCanonical reads back what Canonical produced (the content of
// ConfigMap kiln-system/kiln-config, key config.yaml), as strictly as Parse;
// the cluster NAME is its metadata.name. A stored config that does not parse
// is an operation failure (exit code 1), not bad input; the error wraps
// Problems.
func ParseCanonical(data []byte) (*ClusterConfig, error) {
	c, ps := parse(CanonicalSource, data, "")
	if len(ps) > 0 {
		return nil, failure.Wrap(failure.Failed, fmt.Errorf("stored cluster config is invalid:\n%w", ps))
	}
	return c, nil
}

// parse does Parse; name "" takes the NAME from metadata.name.
func parse(filename string, data []byte, name string) (*ClusterConfig, Problems) {
	if len(data) > MaxFileSize {
		return nil, Problems{{File: filename, Message: fmt.Sprintf("larger than %d bytes; not a cluster config", MaxFileSize)}}
	}
	root, ps := readDocument(filename, data)
	if len(ps) > 0 {
		return nil, ps
	}
	d := &decoder{
		file: filename,
		pos:  map[string]mark{},
		set:  map[string]bool{},
		bad:  map[string]bool{},
	}
	c := &ClusterConfig{}
	d.value(root, reflect.ValueOf(c).Elem(), "")
	if d.bad[""] {
		return nil, d.problems
	}
	if d.aliases > MaxAliases {
		// What was decoded is a fragment: report the budget alone.
		for _, p := range d.problems {
			if strings.Contains(p.Message, "alias uses") {
				return nil, Problems{p}
			}
		}
	}
	if c.Metadata.Name == "" && !d.bad["metadata.name"] && !d.set["metadata.name"] {
		c.Metadata.Name = name
	}
	c.applyDefaults(d.set)
	for _, p := range validate(c, name, func(p string) bool { return d.set[p] }) {
		if d.badOrUnder(p.Path) {
			continue
		}
		m := d.find(p.Path)
		p.File, p.Line, p.Column = filename, m.line, m.col
		d.problems = append(d.problems, p)
	}
	if len(d.problems) > 0 {
		sortProblems(d.problems)
		if n := len(d.problems) - MaxProblems; n > 0 {
			d.problems = append(d.problems[:MaxProblems:MaxProblems],
				Problem{File: filename, Message: fmt.Sprintf("and %d more problems", n)})
		}
		return nil, d.problems
	}
	return c, nil
}

var yamlLineErr = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// readDocument parses data and returns the root node of its only
// non-empty document.
func readDocument(file string, data []byte) (root *yaml.Node, ps Problems) {
	defer func() {
		// The YAML parser reports its own errors as values; anything else it
		// throws is still bad input, not a reason for kiln to crash.
		if r := recover(); r != nil {
			root, ps = nil, Problems{{File: file, Message: fmt.Sprintf("invalid YAML: parser failure: %v", r)}}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, Problems{syntaxProblem(file, err)}
		}
		if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || isNull(doc.Content[0]) {
			continue // an empty document, e.g. a trailing "---"
		}
		if root != nil {
			return nil, Problems{{File: file, Line: doc.Line, Column: doc.Column,
				Message: fmt.Sprintf("a second YAML document; the config must be exactly one document (the first is at line %d)", root.Line)}}
		}
		root = doc.Content[0]
	}
	if root == nil {
		return nil, Problems{{File: file, Message: "empty config file; expected one ClusterConfig document"}}
	}
	return root, nil
}

func syntaxProblem(file string, err error) Problem {
	msg := err.Error()
	if m := yamlLineErr.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return Problem{File: file, Line: line, Message: "invalid YAML: " + m[2]}
	}
	return Problem{File: file, Message: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

type mark struct{ line, col int }

// decoder walks a YAML node tree against a Go struct by its yaml tags.
type decoder struct {
	file     string
	problems Problems
	pos      map[string]mark // path -> where its value is
	set      map[string]bool // paths the file gave a non-null value
	bad      map[string]bool // paths whose value could not be decoded
	aliases  int             // alias uses followed so far (MaxAliases)
}

// MaxAliases bounds how many alias uses a config may make. A cluster
// config needs few; the bound keeps a hostile one (in a -c file or a
// kiln-config read from a cluster) from costing more than its size.
const MaxAliases = 100

// deref follows alias n within the budget. It reports false when n is an
// alias that cannot or may not be followed (the problem is recorded).
func (d *decoder) deref(n *yaml.Node, path string) (*yaml.Node, bool) {
	if n.Kind != yaml.AliasNode {
		return n, true
	}
	if n.Alias == nil {
		d.fail(n, path, "alias to an unknown anchor")
		return nil, false
	}
	d.aliases++
	if d.aliases > MaxAliases {
		if d.aliases == MaxAliases+1 {
			d.fail(n, path, "more than %d alias uses; spell the values out", MaxAliases)
		}
		d.bad[path] = true
		return nil, false
	}
	return n.Alias, true
}

func (d *decoder) add(n *yaml.Node, path, format string, args ...any) {
	d.problems = append(d.problems, Problem{
		File: d.file, Line: n.Line, Column: n.Column, Path: path,
		Message: fmt.Sprintf(format, args...),
	})
}

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	d.add(n, path, format, args...)
	d.bad[path] = true
}

// badOrUnder reports whether path or one of its parents failed to decode.
func (d *decoder) badOrUnder(path string) bool {
	for {
		if d.bad[path] {
			return true
		}
		if path == "" {
			return false
		}
		path = parentPath(path)
	}
}

// find returns where path's value is, else where its nearest parent is.
func (d *decoder) find(path string) mark {
	for {
		if m, ok := d.pos[path]; ok {
			return m
		}
		if path == "" {
			return mark{}
		}
		path = parentPath(path)
	}
}

// value decodes n into v. A null leaves v unset.
func (d *decoder) value(n *yaml.Node, v reflect.Value, path string) {
	at := n // aliases are reported where they are used
	n, ok := d.deref(n, path)
	if !ok {
		return
	}
	d.pos[path] = mark{at.Line, at.Column}
	if isNull(n) {
		return
	}
	if v.Kind() == reflect.Pointer {
		// An optional section (spec.gateway.tls): present when spelled out.
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Struct:
		ok = d.mapping(at, n, v, path)
	case reflect.Slice:
		ok = d.sequence(at, n, v, path)
	case reflect.String:
		ok = d.str(at, n, v, path)
	case reflect.Int32:
		ok = d.integer(at, n, v, path)
	default:
		panic(fmt.Sprintf("config: no decoder for %s at %s", v.Type(), path))
	}
	if ok {
		d.set[path] = true
	}
}

func (d *decoder) mapping(at, n *yaml.Node, v reflect.Value, path string) bool {
	if n.Kind != yaml.MappingNode {
		d.fail(at, path, "expected a mapping, got %s", describe(n))
		return false
	}
	fields := fieldsOf(v.Type())
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		kn, ok := d.deref(k, path)
		if !ok {
			continue
		}
		if kn.Kind != yaml.ScalarNode {
			d.add(k, path, "a mapping key must be a field name, got %s", describe(kn))
			continue
		}
		fp := joinPath(path, kn.Value)
		if kn.ShortTag() == "!!merge" {
			d.add(k, fp, "merge keys are not supported; spell the fields out")
			continue
		}
		if first, dup := seen[kn.Value]; dup {
			d.add(k, fp, "duplicate key (first at line %d, column %d)", first.Line, first.Column)
			continue
		}
		seen[kn.Value] = k
		idx := -1
		for j, f := range fields {
			if f.name == kn.Value {
				idx = j
				break
			}
		}
		if idx < 0 {
			d.add(k, fp, "unknown field (%sknown: %s)", suggest(fields, kn.Value), knownList(fields))
			continue
		}
		d.value(val, v.Field(fields[idx].index), fp)
	}
	return true
}

func (d *decoder) sequence(at, n *yaml.Node, v reflect.Value, path string) bool {
	if n.Kind != yaml.SequenceNode {
		d.fail(at, path, "expected a list, got %s", describe(n))
		return false
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, e := range n.Content {
		ep := indexPath(path, i)
		r := e
		if r.Kind == yaml.AliasNode && r.Alias != nil {
			r = r.Alias // only looked at; value() below follows (and counts) it
		}
		if isNull(r) {
			d.fail(e, ep, "expected %s, got null", kindName(v.Type().Elem()))
			continue
		}
		d.value(e, s.Index(i), ep)
	}
	v.Set(s)
	return true
}

func (d *decoder) str(at, n *yaml.Node, v reflect.Value, path string) bool {
	if n.Kind != yaml.ScalarNode {
		d.fail(at, path, "expected a string, got %s", describe(n))
		return false
	}
	switch tag := n.ShortTag(); tag {
	case "!!str", "!!int", "!!float", "!!timestamp":
		// The text as written: cpu: 1, memory: 1e9, tenants: [123].
	case "!!bool":
		d.fail(at, path, "expected a string, got the boolean %s (quote it if you mean the string)", n.Value)
		return false
	default:
		d.fail(at, path, "expected a string, got a value tagged %s", tag)
		return false
	}
	v.SetString(n.Value)
	return true
}

func (d *decoder) integer(at, n *yaml.Node, v reflect.Value, path string) bool {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		d.fail(at, path, "expected an integer, got %s", describe(n))
		return false
	}
	var i int64
	if err := n.Decode(&i); err != nil {
		d.fail(at, path, "expected an integer, got %s", describe(n))
		return false
	}
	if i < math.MinInt32 || i > math.MaxInt32 {
		d.fail(at, path, "integer %s is out of range", n.Value)
		return false
	}
	v.SetInt(i)
	return true
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names what a node is, for "expected X, got Y".
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "null"
		}
		return quoteShort(n.Value)
	case yaml.AliasNode:
		return "an alias"
	}
	return "a YAML document"
}

// quoteShort quotes s, eliding the middle of long values.
func quoteShort(s string) string {
	const max = 60
	if r := []rune(s); len(r) > max {
		s = string(r[:max/2]) + "…" + string(r[len(r)-max/2:])
	}
	return strconv.Quote(s)
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct:
		return "a mapping"
	case reflect.Slice:
		return "a list"
	case reflect.String:
		return "a string"
	}
	return "an integer"
}

type field struct {
	name  string
	index int
}

// fieldsOf lists a struct's fields by yaml name, in declaration order.
func fieldsOf(t reflect.Type) []field {
	var fs []field
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if name == "-" || !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		fs = append(fs, field{name: name, index: i})
	}
	return fs
}

func knownList(fs []field) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}

// suggest offers a field that differs from name only in case.
func suggest(fs []field, name string) string {
	for _, f := range fs {
		if strings.EqualFold(f.name, name) {
			return "did you mean " + f.name + "? "
		}
	}
	return ""
}

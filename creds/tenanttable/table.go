// Package tenanttable is kiln-auth's tenant table (tenants.json): the
// platform id every tenant token carries as aud, and the current token ids
// (tid) of each tenant. It has no dependencies beyond the standard
// library, so packages that describe kiln-auth (engine/platform, and the
// modules that import it) need not pull in creds. See creds.Verifier for
// the rules a token is judged by.
package tenanttable

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
)

// File is the key of kiln-auth (beside keys.json) that holds the
// tenant table, and the file of the same name the gateway reads from the
// mounted ConfigMap.
//
// The table is what makes tenant tokens revocable one by one and binds
// them to one platform (DESIGN.md §17, docs/security.md):
//
//	{"aud":"<platform id>","tenants":{"TENANT":["<tid>",...]},"legacy":false}
//
// aud is the platform's identity: 32 random hex digits generated when the
// table is first written (create, or the upgrade that migrates a platform
// of an earlier kiln) and kept for the platform's life (rotate-key and
// upgrade copy it). Every token carries it as its aud claim, so a second
// cluster with the same NAME — even one holding the same key — refuses
// the first's tokens: its table has another aud.
//
// tid is one issue of one tenant's token: 32 random hex digits. A token is
// accepted only while its tid is listed under its sub. Removing a tenant
// removes its entry; a tenant of the same name added later gets a fresh
// tid, so the old token never stands in for the new one. Rotating one
// tenant's token publishes the new tid beside the old, swaps the token
// dir, then drops the old tid.
//
// legacy: tokens without aud and tid (signed by a kiln before the table)
// are still accepted. Only set while an upgrade migrates such a platform:
// the table with the new tids is published first (legacy on), the token
// dir swapped to tokens that carry them, then legacy is turned off. With
// no table at all (a platform no kiln with tables has touched) the
// verifier accepts legacy tokens only.
const File = "tenants.json"

// Table is the decoded tenants.json.
type Table struct {
	Audience string              `json:"aud"`
	Tenants  map[string][]string `json:"tenants"`
	Legacy   bool                `json:"legacy,omitempty"`
}

// NewRandomID returns 32 random lowercase hex digits: a platform id (aud)
// or a token id (tid).
func NewRandomID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func ValidID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// NewTable is a table with a fresh platform id and no tenants.
func NewTable() (*Table, error) {
	aud, err := NewRandomID()
	if err != nil {
		return nil, err
	}
	return &Table{Audience: aud, Tenants: map[string][]string{}}, nil
}

// ParseTable decodes tenants.json strictly: unknown fields, a
// malformed aud or tid, or a bad tenant name reject the whole table (a
// verifier must never guess at what a damaged table meant).
func ParseTable(data []byte) (*Table, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var t Table
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("parse tenant table: %w", syntaxOnly(err))
	}
	if dec.More() {
		return nil, errors.New("parse tenant table: trailing data")
	}
	if !ValidID(t.Audience) {
		return nil, errors.New("parse tenant table: aud is not 32 lowercase hex digits")
	}
	if t.Tenants == nil {
		t.Tenants = map[string][]string{}
	}
	for tenant, ids := range t.Tenants {
		if !dnsLabel.MatchString(tenant) {
			return nil, errors.New("parse tenant table: a tenant name is not a DNS label")
		}
		for _, id := range ids {
			if !ValidID(id) {
				return nil, fmt.Errorf("parse tenant table: a tid of tenant %s is not 32 lowercase hex digits", tenant)
			}
		}
	}
	return &t, nil
}

// Marshal returns the table's canonical bytes (sorted tenants and tids).
func (t *Table) Marshal() ([]byte, error) {
	c := t.Clone()
	for k := range c.Tenants {
		sort.Strings(c.Tenants[k])
	}
	return json.Marshal(c) // map keys marshal sorted
}

// Digest is the SHA-256 (hex) of the canonical bytes, "" for no table.
func (t *Table) Digest() string {
	if t == nil {
		return ""
	}
	b, err := t.Marshal()
	if err != nil {
		return ""
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Clone is a deep copy (nil for nil).
func (t *Table) Clone() *Table {
	if t == nil {
		return nil
	}
	c := &Table{Audience: t.Audience, Legacy: t.Legacy, Tenants: make(map[string][]string, len(t.Tenants))}
	for k, v := range t.Tenants {
		c.Tenants[k] = slices.Clone(v)
	}
	return c
}

// Equal reports whether two tables say the same (nil equals nil only).
func (t *Table) Equal(o *Table) bool {
	if t == nil || o == nil {
		return t == o
	}
	return t.Digest() == o.Digest()
}

// Accepts reports whether tid is a current token id of tenant.
func (t *Table) Accepts(tenant, tid string) bool {
	return t != nil && slices.Contains(t.Tenants[tenant], tid)
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// syntaxOnly keeps the class of a JSON error without the input text
// json.Unmarshal may quote.
func syntaxOnly(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("syntax error at byte %d", se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("a value is a JSON %s where another type is wanted", te.Value)
	}
	return errors.New("invalid JSON")
}

package creds

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TenantsFile is the key of kiln-auth (beside keys.json) that holds the
// tenant table, and the file of the same name the gateway reads from the
// mounted ConfigMap.
//
// The table is what makes tenant tokens revocable one by one and binds
// them to one platform (DESIGN.md §17, README "Security"):
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
const TenantsFile = "tenants.json"

// TenantTable is the decoded tenants.json.
type TenantTable struct {
	Audience string              `json:"aud"`
	Tenants  map[string][]string `json:"tenants"`
	Legacy   bool                `json:"legacy,omitempty"`
}

// TokenID is what binds one token to one platform and one issue: its aud
// and tid claims. The zero value is a legacy token's (neither claim).
type TokenID struct {
	Audience string
	ID       string
}

// IsZero reports a legacy token's id.
func (id TokenID) IsZero() bool { return id.Audience == "" && id.ID == "" }

// NewRandomID returns 32 random lowercase hex digits: a platform id (aud)
// or a token id (tid).
func NewRandomID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func validRandomID(s string) bool {
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

// NewTenantTable is a table with a fresh platform id and no tenants.
func NewTenantTable() (*TenantTable, error) {
	aud, err := NewRandomID()
	if err != nil {
		return nil, err
	}
	return &TenantTable{Audience: aud, Tenants: map[string][]string{}}, nil
}

// ParseTenantTable decodes tenants.json strictly: unknown fields, a
// malformed aud or tid, or a bad tenant name reject the whole table (a
// verifier must never guess at what a damaged table meant).
func ParseTenantTable(data []byte) (*TenantTable, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var t TenantTable
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("parse tenant table: %w", jsonSyntaxOnly(err))
	}
	if dec.More() {
		return nil, errors.New("parse tenant table: trailing data")
	}
	if !validRandomID(t.Audience) {
		return nil, errors.New("parse tenant table: aud is not 32 lowercase hex digits")
	}
	if t.Tenants == nil {
		t.Tenants = map[string][]string{}
	}
	for tenant, ids := range t.Tenants {
		if err := checkName("tenant", tenant); err != nil {
			return nil, fmt.Errorf("parse tenant table: %w", err)
		}
		for _, id := range ids {
			if !validRandomID(id) {
				return nil, fmt.Errorf("parse tenant table: a tid of tenant %s is not 32 lowercase hex digits", tenant)
			}
		}
	}
	return &t, nil
}

// Marshal returns the table's canonical bytes (sorted tenants and tids).
func (t *TenantTable) Marshal() ([]byte, error) {
	c := t.Clone()
	for k := range c.Tenants {
		sort.Strings(c.Tenants[k])
	}
	return json.Marshal(c) // map keys marshal sorted
}

// Digest is the SHA-256 (hex) of the canonical bytes, "" for no table.
func (t *TenantTable) Digest() string {
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
func (t *TenantTable) Clone() *TenantTable {
	if t == nil {
		return nil
	}
	c := &TenantTable{Audience: t.Audience, Legacy: t.Legacy, Tenants: make(map[string][]string, len(t.Tenants))}
	for k, v := range t.Tenants {
		c.Tenants[k] = slices.Clone(v)
	}
	return c
}

// Equal reports whether two tables say the same (nil equals nil only).
func (t *TenantTable) Equal(o *TenantTable) bool {
	if t == nil || o == nil {
		return t == o
	}
	return t.Digest() == o.Digest()
}

// Accepts reports whether tid is a current token id of tenant.
func (t *TenantTable) Accepts(tenant, tid string) bool {
	return t != nil && slices.Contains(t.Tenants[tenant], tid)
}

// ID is the token id a token of tenant signed for this table carries.
func (t *TenantTable) ID(tid string) TokenID { return TokenID{Audience: t.Audience, ID: tid} }

// Sentinel errors of Verifier.Verify, for errors.Is (each also wraps
// ErrBadToken).
var (
	// ErrWrongAudience: the token is bound to another platform.
	ErrWrongAudience = errors.New("token is bound to another platform (aud)")
	// ErrRevoked: the token's tid is not a current one of its tenant
	// (removed tenant, rotated token, or a legacy token once the table
	// exists).
	ErrRevoked = errors.New("token is not current for its tenant (revoked or replaced)")
)

// Verifier is the one set of rules a tenant token is judged by: the
// gateway's (internal/gateway, from the mounted files) and kiln's own
// "tokens valid" checks (wait, status, from the kiln-auth it read).
type Verifier struct {
	// Keys are kiln-auth's keys.json (key id -> public key).
	Keys map[string]*rsa.PublicKey
	// Table is kiln-auth's tenants.json, nil when kiln-auth has none.
	Table *TenantTable
	// Cluster is NAME: iss must be kiln:NAME.
	Cluster string
}

// NewVerifier parses keys.json and tenants.json (nil or empty: none).
func NewVerifier(cluster string, keysJSON, tenantsJSON []byte) (*Verifier, error) {
	keys, err := ParseTrustedKeys(keysJSON)
	if err != nil {
		return nil, err
	}
	v := &Verifier{Keys: keys, Cluster: cluster}
	if len(bytes.TrimSpace(tenantsJSON)) > 0 {
		if v.Table, err = ParseTenantTable(tenantsJSON); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// Verify checks token and returns the tenant it names and its key id:
// RS256 signed by a trusted key its kid names, iss kiln:NAME, iat and sub
// present (as VerifyTenantToken), and then the table:
//   - a token with aud or tid: the table exists, aud is the table's, tid
//     is listed under sub;
//   - a token with neither (a legacy token): accepted only when there is
//     no table or the table is in its migration (legacy on).
//
// Errors never contain token text.
func (v *Verifier) Verify(token string) (tenant, kid string, err error) {
	var claims tokenClaims
	tenant, kid, err = verifyTenant(token, v.Keys, v.Cluster, &claims)
	if err != nil {
		return "", "", err
	}
	fail := func(cause error) (string, string, error) {
		return "", "", fmt.Errorf("verify token of tenant %q, cluster %q: %w: %w", tenant, v.Cluster, ErrBadToken, cause)
	}
	aud := claims.Audience
	if len(aud) == 0 && claims.Tid == "" {
		if v.Table == nil || v.Table.Legacy {
			return tenant, kid, nil
		}
		return fail(fmt.Errorf("%w: the token has no tid and kiln-auth has a tenant table", ErrRevoked))
	}
	if v.Table == nil {
		return fail(fmt.Errorf("%w: kiln-auth has no tenant table to check its tid against", ErrRevoked))
	}
	if len(aud) != 1 || aud[0] != v.Table.Audience {
		return fail(ErrWrongAudience)
	}
	if !v.Table.Accepts(tenant, claims.Tid) {
		return fail(ErrRevoked)
	}
	return tenant, kid, nil
}

// VerifyFor is Verify for a token that must be tenant's.
func (v *Verifier) VerifyFor(token, tenant string) error {
	got, _, err := v.Verify(token)
	if err != nil {
		return err
	}
	if got != tenant {
		return fmt.Errorf("verify token of tenant %q, cluster %q: %w: sub claim is not %q", tenant, v.Cluster, ErrBadToken, tenant)
	}
	return nil
}

// TokenIDOf returns the aud and tid claims of token without verifying it
// (the caller has: Load verified every token of a directory).
func TokenIDOf(token string) (TokenID, error) {
	var c tokenClaims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &c); err != nil {
		return TokenID{}, fmt.Errorf("read token claims: %w", tokenError(err, "", "", ""))
	}
	id := TokenID{ID: c.Tid}
	if len(c.Audience) > 0 {
		id.Audience = c.Audience[0]
	}
	return id, nil
}

// TokenIDs are the aud and tid of every token of td.
func (td *TokenDir) TokenIDs() (map[string]TokenID, error) {
	out := make(map[string]TokenID, len(td.Tokens))
	for t, tok := range td.Tokens {
		id, err := TokenIDOf(tok)
		if err != nil {
			return nil, fmt.Errorf("tenant %s: %w", t, err)
		}
		out[t] = id
	}
	return out, nil
}

// Reissue signs a new token, with the directory's key, for every tenant
// of ids (added to the manifest when missing), carrying that id. Nothing
// is written; see Write or ReissueDir.
func (td *TokenDir) Reissue(ids map[string]TokenID, now time.Time) error {
	iat := now.UTC().Truncate(time.Second)
	tenants := make([]string, 0, len(ids))
	for t := range ids {
		tenants = append(tenants, t)
	}
	sort.Strings(tenants)
	for _, t := range tenants {
		if err := checkName("tenant", t); err != nil {
			return fmt.Errorf("reissue tokens in %s: %w", td.Path, err)
		}
		tok, err := SignTenantToken(td.Key, td.Manifest.KeyID, td.Manifest.Cluster, t, ids[t], iat)
		if err != nil {
			return fmt.Errorf("reissue tokens in %s: %w", td.Path, err)
		}
		if !td.Manifest.HasTenant(t) {
			td.Manifest.Tenants = append(td.Manifest.Tenants, t)
		}
		if td.Tokens == nil {
			td.Tokens = map[string]string{}
		}
		td.Tokens[t] = tok
	}
	return nil
}

// ReissueDir is Reissue on the directory dir, rewritten atomically
// (Write: the new tokens replace the old all at once). When ids is empty
// nothing is written.
func ReissueDir(dir string, ids map[string]TokenID, now time.Time) (*TokenDir, error) {
	td, err := Load(dir)
	if err != nil {
		return nil, fmt.Errorf("reissue tokens: %w", err)
	}
	if len(ids) == 0 {
		return td, nil
	}
	if err := td.Reissue(ids, now); err != nil {
		return nil, err
	}
	if err := Write(td.Path, td); err != nil {
		return nil, fmt.Errorf("reissue tokens: %w", err)
	}
	return td, nil
}

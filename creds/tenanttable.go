package creds

import (
	"bytes"
	"crypto/rsa"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/kilnctl/kiln/creds/tenanttable"
)

// TenantsFile is the key of kiln-auth beside keys.json holding the tenant
// table, and the file of that name the gateway reads (package tenanttable
// describes it).
const TenantsFile = tenanttable.File

// TenantTable is kiln-auth's tenant table (tenanttable.Table).
type TenantTable = tenanttable.Table

// ParseTenantTable decodes tenants.json strictly (tenanttable.ParseTable).
func ParseTenantTable(data []byte) (*TenantTable, error) { return tenanttable.ParseTable(data) }

// NewTenantTable is a table with a fresh platform id (tenanttable.NewTable).
func NewTenantTable() (*TenantTable, error) { return tenanttable.NewTable() }

// NewRandomID returns 32 random hex digits (tenanttable.NewRandomID).
func NewRandomID() (string, error) { return tenanttable.NewRandomID() }

func validRandomID(s string) bool { return tenanttable.ValidID(s) }

// TokenID is what binds one token to one platform and one issue: its aud
// and tid claims. The zero value is a legacy token's (neither claim).
type TokenID struct {
	Audience string
	ID       string
}

// IsZero reports a legacy token's id.
func (id TokenID) IsZero() bool { return id.Audience == "" && id.ID == "" }

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

package creds

import (
	"crypto/rsa"
	"errors"
	"strings"
	"testing"
)

func mustID(t *testing.T) string {
	t.Helper()
	id, err := NewRandomID()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestVerifierTenantTable is the rule set the gateway and kiln's checks
// share: each refusal of DESIGN §17 tenant revocation, and what stays
// accepted.
func TestVerifierTenantTable(t *testing.T) {
	k := testKey()
	kid := mustKeyID(t, k)
	keys := map[string]*rsa.PublicKey{kid: &k.PublicKey}
	aud, tid, tidOld := mustID(t), mustID(t), mustID(t)
	sign := func(tenant string, id TokenID) string {
		t.Helper()
		tok, err := SignTenantToken(k, kid, "dev1", tenant, id, testNow)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	table := &TenantTable{Audience: aud, Tenants: map[string][]string{"a": {tid}}}
	bound := sign("a", TokenID{aud, tid})
	legacy := sign("a", TokenID{})
	cases := []struct {
		name  string
		table *TenantTable
		tok   string
		want  error // nil: accepted
	}{
		{"current token", table, bound, nil},
		{"replaced token (tid no longer listed)", table, sign("a", TokenID{aud, tidOld}), ErrRevoked},
		{"removed tenant", table, sign("b", TokenID{aud, tid}), ErrRevoked},
		{"another platform, same name and key", table, sign("a", TokenID{mustID(t), tid}), ErrWrongAudience},
		{"legacy token once the table exists", table, legacy, ErrRevoked},
		{"legacy token during the migration", &TenantTable{Audience: aud, Legacy: true, Tenants: table.Tenants}, legacy, nil},
		{"legacy token without a table", nil, legacy, nil},
		{"bound token without a table", nil, bound, ErrRevoked},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := &Verifier{Keys: keys, Table: c.table, Cluster: "dev1"}
			tenant, _, err := v.Verify(c.tok)
			switch {
			case c.want == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want == nil && tenant != "a":
				t.Fatalf("tenant %q", tenant)
			case c.want != nil && (!errors.Is(err, c.want) || !errors.Is(err, ErrBadToken)):
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if err != nil {
				assertNoSecretText(t, err.Error(), []string{c.tok})
			}
		})
	}
	v := &Verifier{Keys: keys, Table: table, Cluster: "dev1"}
	if err := v.VerifyFor(bound, "b"); err == nil {
		t.Error("VerifyFor accepted a token for another tenant")
	}
}

func TestTenantTableParseIsStrict(t *testing.T) {
	aud, tid := mustID(t), mustID(t)
	good := `{"aud":"` + aud + `","tenants":{"a":["` + tid + `"]}}`
	tb, err := ParseTenantTable([]byte(good))
	if err != nil || !tb.Accepts("a", tid) {
		t.Fatalf("good table: %v %+v", err, tb)
	}
	round, err := tb.Marshal()
	if err != nil || string(round) != good {
		t.Errorf("canonical bytes %s, want %s (%v)", round, good, err)
	}
	for name, bad := range map[string]string{
		"unknown field":  `{"aud":"` + aud + `","tenants":{},"extra":1}`,
		"short aud":      `{"aud":"abc","tenants":{}}`,
		"bad tid":        `{"aud":"` + aud + `","tenants":{"a":["XYZ"]}}`,
		"bad tenant":     `{"aud":"` + aud + `","tenants":{"A B":["` + tid + `"]}}`,
		"not json":       `{`,
		"trailing data":  good + good,
		"tenants a list": `{"aud":"` + aud + `","tenants":["a"]}`,
	} {
		if _, err := ParseTenantTable([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), tid) {
			t.Errorf("%s: error quotes input: %v", name, err)
		}
	}
}

// TestReissueKeepsKeyAndBindsTokens: Reissue signs with the directory's
// key, carrying the ids given, and TokenIDs reads them back; a zero id
// gives a legacy token.
func TestReissueKeepsKeyAndBindsTokens(t *testing.T) {
	td, err := NewTokenDir("dev1", "kube", "ctx", testKey(), []string{"a", "b"}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	aud, tid := mustID(t), mustID(t)
	if err := td.Reissue(map[string]TokenID{"a": {aud, tid}, "c": {aud, mustID(t)}}, testNow); err != nil {
		t.Fatal(err)
	}
	if err := td.validate(); err != nil {
		t.Fatalf("reissued dir does not validate: %v", err)
	}
	ids, err := td.TokenIDs()
	if err != nil {
		t.Fatal(err)
	}
	if ids["a"] != (TokenID{aud, tid}) || !ids["b"].IsZero() || ids["c"].Audience != aud || !td.Manifest.HasTenant("c") {
		t.Errorf("ids = %+v, tenants %v", ids, td.Manifest.Tenants)
	}
	if _, err := SignTenantToken(testKey(), td.Manifest.KeyID, "dev1", "a", TokenID{Audience: aud}, testNow); err == nil {
		t.Error("an aud without a tid was signed")
	}
}

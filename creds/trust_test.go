package creds

import (
	"crypto/rsa"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

func TestVerifyTenantToken(t *testing.T) {
	key, other := testKey(), otherKey()
	id := mustKeyID(t, key)
	trusted := map[string]*rsa.PublicKey{id: &key.PublicKey}
	good, err := SignToken(key, id, "dev1", "staging", testNow)
	if err != nil {
		t.Fatal(err)
	}
	tenant, kid, err := VerifyTenantToken(good, trusted, "dev1")
	if err != nil || tenant != "staging" || kid != id {
		t.Fatalf("VerifyTenantToken = %q, %q, %v; want staging, %s, nil", tenant, kid, err, id)
	}
	otherPub := map[string]*rsa.PublicKey{mustKeyID(t, other): &other.PublicKey}
	cases := []struct {
		name    string
		token   string
		trusted map[string]*rsa.PublicKey
		cluster string
		wantMsg string
	}{
		{"untrusted key", good, otherPub, "dev1", "not trusted"},
		{"wrong iss", good, trusted, "prod", `iss claim is not "kiln:prod"`},
		{"tampered", tamper(good), trusted, "dev1", "signature does not verify"},
		{"no sub", forge(t, jwt.SigningMethodRS256, key, id, jwt.MapClaims{"iss": "kiln:dev1", "iat": testNow.Unix()}), trusted, "dev1", "no sub"},
		{"no iat", forge(t, jwt.SigningMethodRS256, key, id, jwt.MapClaims{"iss": "kiln:dev1", "sub": "x"}), trusted, "dev1", "iat"},
		{"alg HS256", forge(t, jwt.SigningMethodHS256, []byte("k"), id, jwt.MapClaims{"iss": "kiln:dev1", "sub": "x", "iat": 1}), trusted, "dev1", "not RS256"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := VerifyTenantToken(c.token, c.trusted, c.cluster)
			if err == nil {
				t.Fatal("verified")
			}
			if !errors.Is(err, ErrBadToken) && !errors.Is(err, ErrUntrustedKey) {
				t.Errorf("neither ErrBadToken nor ErrUntrustedKey: %v", err)
			}
			if !strings.Contains(err.Error(), c.wantMsg) {
				t.Errorf("error %q does not contain %q", err, c.wantMsg)
			}
			assertNoSecrets(t, err.Error(), secretsOf(t, []*rsa.PrivateKey{key}, c.token, good))
		})
	}
}

func TestParseTrustedKeys(t *testing.T) {
	key, other := testKey(), otherKey()
	id, otherID := mustKeyID(t, key), mustKeyID(t, other)
	pemOf := func(k *rsa.PrivateKey) string {
		p, err := PublicKeyPEM(&k.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		return string(p)
	}
	good, _ := json.Marshal(map[string]string{id: pemOf(key), otherID: pemOf(other)})
	keys, err := ParseTrustedKeys(good)
	if err != nil || len(keys) != 2 || !keys[id].Equal(&key.PublicKey) {
		t.Fatalf("ParseTrustedKeys = %d keys, %v", len(keys), err)
	}
	swapped, _ := json.Marshal(map[string]string{id: pemOf(other)})
	badID, _ := json.Marshal(map[string]string{"key-1": pemOf(key)})
	badPEM, _ := json.Marshal(map[string]string{id: "not a pem"})
	for name, in := range map[string][]byte{
		"key under another id": swapped, "malformed id": badID, "bad pem": badPEM,
		"not json": []byte(`{"sha256:` + strings.Repeat("0", 64) + `": `), "array": []byte(`[1]`),
	} {
		if _, err := ParseTrustedKeys(in); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

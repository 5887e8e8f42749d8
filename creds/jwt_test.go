package creds

import (
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func decodeSegment(t *testing.T, seg string) map[string]any {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSignTokenContract(t *testing.T) {
	key := testKey()
	id := mustKeyID(t, key)
	tok, err := SignToken(key, id, "dev1", "staging", testNow)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a compact JWS: %d segments", len(parts))
	}
	h := decodeSegment(t, parts[0])
	if h["alg"] != "RS256" || h["kid"] != id {
		t.Errorf("header = %v, want alg RS256 and kid %s", h, id)
	}
	c := decodeSegment(t, parts[1])
	if c["iss"] != "kiln:dev1" || c["sub"] != "staging" || c["iat"] != float64(testNow.Unix()) {
		t.Errorf("claims = %v", c)
	}
	if len(c) != 3 {
		t.Errorf("claims = %v, want exactly iss, sub, iat", c)
	}
	trusted := map[string]*rsa.PublicKey{id: &key.PublicKey}
	if err := VerifyToken(tok, trusted, "dev1", "staging"); err != nil {
		t.Fatalf("round trip: %v", err)
	}
	if kid, err := TokenKeyID(tok); err != nil || kid != id {
		t.Fatalf("TokenKeyID = %q, %v", kid, err)
	}
}

func TestSignTokenRejectsMismatchedKeyID(t *testing.T) {
	_, err := SignToken(testKey(), mustKeyID(t, otherKey()), "dev1", "default", testNow)
	if err == nil {
		t.Fatal("signed a token whose kid names another key")
	}
}

// forge signs arbitrary header and claims with method and key.
func forge(t *testing.T, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestVerifyTokenRejects(t *testing.T) {
	key, other := testKey(), otherKey()
	id, otherID := mustKeyID(t, key), mustKeyID(t, other)
	good, err := SignToken(key, id, "dev1", "default", testNow)
	if err != nil {
		t.Fatal(err)
	}
	byOther, err := SignToken(other, otherID, "dev1", "default", testNow)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM, _ := PublicKeyPEM(&key.PublicKey)
	claims := jwt.MapClaims{"iss": "kiln:dev1", "sub": "default", "iat": testNow.Unix()}
	parts := strings.Split(good, ".")
	tampered := tamper(good)
	if tampered == good {
		t.Fatal("tamper did nothing")
	}
	// Payload swapped for another tenant's, signature kept.
	otherSub, _ := SignToken(key, id, "dev1", "staging", testNow)
	swapped := parts[0] + "." + strings.Split(otherSub, ".")[1] + "." + parts[2]

	trusted := map[string]*rsa.PublicKey{id: &key.PublicKey}
	cases := []struct {
		name      string
		token     string
		trusted   map[string]*rsa.PublicKey
		cluster   string
		tenant    string
		untrusted bool   // want ErrUntrustedKey
		wantMsg   string // substring of the error
	}{
		{"untrusted key", byOther, trusted, "dev1", "default", true, "kid " + otherID + ": signing key is not trusted"},
		{"no trusted keys", good, nil, "dev1", "default", true, "not trusted"},
		// The kid names a trusted key, but the token was signed with another.
		{"wrong kid", forge(t, jwt.SigningMethodRS256, other, id, claims), trusted, "dev1", "default", false, "signature does not verify with key " + id},
		// The kid names the other key, trusted here under its own id, but the
		// signature is by key.
		{"kid of another trusted key", forge(t, jwt.SigningMethodRS256, key, otherID, claims),
			map[string]*rsa.PublicKey{id: &key.PublicKey, otherID: &other.PublicKey}, "dev1", "default", false, "signature does not verify"},
		{"wrong sub", good, trusted, "dev1", "staging", false, `sub claim is not "staging"`},
		{"wrong iss", good, trusted, "prod", "default", false, `iss claim is not "kiln:prod"`},
		{"tampered signature", tampered, trusted, "dev1", "default", false, "signature does not verify"},
		{"swapped payload", swapped, trusted, "dev1", "staging", false, "signature does not verify"},
		{"alg none", forge(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, id, claims), trusted, "dev1", "default", false, "not RS256"},
		// The classic confusion attack: HMAC keyed with the public key PEM.
		{"alg HS256 with public key", forge(t, jwt.SigningMethodHS256, pubPEM, id, claims), trusted, "dev1", "default", false, "not RS256"},
		{"alg PS256", forge(t, jwt.SigningMethodPS256, key, id, claims), trusted, "dev1", "default", false, "not RS256"},
		{"no kid", forge(t, jwt.SigningMethodRS256, key, "", claims), trusted, "dev1", "default", false, "no kid"},
		{"malformed kid", forge(t, jwt.SigningMethodRS256, key, "eyJhbGciOi-secret-looking", claims), trusted, "dev1", "default", false, "not a key id"},
		{"no iat", forge(t, jwt.SigningMethodRS256, key, id, jwt.MapClaims{"iss": "kiln:dev1", "sub": "default"}), trusted, "dev1", "default", false, "iat"},
		{"garbage", "eyJnot.a.token", trusted, "dev1", "default", false, "malformed"},
		{"empty", "", trusted, "dev1", "default", false, "malformed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := VerifyToken(c.token, c.trusted, c.cluster, c.tenant)
			if err == nil {
				t.Fatal("verified")
			}
			if c.untrusted != errors.Is(err, ErrUntrustedKey) {
				t.Errorf("errors.Is(ErrUntrustedKey) = %v, want %v: %v", !c.untrusted, c.untrusted, err)
			}
			if !c.untrusted && !errors.Is(err, ErrBadToken) {
				t.Errorf("not ErrBadToken: %v", err)
			}
			if !strings.Contains(err.Error(), c.wantMsg) {
				t.Errorf("error %q does not contain %q", err, c.wantMsg)
			}
			assertNoSecrets(t, err.Error(), secretsOf(t, []*rsa.PrivateKey{key, other}, c.token, good, byOther))
		})
	}
}

func TestVerifyTokenIgnoresClockForIat(t *testing.T) {
	key := testKey()
	id := mustKeyID(t, key)
	future, err := SignToken(key, id, "dev1", "default", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyToken(future, map[string]*rsa.PublicKey{id: &key.PublicKey}, "dev1", "default"); err != nil {
		t.Fatalf("a token from a machine whose clock is ahead was rejected: %v", err)
	}
}

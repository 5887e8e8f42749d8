package creds

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"strings"
	"sync"
	"testing"
	"time"
)

// Keys are expensive (RSA-3072 takes a second or more on a small machine),
// so tests share them. testKey comes from GenerateKey; otherKey is a second,
// smaller key for "signed by someone else" cases.
var (
	testKey  = sync.OnceValue(func() *rsa.PrivateKey { return mustKey(GenerateKey()) })
	otherKey = sync.OnceValue(func() *rsa.PrivateKey { return mustKey(rsa.GenerateKey(rand.Reader, 2048)) })
)

func mustKey(k *rsa.PrivateKey, err error) *rsa.PrivateKey {
	if err != nil {
		panic(err)
	}
	return k
}

var testNow = time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)

func mustKeyID(t *testing.T, k *rsa.PrivateKey) string {
	t.Helper()
	id, err := KeyID(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// secretsOf returns every piece of secret text td holds: each token, each
// token's signature segment, the private key PEM and each line of its body.
func secretsOf(t *testing.T, keys []*rsa.PrivateKey, tokens ...string) []string {
	t.Helper()
	var out []string
	for _, tok := range tokens {
		out = append(out, tok)
		if i := strings.LastIndex(tok, "."); i >= 0 && len(tok)-i > 20 {
			out = append(out, tok[i+1:])
		}
		// The payload segment is specific to a token too.
		if parts := strings.Split(tok, "."); len(parts) == 3 && len(parts[1]) > 20 {
			out = append(out, parts[1])
		}
	}
	for _, k := range keys {
		p, err := PrivateKeyPEM(k)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(p))
		for _, line := range strings.Split(string(p), "\n") {
			if len(line) > 20 && !strings.HasPrefix(line, "-----") {
				out = append(out, line)
			}
		}
		block, _ := pem.Decode(p)
		if block == nil {
			t.Fatal("bad PEM")
		}
	}
	return out
}

// assertNoSecrets fails if msg contains any secret, or anything that looks
// like PEM or a JWS.
func assertNoSecrets(t *testing.T, msg string, secrets []string) {
	t.Helper()
	assertNoSecretText(t, msg, secrets)
	for _, marker := range []string{"-----BEGIN", "PRIVATE KEY-----", "eyJ"} {
		if strings.Contains(msg, marker) {
			t.Errorf("message contains %q: %s", marker, msg)
		}
	}
}

// assertNoSecretText fails if text contains any of secrets.
func assertNoSecretText(t *testing.T, text string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			t.Errorf("text contains secret material %.12q...: %.200s", s, text)
		}
	}
}

// tamper returns tok with one base64url character of its signature
// replaced by another valid one, so the token still parses.
func tamper(tok string) string {
	i := strings.LastIndex(tok, ".") + 10
	c := byte('A')
	if tok[i] == 'A' {
		c = 'B'
	}
	return tok[:i] + string(c) + tok[i+1:]
}

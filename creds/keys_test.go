package creds

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestGenerateKeyIs3072BitRSA(t *testing.T) {
	if got := testKey().N.BitLen(); got != 3072 {
		t.Fatalf("key has %d bits, want 3072", got)
	}
	if err := testKey().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestKeyIDFormatAndStability(t *testing.T) {
	id := mustKeyID(t, testKey())
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(id) {
		t.Fatalf("key id %q has the wrong format", id)
	}
	if !ValidKeyID(id) {
		t.Fatalf("ValidKeyID(%q) = false", id)
	}
	// Same key, fresh struct through a PEM round trip: same id.
	p, err := PublicKeyPEM(&testKey().PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParsePublicKeyPEM(p)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := KeyID(pub); again != id {
		t.Fatalf("key id changed after PEM round trip: %s != %s", again, id)
	}
	if other := mustKeyID(t, otherKey()); other == id {
		t.Fatal("two different keys have the same id")
	}
}

// The vector was computed independently of this package:
//
//	openssl pkey -pubin -in testdata/rsa2048.pub.pem -outform DER | sha256sum
func TestKeyIDMatchesOpenSSL(t *testing.T) {
	const want = "sha256:fe1880d47ada7d06665a853869b7763fa2a9a75ab9755bdf0df33f2eb6044e05"
	data, err := os.ReadFile("testdata/rsa2048.pub.pem")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParsePublicKeyPEM(data)
	if err != nil {
		t.Fatal(err)
	}
	got, err := KeyID(pub)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("KeyID = %s, want %s", got, want)
	}
}

func TestValidKeyIDRejects(t *testing.T) {
	for _, id := range []string{
		"", "sha256:", "sha256:" + strings.Repeat("A", 64), "sha1:" + strings.Repeat("a", 64),
		"sha256:" + strings.Repeat("a", 63), "sha256:" + strings.Repeat("a", 65),
	} {
		if ValidKeyID(id) {
			t.Errorf("ValidKeyID(%q) = true", id)
		}
	}
}

func TestPrivateKeyPEMRoundTrip(t *testing.T) {
	p, err := PrivateKeyPEM(testKey())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(p), "-----BEGIN PRIVATE KEY-----\n") {
		t.Fatalf("not a PKCS#8 PEM block: %.30q", p)
	}
	k, err := ParsePrivateKeyPEM(p)
	if err != nil {
		t.Fatal(err)
	}
	if !k.Equal(testKey()) {
		t.Fatal("parsed key differs")
	}
}

func TestPublicKeyPEMIsPKIX(t *testing.T) {
	p, err := PublicKeyPEM(&testKey().PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	block, rest := pem.Decode(p)
	if block == nil || block.Type != "PUBLIC KEY" || len(rest) != 0 {
		t.Fatalf("not a single PUBLIC KEY block: %q", p)
	}
	if _, err := x509.ParsePKIXPublicKey(block.Bytes); err != nil {
		t.Fatal(err)
	}
}

func TestParseKeyPEMRejects(t *testing.T) {
	priv, _ := PrivateKeyPEM(testKey())
	pub, _ := PublicKeyPEM(&testKey().PublicKey)
	pkcs1 := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(testKey())})
	small := mustKey(rsa.GenerateKey(rand.Reader, 1024))
	smallDER, _ := x509.MarshalPKCS8PrivateKey(small)
	smallPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: smallDER})

	privCases := map[string][]byte{
		"empty":         nil,
		"garbage":       []byte("not a key"),
		"public key":    pub,
		"PKCS#1":        pkcs1,
		"trailing data": append(append([]byte{}, priv...), pub...),
		"1024 bits":     smallPEM,
		"bad DER":       pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}}),
	}
	for name, data := range privCases {
		t.Run("private/"+name, func(t *testing.T) {
			if _, err := ParsePrivateKeyPEM(data); err == nil {
				t.Fatal("accepted")
			} else {
				assertNoSecrets(t, err.Error(), secretsOf(t, []*rsa.PrivateKey{testKey()}))
			}
		})
	}
	pubCases := map[string][]byte{
		"empty":       nil,
		"private key": priv,
		"bad DER":     pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1, 2, 3}}),
	}
	for name, data := range pubCases {
		t.Run("public/"+name, func(t *testing.T) {
			if _, err := ParsePublicKeyPEM(data); err == nil {
				t.Fatal("accepted")
			} else {
				assertNoSecrets(t, err.Error(), secretsOf(t, []*rsa.PrivateKey{testKey()}))
			}
		})
	}
}

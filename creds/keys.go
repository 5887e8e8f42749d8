package creds

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"regexp"
)

// KeyBits is the size of generated signing keys. 3072 bits is the NIST
// recommendation for keys meant to stay valid beyond 2030; tenant tokens
// have no expiry, so the key has to hold up for the life of the cluster.
const KeyBits = 3072

// minKeyBits is the smallest key Load accepts. Anything smaller was not made
// by kiln and is too weak to trust.
const minKeyBits = 2048

// PEM block types (RFC 7468).
const (
	pemPublicKey  = "PUBLIC KEY"
	pemPrivateKey = "PRIVATE KEY"
)

// keyIDPattern is the shape of a key id: "sha256:" and 64 lowercase hex digits.
var keyIDPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// GenerateKey returns a new RSA-3072 signing key.
func GenerateKey() (*rsa.PrivateKey, error) {
	key, err := rsa.GenerateKey(rand.Reader, KeyBits)
	if err != nil {
		return nil, fmt.Errorf("generate RSA-%d key: %w", KeyBits, err)
	}
	return key, nil
}

// KeyID returns the id of a public key: "sha256:" + lowercase hex SHA-256 of
// its DER PKIX SubjectPublicKeyInfo. The id is what the cluster's kiln-auth
// ConfigMap is keyed by and what every token names in its kid header, so it
// must depend on the public key only and be stable across encodings.
func KeyID(pub *rsa.PublicKey) (string, error) {
	der, err := marshalPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("compute key id: %w", err)
	}
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// ValidKeyID reports whether id has the shape KeyID produces.
func ValidKeyID(id string) bool { return keyIDPattern.MatchString(id) }

// PublicKeyPEM encodes pub as a PEM "PUBLIC KEY" block (PKIX), the format
// kept in the kiln-auth ConfigMap.
func PublicKeyPEM(pub *rsa.PublicKey) ([]byte, error) {
	der, err := marshalPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("encode public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPublicKey, Bytes: der}), nil
}

// ParsePublicKeyPEM decodes a PEM "PUBLIC KEY" block holding an RSA key.
// Errors describe what is wrong, never the input.
func ParsePublicKeyPEM(data []byte) (*rsa.PublicKey, error) {
	block, err := decodeSinglePEM(data, pemPublicKey)
	if err != nil {
		return nil, fmt.Errorf("parse public key: %w", err)
	}
	parsed, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		// x509 errors describe the structure, not the bytes.
		return nil, fmt.Errorf("parse public key: %w", err)
	}
	pub, ok := parsed.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("parse public key: got %T, want an RSA key", parsed)
	}
	return pub, nil
}

// PrivateKeyPEM encodes key as a PEM "PRIVATE KEY" block (PKCS#8).
func PrivateKeyPEM(key *rsa.PrivateKey) ([]byte, error) {
	if key == nil {
		return nil, errors.New("encode private key: no key")
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: der}), nil
}

// ParsePrivateKeyPEM decodes a PEM "PRIVATE KEY" block (PKCS#8) holding an
// RSA key of at least 2048 bits and checks the key is self-consistent.
// Errors describe what is wrong, never the input.
func ParsePrivateKeyPEM(data []byte) (*rsa.PrivateKey, error) {
	block, err := decodeSinglePEM(data, pemPrivateKey)
	if err != nil {
		return nil, fmt.Errorf("parse private key: %w", err)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse private key: %w", err)
	}
	key, ok := parsed.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("parse private key: got %T, want an RSA key", parsed)
	}
	if n := key.N.BitLen(); n < minKeyBits {
		return nil, fmt.Errorf("parse private key: RSA key has %d bits, want at least %d", n, minKeyBits)
	}
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("parse private key: %w", err)
	}
	return key, nil
}

func marshalPublicKey(pub *rsa.PublicKey) ([]byte, error) {
	if pub == nil || pub.N == nil {
		return nil, errors.New("no public key")
	}
	return x509.MarshalPKIXPublicKey(pub)
}

// decodeSinglePEM returns the only PEM block in data, which must have the
// given type. Trailing garbage is rejected: a file that holds more than one
// key is not one kiln wrote.
func decodeSinglePEM(data []byte, wantType string) (*pem.Block, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("no PEM %q block found", wantType)
	}
	if block.Type != wantType {
		return nil, fmt.Errorf("PEM block is %q, want %q", block.Type, wantType)
	}
	if len(block.Headers) != 0 {
		return nil, errors.New("PEM block has headers (encrypted keys are not supported)")
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("unexpected data after the PEM block")
	}
	return block, nil
}

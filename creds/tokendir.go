package creds

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"time"

	"github.com/kilnctl/kiln/engine/failure"
)

// File names inside a token directory (DESIGN.md §6, contract).
const (
	ManifestFile   = "manifest.json"
	SigningKeyFile = "signing-key.pem"
	// PreviousKeyFile holds the key a rotation replaced, until the end of
	// the rotation (kiln rotate-key).
	PreviousKeyFile = "previous-signing-key.pem"
	TokensDir       = "tokens"
)

// TokenDir is the in-memory form of a token directory: the manifest, the
// signing key and one token per tenant.
type TokenDir struct {
	// Path is where the directory lives; set by Load and Write.
	Path     string
	Manifest Manifest
	Key      *rsa.PrivateKey
	// Tokens maps tenant to its compact JWS.
	Tokens map[string]string
	// Previous is the signing key a key rotation replaced, kept in
	// previous-signing-key.pem until the cluster no longer trusts it (nil
	// otherwise). Tokens are never signed with it.
	Previous *rsa.PrivateKey
}

// NewTokenDir creates the token directory contents for a fresh cluster:
// it signs one token per tenant with key and sets the state to pending.
// Nothing is written; see Write.
func NewTokenDir(cluster, provider, location string, key *rsa.PrivateKey, tenants []string, now time.Time) (*TokenDir, error) {
	if key == nil {
		return nil, fmt.Errorf("new token directory for cluster %q: no signing key", cluster)
	}
	keyID, err := KeyID(&key.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("new token directory for cluster %q: %w", cluster, err)
	}
	// created_at is RFC 3339 in UTC with whole seconds: the same text
	// whatever the machine's zone, and it round-trips exactly.
	now = now.UTC().Truncate(time.Second)
	td := &TokenDir{
		Manifest: Manifest{
			Cluster:   cluster,
			Provider:  provider,
			Location:  location,
			KeyID:     keyID,
			State:     StatePending,
			CreatedAt: now,
			Tenants:   append([]string(nil), tenants...),
		},
		Key:    key,
		Tokens: make(map[string]string, len(tenants)),
	}
	if err := td.Manifest.validate(); err != nil {
		// Names and tenants come from the user's config or arguments.
		return nil, failure.BadInput("new token directory for cluster %q: %w", cluster, err)
	}
	for _, t := range tenants {
		tok, err := SignToken(key, keyID, cluster, t, now)
		if err != nil {
			return nil, fmt.Errorf("new token directory for cluster %q: %w", cluster, err)
		}
		td.Tokens[t] = tok
	}
	return td, nil
}

// PublicKey returns the public half of the signing key.
func (td *TokenDir) PublicKey() *rsa.PublicKey { return &td.Key.PublicKey }

// Verify checks every tenant's token against trusted (key id -> public key),
// typically the keys in the cluster's kiln-auth. The result has one entry
// per tenant of the manifest: nil when the token verifies, else why not.
func Verify(td *TokenDir, trusted map[string]*rsa.PublicKey) map[string]error {
	out := make(map[string]error, len(td.Manifest.Tenants))
	for _, t := range td.Manifest.Tenants {
		tok, ok := td.Tokens[t]
		if !ok {
			out[t] = fmt.Errorf("tenant %q has no token", t)
			continue
		}
		out[t] = VerifyToken(tok, trusted, td.Manifest.Cluster, t)
	}
	return out
}

// validate checks that td is self-consistent: a valid manifest, a key whose
// id the manifest names, and exactly one verifying token per tenant. Write
// refuses anything Load would reject.
func (td *TokenDir) validate() error {
	if td == nil {
		return errors.New("no token directory")
	}
	if err := td.Manifest.validate(); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	if td.Key == nil {
		return errors.New("no signing key")
	}
	keyID, err := KeyID(&td.Key.PublicKey)
	if err != nil {
		return err
	}
	if keyID != td.Manifest.KeyID {
		return fmt.Errorf("manifest key_id %s does not match the signing key (%s)", td.Manifest.KeyID, keyID)
	}
	trusted := map[string]*rsa.PublicKey{keyID: &td.Key.PublicKey}
	results := Verify(td, trusted)
	for _, t := range td.Manifest.Tenants { // manifest order: deterministic errors
		if err := results[t]; err != nil {
			return err
		}
	}
	if len(td.Tokens) != len(td.Manifest.Tenants) {
		for t := range td.Tokens {
			if !td.Manifest.HasTenant(t) {
				return fmt.Errorf("token for tenant %q, which the manifest does not list", t)
			}
		}
	}
	return nil
}

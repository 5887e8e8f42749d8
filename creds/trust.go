package creds

import (
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/golang-jwt/jwt/v5"
)

// ParseTrustedKeys decodes the keys.json of a kiln-auth ConfigMap (a JSON
// object of key id to PEM PKIX public key) and checks that every key id is
// the id of the key it names. A key listed under another key's id would
// let a token name one key and be checked with another, so one bad entry
// rejects the whole set. Errors name key ids only, never key material.
func ParseTrustedKeys(keysJSON []byte) (map[string]*rsa.PublicKey, error) {
	var raw map[string]string
	if err := json.Unmarshal(keysJSON, &raw); err != nil {
		return nil, fmt.Errorf("parse trusted keys: not a JSON object of key id to PEM: %w", jsonSyntaxOnly(err))
	}
	ids := make([]string, 0, len(raw))
	for id := range raw {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make(map[string]*rsa.PublicKey, len(raw))
	for _, id := range ids {
		if !ValidKeyID(id) {
			return nil, errors.New("parse trusted keys: an entry's name is not a key id (want sha256: and 64 hex digits)")
		}
		pub, err := ParsePublicKeyPEM([]byte(raw[id]))
		if err != nil {
			return nil, fmt.Errorf("parse trusted key %s: %w", id, err)
		}
		if got, err := KeyID(pub); err != nil || got != id {
			return nil, fmt.Errorf("parse trusted key %s: the PEM holds key %s", id, got)
		}
		out[id] = pub
	}
	return out, nil
}

// jsonSyntaxOnly keeps the class of a JSON error without the input text
// json.Unmarshal may quote.
func jsonSyntaxOnly(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("syntax error at byte %d", se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("a value is a JSON %s, want a string", te.Value)
	}
	return errors.New("invalid JSON")
}

// VerifyTenantToken is VerifyToken for a verifier that does not know the
// tenant in advance (the gateway): it checks the signature, the kid against
// trusted, iss against cluster and the presence of iat exactly as
// VerifyToken does, and returns the tenant the token names (sub) and the
// key id it was signed with. The caller decides whether that tenant may do
// what it asks. Errors never contain token text.
//
// It does not consult a tenant table: the gateway and kiln's checks use
// Verifier, which does.
func VerifyTenantToken(token string, trusted map[string]*rsa.PublicKey, cluster string) (tenant, kid string, err error) {
	var claims tokenClaims
	return verifyTenant(token, trusted, cluster, &claims)
}

func verifyTenant(token string, trusted map[string]*rsa.PublicKey, cluster string, claims *tokenClaims) (tenant, kid string, err error) {
	keyFunc := trustedKey(trusted, &kid)
	_, err = jwt.ParseWithClaims(token, claims, keyFunc,
		jwt.WithValidMethods([]string{jwt.SigningMethodRS256.Alg()}),
		jwt.WithIssuer(Issuer(cluster)),
	)
	if err == nil && claims.IssuedAt == nil {
		err = errNoIat
	}
	if err == nil && claims.Subject == "" {
		err = errNoSub
	}
	if err != nil {
		if errors.Is(err, errNoSub) {
			return "", "", fmt.Errorf("verify token of cluster %q: %w: no sub claim", cluster, ErrBadToken)
		}
		return "", "", fmt.Errorf("verify token of cluster %q: %w", cluster, tokenError(err, kid, cluster, ""))
	}
	return claims.Subject, kid, nil
}

var errNoSub = errors.New("no sub claim")

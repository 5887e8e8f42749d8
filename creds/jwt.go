package creds

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// IssuerPrefix prefixes the cluster name in a token's iss claim.
const IssuerPrefix = "kiln:"

// Issuer returns the iss claim of tokens for cluster.
func Issuer(cluster string) string { return IssuerPrefix + cluster }

// tokenClaims is the full claim set of a tenant token. Tokens carry no exp:
// they stay valid until the key is removed from the cluster's kiln-auth, which
// is how kiln revokes them.
//
// Tokens of a platform with a tenant table (tenanttable.go) also carry aud
// (the platform id) and tid (this issue of the tenant's token).
type tokenClaims struct {
	jwt.RegisteredClaims
	Tid string `json:"tid,omitempty"`
}

// SignToken returns a compact JWS (RS256) for tenant of cluster, with header
// kid = keyID and claims iss = "kiln:"+cluster, sub = tenant, iat.
func SignToken(key *rsa.PrivateKey, keyID, cluster, tenant string, iat time.Time) (string, error) {
	return SignTenantToken(key, keyID, cluster, tenant, TokenID{}, iat)
}

// SignTenantToken is SignToken with the aud and tid claims of id (none
// for the zero id: a legacy token).
func SignTenantToken(key *rsa.PrivateKey, keyID, cluster, tenant string, id TokenID, iat time.Time) (string, error) {
	if key == nil {
		return "", fmt.Errorf("sign token for tenant %q: no signing key", tenant)
	}
	if !ValidKeyID(keyID) {
		return "", fmt.Errorf("sign token for tenant %q: malformed key id %q", tenant, keyID)
	}
	if cluster == "" || tenant == "" {
		return "", fmt.Errorf("sign token for tenant %q of cluster %q: cluster and tenant must not be empty", tenant, cluster)
	}
	// A token whose kid does not name its own key would be rejected by every
	// verifier; catch the mix-up here rather than in the cluster.
	if got, err := KeyID(&key.PublicKey); err != nil || got != keyID {
		return "", fmt.Errorf("sign token for tenant %q: key id %s does not match the signing key", tenant, keyID)
	}
	if (id.Audience == "") != (id.ID == "") || (!id.IsZero() && (!validRandomID(id.Audience) || !validRandomID(id.ID))) {
		return "", fmt.Errorf("sign token for tenant %q: aud and tid must both be 32 hex digits, or both absent", tenant)
	}
	claims := tokenClaims{RegisteredClaims: jwt.RegisteredClaims{
		Issuer:   Issuer(cluster),
		Subject:  tenant,
		IssuedAt: jwt.NewNumericDate(iat),
	}, Tid: id.ID}
	if id.Audience != "" {
		claims.Audience = jwt.ClaimStrings{id.Audience}
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = keyID
	s, err := tok.SignedString(key)
	if err != nil {
		return "", fmt.Errorf("sign token for tenant %q: %w", tenant, err)
	}
	return s, nil
}

// Sentinel errors of VerifyToken, for errors.Is.
var (
	// ErrUntrustedKey: the token's kid names a key that is not trusted.
	ErrUntrustedKey = errors.New("signing key is not trusted")
	// ErrBadToken: the token is malformed, badly signed or has wrong claims.
	ErrBadToken = errors.New("token is invalid")

	errNoKid        = errors.New("header has no kid")
	errMalformedKid = errors.New("header kid is not a key id")
)

// VerifyToken checks that token is an RS256 JWS signed by the key its kid
// names, that this key is in trusted (key id -> public key), that iss and
// sub name cluster and tenant, and that iat is present.
//
// iat is not compared with the clock: tokens do not expire, and a verifier
// whose clock lags the signer's must not reject a token it just received.
//
// Errors never contain the token text: they name the kid, the claim and the
// tenant only, so they are safe to print and log.
func VerifyToken(token string, trusted map[string]*rsa.PublicKey, cluster, tenant string) error {
	var kid string
	keyFunc := trustedKey(trusted, &kid)
	var claims tokenClaims
	_, err := jwt.ParseWithClaims(token, &claims, keyFunc,
		// Pinning the method is what stops alg=none and the RS256->HS256
		// confusion attack (an HMAC "signed" with the public key).
		jwt.WithValidMethods([]string{jwt.SigningMethodRS256.Alg()}),
		jwt.WithIssuer(Issuer(cluster)),
		jwt.WithSubject(tenant),
	)
	if err == nil && claims.IssuedAt == nil {
		err = errNoIat
	}
	if err != nil {
		return fmt.Errorf("verify token of tenant %q, cluster %q: %w", tenant, cluster, tokenError(err, kid, cluster, tenant))
	}
	return nil
}

var errNoIat = errors.New("no iat claim")

// TokenKeyID returns the kid header of token without verifying anything, so
// a caller can tell which key a token claims to be signed with (for example
// to say which key id a cluster would have to trust). The error never
// contains the token.
func TokenKeyID(token string) (string, error) {
	t, _, err := jwt.NewParser().ParseUnverified(token, &tokenClaims{})
	if err != nil {
		return "", fmt.Errorf("read token kid: %w", tokenError(err, "", "", ""))
	}
	kid, _ := t.Header["kid"].(string)
	if kid == "" {
		return "", fmt.Errorf("read token kid: %w: %w", ErrBadToken, errNoKid)
	}
	if !ValidKeyID(kid) {
		return "", fmt.Errorf("read token kid: %w: %w", ErrBadToken, errMalformedKid)
	}
	return kid, nil
}

// tokenError maps a jwt error to a description that is guaranteed to carry
// no token text. jwt's own messages are safe today, but they embed JSON and
// base64 errors and the header's alg, whose wording is not ours to
// guarantee; so only the class of failure and our own errors survive.
func tokenError(err error, kid, cluster, tenant string) error {
	switch {
	case errors.Is(err, ErrUntrustedKey):
		return fmt.Errorf("kid %s: %w", kid, ErrUntrustedKey)
	case errors.Is(err, errNoKid):
		return fmt.Errorf("%w: %w", ErrBadToken, errNoKid)
	case errors.Is(err, errMalformedKid):
		return fmt.Errorf("%w: %w", ErrBadToken, errMalformedKid)
	case errors.Is(err, errNoIat):
		return fmt.Errorf("%w: %w", ErrBadToken, errNoIat)
	case errors.Is(err, jwt.ErrTokenMalformed):
		return fmt.Errorf("%w: malformed, not a compact JWS", ErrBadToken)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		if kid == "" {
			// Rejected before the key lookup: the alg is not RS256.
			return fmt.Errorf("%w: signing method is not RS256", ErrBadToken)
		}
		return fmt.Errorf("%w: signature does not verify with key %s", ErrBadToken, kid)
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		// ParseUnverified found an alg it does not know.
		return fmt.Errorf("%w: signing method is not RS256", ErrBadToken)
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return fmt.Errorf("%w: iss claim is not %q", ErrBadToken, Issuer(cluster))
	case errors.Is(err, jwt.ErrTokenInvalidSubject):
		return fmt.Errorf("%w: sub claim is not %q", ErrBadToken, tenant)
	default:
		return fmt.Errorf("%w: claims are invalid", ErrBadToken)
	}
}

// trustedKey is the key lookup of both verifiers: the header's kid must be
// a well-formed key id (a malformed one is attacker-chosen text: never
// echoed) of a trusted key; *kid records it for the error message.
func trustedKey(trusted map[string]*rsa.PublicKey, kid *string) jwt.Keyfunc {
	return func(t *jwt.Token) (any, error) {
		k, ok := t.Header["kid"].(string)
		if !ok || k == "" {
			return nil, errNoKid
		}
		if !ValidKeyID(k) {
			return nil, errMalformedKid
		}
		*kid = k
		pub, ok := trusted[k]
		if !ok || pub == nil {
			return nil, ErrUntrustedKey
		}
		return pub, nil
	}
}

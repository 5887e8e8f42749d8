package engine

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/failure"
)

// candidate is a place a cluster's token dir may be.
type candidate struct {
	Path   string
	Source string // the token dir input's name ("--token-dir"), "keyring", "default path"
	// Forget is the hint that removes the cluster's keyring entry, as the
	// frontend words it ("" leaves it out; see forgetHint).
	Forget string
}

// forgetHint is the command that removes provider/name's keyring entry
// (kiln tokens forget), through the engine's Actions when the frontend has
// its own words; "" when it has no such action (the wizard: moving the
// dir aside is its fix).
func (e *Engine) forgetHint(provider, name string) string {
	verb := []string{"tokens", "forget"}
	if e.Actions != nil {
		return e.Actions(verb, nil)
	}
	return joinCommand(provider, "", name, "", "", verb, nil)
}

// candidates lists, in lookup order, where the token dir of provider/name
// may be: --token-dir, the keyring entry, the default path (DESIGN.md §6).
func (e *Engine) candidates(provider, name, flag string) ([]candidate, error) {
	var out []candidate
	seen := map[string]bool{}
	forget := e.forgetHint(provider, name)
	add := func(path, source string) {
		if path != "" && !seen[path] {
			seen[path] = true
			out = append(out, candidate{Path: path, Source: source, Forget: forget})
		}
	}
	add(flag, e.inputName(InputTokenDir))
	if e.Keyring != nil {
		entry, ok, err := e.Keyring.Get(provider, name)
		if err != nil {
			e.logf(LevelWarn, "keyring: %v", err)
		} else if ok {
			add(entry.TokenDir, "keyring")
		}
	}
	def, err := creds.DefaultDir(provider, name)
	if err != nil {
		return nil, err
	}
	add(def, "default path")
	return out, nil
}

// loadCandidate loads a token dir if it exists. (nil, nil) means absent. A
// dir that exists but is broken, or belongs to another cluster, is bad input:
// kiln never overwrites it.
func loadCandidate(c candidate, provider, name string) (*creds.TokenDir, error) {
	td, err := creds.Load(c.Path)
	if errors.Is(err, fs.ErrNotExist) {
		if _, statErr := os.Stat(c.Path); errors.Is(statErr, fs.ErrNotExist) {
			return nil, nil
		}
	}
	if err != nil {
		if c.Forget == "" {
			return nil, failure.BadInput("token dir %s (from %s) is unusable: %v; move it aside", c.Path, c.Source, err)
		}
		return nil, failure.BadInput("token dir %s (from %s) is unusable: %v; move it aside or run `%s`", c.Path, c.Source, err, c.Forget)
	}
	if td.Manifest.Cluster != name || td.Manifest.Provider != provider {
		return nil, failure.BadInput("token dir %s (from %s) belongs to cluster %s/%s, not %s/%s", c.Path, c.Source, td.Manifest.Provider, td.Manifest.Cluster, provider, name)
	}
	return td, nil
}

// findTrusted returns the first candidate token dir whose key the cluster
// trusts. It also returns every candidate that exists (trusted or not).
func findTrusted(cands []candidate, provider, name string, trusted map[string]string) (*creds.TokenDir, []*creds.TokenDir, error) {
	var found []*creds.TokenDir
	for _, c := range cands {
		td, err := loadCandidate(c, provider, name)
		if err != nil {
			return nil, found, err
		}
		if td == nil {
			continue
		}
		found = append(found, td)
		if _, ok := trusted[td.Manifest.KeyID]; ok {
			return td, found, nil
		}
	}
	return nil, found, nil
}

func describeCandidates(cands []candidate) string {
	var parts []string
	for _, c := range cands {
		parts = append(parts, fmt.Sprintf("%s (%s)", c.Path, c.Source))
	}
	return strings.Join(parts, ", ")
}

// trustedKeys parses kiln-auth's PEM keys.
func trustedKeys(keys map[string]string) (map[string]*rsa.PublicKey, error) {
	out := make(map[string]*rsa.PublicKey, len(keys))
	for id, pemText := range keys {
		pub, err := creds.ParsePublicKeyPEM([]byte(pemText))
		if err != nil {
			return nil, fmt.Errorf("kiln-auth key %s: %w", id, err)
		}
		if got, err := creds.KeyID(pub); err != nil || got != id {
			return nil, fmt.Errorf("kiln-auth key %s: the PEM's key id is %s", id, got)
		}
		out[id] = pub
	}
	return out, nil
}

// verifyTokens checks every tenant's token with the gateway's rules
// (creds.Verifier: kiln-auth's keys and tenant table); the error names
// each tenant whose token does not verify, so a stale token dir (a token
// replaced, a platform id that is not this platform's) is reported.
func verifyTokens(td *creds.TokenDir, keys map[string]string, table *creds.TenantTable, tenants []string) error {
	trusted, err := trustedKeys(keys)
	if err != nil {
		return err
	}
	v := &creds.Verifier{Keys: trusted, Table: table, Cluster: td.Manifest.Cluster}
	var bad []string
	for _, t := range tenants {
		tok, ok := td.Tokens[t]
		if !ok {
			bad = append(bad, fmt.Sprintf("tenant %s: no token in %s", t, td.Path))
			continue
		}
		if err := v.VerifyFor(tok, t); err != nil {
			bad = append(bad, fmt.Sprintf("tenant %s: %v", t, err))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("token verification failed: %s", strings.Join(bad, "; "))
	}
	return nil
}

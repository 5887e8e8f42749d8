package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/kilnctl/kiln/creds"
)

// credentials reuses the key the cluster trusts, or generates one when the
// platform is not installed, and writes the token dir as pending.
func (r *run) credentials(ctx context.Context) error {
	e, p, name := r.e, r.req.Provider, r.req.Name
	if r.decision == DecisionContinue {
		if r.trustKnown() {
			// Tenants added to kiln-config since the token dir was
			// written, or tokens of an earlier kiln without aud and tid:
			// issued with the key the cluster already trusts, the tenant
			// table published first (syncTenantTokens).
			missing := missingTenants(r.td, r.cfg.Spec.Tenants)
			td, table, err := e.syncTenantTokens(ctx, r.loc.Client, name, r.req.Timeout, r.td.Path, r.cfg.Spec.Tenants, nil, r.loc.State)
			if err != nil {
				return err
			}
			r.td, r.authTable = td, table
			if len(missing) > 0 {
				e.logf(LevelInfo, "signed tokens for new tenants %s with trusted key %s", strings.Join(missing, ", "), td.Manifest.KeyID)
			}
		} else if missing := missingTenants(r.td, r.cfg.Spec.Tenants); len(missing) > 0 {
			td, err := creds.AddTenants(r.td.Path, missing, e.now())
			if err != nil {
				return err
			}
			r.td = td
			e.logf(LevelInfo, "signed tokens for new tenants %s with trusted key %s", strings.Join(missing, ", "), td.Manifest.KeyID)
		}
		if r.td.Manifest.State == creds.StatePending {
			// The cluster already trusts this key (kiln-auth has it and
			// kiln-config exists): the earlier run died before committing.
			if err := creds.Commit(r.td.Path, r.loc.State.Keys); err != nil {
				return err
			}
			r.td.Manifest.State = creds.StateCommitted
			e.logf(LevelInfo, "promoted pending token dir %s: the cluster trusts its key %s", r.td.Path, r.td.Manifest.KeyID)
		}
		if err := r.remember(); err != nil {
			return err
		}
		return skip("reusing trusted key %s from %s", r.td.Manifest.KeyID, r.td.Path)
	}
	trusted := map[string]string{}
	if r.loc.State != nil {
		trusted = r.loc.State.Keys
	}
	td, found, err := findTrusted(r.cands(), p.Name(), name, trusted)
	if err != nil {
		return err
	}
	if td != nil {
		// Resume: the cluster received this key before the run stopped.
		if err := r.lockDir(td.Path); err != nil {
			return err
		}
		r.td = td
		r.authKeys = map[string]string{td.Manifest.KeyID: trusted[td.Manifest.KeyID]}
		// kiln-config is absent: no gateway uses these tokens yet.
		if r.authTable, err = bindNewDir(r.td, r.cfg.Spec.Tenants, r.loc.State.Table, e.now()); err != nil {
			return err
		}
		e.logf(LevelInfo, "reusing key %s from %s: the cluster already has it", td.Manifest.KeyID, td.Path)
		return r.remember()
	}
	if len(trusted) > 0 {
		e.logf(LevelWarn, "kiln-auth holds keys %s that no local token dir has; the platform was never installed with them, so they will be replaced",
			strings.Join(r.loc.State.KeyIDs(), ", "))
	}
	dir := r.cands()[0].Path
	account, found, err := r.setAsideForeign(ctx, found)
	if err != nil {
		return err
	}
	if !r.trustKnown() {
		// Nobody can say which keys the cluster trusts yet (no cluster, or
		// not reachable, or EKS not ACTIVE): a directory at dir may hold
		// the key it already trusts, so it is kept and its key used. The
		// platform phase reads kiln-auth under the cluster lock and commits
		// only a key the cluster trusts.
		for _, f := range found {
			if f.Path != dir {
				continue
			}
			r.td = f
			if r.authTable, err = bindNewDir(r.td, r.cfg.Spec.Tenants, nil, e.now()); err != nil {
				return err
			}
			pemBytes, err := creds.PublicKeyPEM(r.td.PublicKey())
			if err != nil {
				return err
			}
			r.authKeys = map[string]string{r.td.Manifest.KeyID: string(pemBytes)}
			e.logf(LevelInfo, "keeping %s token dir %s and its key %s: which keys the cluster trusts is unknown until it is reachable, so no token dir is replaced",
				f.Manifest.State, f.Path, f.Manifest.KeyID)
			return r.remember()
		}
	}
	for _, f := range found {
		if f.Path != dir {
			continue
		}
		if f.Manifest.State == creds.StateCommitted {
			aside, err := creds.MoveAside(f.Path, e.now())
			if err != nil {
				return err
			}
			e.logf(LevelWarn, "token dir %s held committed key %s that this cluster does not trust; moved it to %s", f.Path, f.Manifest.KeyID, aside)
		} else {
			e.logf(LevelInfo, "replacing pending token dir %s: the cluster never received its key %s", f.Path, f.Manifest.KeyID)
		}
	}
	key, err := creds.GenerateKey()
	if err != nil {
		return err
	}
	td, err = creds.NewTokenDir(name, p.Name(), r.loc.Name, key, r.cfg.Spec.Tenants, e.now())
	if err != nil {
		return err
	}
	td.Manifest.Account = account
	// A new platform id and a token id per tenant (creds.TenantTable).
	if r.authTable, err = bindNewDir(td, r.cfg.Spec.Tenants, nil, e.now()); err != nil {
		return err
	}
	if err := creds.Write(dir, td); err != nil {
		return err
	}
	td.Path = dir
	r.td = td
	pemBytes, err := creds.PublicKeyPEM(td.PublicKey())
	if err != nil {
		return err
	}
	r.authKeys = map[string]string{td.Manifest.KeyID: string(pemBytes)}
	e.logf(LevelInfo, "generated key %s; token dir %s written (pending)", td.Manifest.KeyID, dir)
	r.e.checkpoint(ctx, "after-token-dir-pending")
	return r.remember()
}

// setAsideForeign moves aside, for a provider whose locations belong to an
// account (AccountScoped: aws), a token dir at the default path that was
// made for another location or another account: its key cannot be one
// this cluster trusts, and reusing it would tie this cluster's tokens to
// another's. It returns the account (""
// when the provider has none or it cannot be told) and found without the
// directories moved.
func (r *run) setAsideForeign(ctx context.Context, found []*creds.TokenDir) (string, []*creds.TokenDir, error) {
	as, ok := r.req.Provider.(AccountScoped)
	if !ok {
		return "", found, nil
	}
	account, err := as.Account(ctx, r.loc.Name)
	if err != nil {
		r.e.logf(LevelWarn, "could not tell the account of %s %s (%v): token dirs are not checked against it", locationNoun(r.req.Provider), r.loc.Name, err)
		account = ""
	}
	c := r.cands()[0]
	if def, err := creds.DefaultDir(r.req.Provider.Name(), r.req.Name); err != nil || c.Path != def {
		return account, found, nil // a dir the user named is theirs to move
	}
	var kept []*creds.TokenDir
	for _, f := range found {
		m := f.Manifest
		var why string
		switch {
		case f.Path != c.Path:
		case m.Location != r.loc.Name:
			why = fmt.Sprintf("it was made for %s %s, this create is in %s", locationNoun(r.req.Provider), m.Location, r.loc.Name)
		case account != "" && m.Account != "" && m.Account != account:
			why = fmt.Sprintf("it was made for account %s, this create runs in account %s", m.Account, account)
		}
		if why == "" {
			kept = append(kept, f)
			continue
		}
		aside, err := creds.MoveAsideAs(f.Path, "foreign", r.e.now())
		if err != nil {
			return "", nil, err
		}
		r.e.logf(LevelWarn, "token dir %s (%s, key %s) is not this cluster's: %s; moved it to %s and not used", f.Path, m.State, m.KeyID, why, aside)
	}
	return account, kept, nil
}

// trustKnown reports whether this run knows which keys the cluster trusts:
// its kiln-auth was read under the cluster lock. Before that (no cluster
// yet, unreachable, EKS not ACTIVE) an empty set means "unknown", not "none".
func (r *run) trustKnown() bool {
	return r.lock != nil && r.loc.State != nil
}

func missingTenants(td *creds.TokenDir, tenants []string) []string {
	var out []string
	for _, t := range tenants {
		if !td.Manifest.HasTenant(t) {
			out = append(out, t)
		}
	}
	return out
}

// remember records the token dir in the keyring (path, key id, location:
// no secret material).
func (r *run) remember() error {
	if r.e.Keyring == nil {
		return nil
	}
	err := r.e.Keyring.Put(creds.Entry{
		Provider: r.req.Provider.Name(), Name: r.req.Name,
		TokenDir: r.td.Path, KeyID: r.td.Manifest.KeyID, Location: r.loc.Name,
	})
	if err != nil {
		r.e.logf(LevelWarn, "keyring: could not remember token dir %s: %v (kiln will still find it at that path)", r.td.Path, err)
	}
	return nil
}

package engine

import (
	"context"
	"slices"
	"sort"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/platform"
)

// Tenant tokens and the tenant table (creds.TenantTable, kiln-auth's
// tenants.json) are kept in step by one protocol, so the gateway never
// refuses a committed token dir's token of a current tenant:
//
//  1. publish the staged table: the current entries plus a fresh tid for
//     every token to issue (legacy tokens still accepted when migrating a
//     platform of an earlier kiln), read back;
//  2. swap the token dir (one atomic Write) to tokens carrying those tids;
//  3. publish the final table: exactly the tids of the token dir, for the
//     config's tenants only (removed tenants' entries go: their tokens are
//     refused from here), legacy off, read back.
//
// A run killed between any two steps converges when run again: the staged
// table still accepts whatever the token dir holds.

// tokenWork is what the protocol would do.
type tokenWork struct {
	issue []string // tenants whose token is (re)issued
	table bool     // kiln-auth's tenants.json changes
}

// planTokens decides, without writing, which tokens must be (re)issued:
// a tenant's token missing, legacy, bound to another platform id or not
// current in table, or in force (kiln upgrade --rotate-token).
func planTokens(td *creds.TokenDir, tenants []string, table *creds.TenantTable, force []string) (tokenWork, error) {
	var w tokenWork
	ids, err := td.TokenIDs()
	if err != nil {
		return w, err
	}
	final := map[string][]string{}
	for _, t := range tenants {
		id, ok := ids[t]
		if !ok || table == nil || id.Audience != table.Audience || !table.Accepts(t, id.ID) || slices.Contains(force, t) {
			w.issue = append(w.issue, t)
			continue
		}
		final[t] = []string{id.ID}
	}
	w.table = len(w.issue) > 0 || table == nil || table.Legacy ||
		!(&creds.TenantTable{Audience: table.Audience, Tenants: final}).Equal(table)
	return w, nil
}

// syncTenantTokens runs the protocol for tenants against the platform
// state st (read under the cluster lock) and returns the token dir and the
// table kiln-auth now holds. The caller holds the token dir's lock.
func (e *Engine) syncTenantTokens(ctx context.Context, cs kubernetes.Interface, name string, timeout time.Duration, tdPath string, tenants, force []string, st *platform.State) (*creds.TokenDir, *creds.TenantTable, error) {
	td, err := creds.Load(tdPath)
	if err != nil {
		return nil, nil, err
	}
	w, err := planTokens(td, tenants, st.Table, force)
	if err != nil {
		return nil, nil, err
	}
	if !w.table {
		return td, st.Table, nil
	}
	publish := func(t *creds.TenantTable) error {
		return applyAuthTable(ctx, e, cs, name, timeout, st.Keys, t, st.RotationOldKey, st.OldKeyExpires)
	}
	staged := st.Table.Clone()
	if staged == nil {
		if staged, err = creds.NewTenantTable(); err != nil {
			return nil, nil, err
		}
		// Migrating a platform of an earlier kiln: its token dirs hold
		// tokens without aud and tid until step 2.
		staged.Legacy = true
		e.logf(LevelInfo, "kiln-auth has no tenant table: creating one (platform id %s); the tokens in %s are issued again with it", staged.Audience, td.Path)
	}
	reissue := map[string]creds.TokenID{}
	for _, t := range w.issue {
		tid, err := creds.NewRandomID()
		if err != nil {
			return nil, nil, err
		}
		staged.Tenants[t] = append(staged.Tenants[t], tid)
		reissue[t] = creds.TokenID{Audience: staged.Audience, ID: tid}
	}
	if !staged.Equal(st.Table) {
		if err := publish(staged); err != nil {
			return nil, nil, err
		}
		e.checkpoint(ctx, "tokens-after-table-staged")
	}
	if len(reissue) > 0 {
		if td, err = creds.ReissueDir(tdPath, reissue, e.now()); err != nil {
			return nil, nil, err
		}
		issued := make([]string, 0, len(reissue))
		for t := range reissue {
			issued = append(issued, t)
		}
		sort.Strings(issued)
		e.logf(LevelInfo, "issued tokens of tenants %v with new token ids into %s (one atomic swap)", issued, td.Path)
		e.checkpoint(ctx, "tokens-after-reissue")
	}
	final, err := finalTable(td, tenants, staged.Audience)
	if err != nil {
		return nil, nil, err
	}
	if !final.Equal(staged) {
		if err := publish(final); err != nil {
			return nil, nil, err
		}
		e.logf(LevelInfo, "kiln-auth's tenant table holds exactly the tokens of %s for tenants %v: every other token of this platform is refused", td.Path, tenants)
		e.checkpoint(ctx, "tokens-after-table")
	}
	return td, final, nil
}

// finalTable is the table that accepts exactly td's tokens of tenants.
func finalTable(td *creds.TokenDir, tenants []string, aud string) (*creds.TenantTable, error) {
	ids, err := td.TokenIDs()
	if err != nil {
		return nil, err
	}
	t := &creds.TenantTable{Audience: aud, Tenants: map[string][]string{}}
	for _, tn := range tenants {
		if id, ok := ids[tn]; ok && id.Audience == aud && id.ID != "" {
			t.Tenants[tn] = []string{id.ID}
		}
	}
	return t, nil
}

// bindNewDir gives a token dir that no gateway uses yet (create, fresh or
// resume: kiln-config is not there) tokens bound to table (nil: one is
// derived from the dir's own tokens, or made), issuing a token for every
// tenant lacking one that table accepts. It returns the table to publish.
func bindNewDir(td *creds.TokenDir, tenants []string, table *creds.TenantTable, now time.Time) (*creds.TenantTable, error) {
	ids, err := td.TokenIDs()
	if err != nil {
		return nil, err
	}
	if table == nil {
		for _, t := range tenants {
			if id := ids[t]; id.Audience != "" {
				table = &creds.TenantTable{Audience: id.Audience, Tenants: map[string][]string{}}
				break
			}
		}
	}
	if table == nil {
		if table, err = creds.NewTenantTable(); err != nil {
			return nil, err
		}
	}
	out := &creds.TenantTable{Audience: table.Audience, Tenants: map[string][]string{}}
	reissue := map[string]creds.TokenID{}
	for _, t := range tenants {
		if id, ok := ids[t]; ok && id.Audience == out.Audience && id.ID != "" {
			out.Tenants[t] = []string{id.ID}
			continue
		}
		tid, err := creds.NewRandomID()
		if err != nil {
			return nil, err
		}
		out.Tenants[t] = []string{tid}
		reissue[t] = creds.TokenID{Audience: out.Audience, ID: tid}
	}
	if len(reissue) == 0 {
		return out, nil
	}
	if err := td.Reissue(reissue, now); err != nil {
		return nil, err
	}
	if td.Path != "" {
		if err := creds.Write(td.Path, td); err != nil {
			return nil, err
		}
	}
	return out, nil
}

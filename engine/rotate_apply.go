package engine

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/readiness"
)

// swap is the first phase: a new key (generated now, or the one an
// interrupted run staged), trusted alongside the old one and read back,
// then the token dir swapped as one unit to the new key and tokens signed
// with it, the old key kept in it as the previous key.
func (r *rotation) swap(ctx context.Context) error {
	e, cur := r.e, r.td.Manifest.KeyID
	// A new key only when the question was to start one and nothing is
	// under way now either: a rotation never begins a second one.
	if r.start && r.staged == nil && len(r.others()) == 0 && r.td.Previous == nil {
		key, err := creds.GenerateKey()
		if err != nil {
			return err
		}
		m := r.td.Manifest
		next, err := creds.NewTokenDir(m.Cluster, m.Provider, m.Location, key, m.Tenants, e.now())
		if err != nil {
			return err
		}
		// Same aud and tid as the tokens they replace: the tenant table
		// does not change with the key.
		ids, err := r.td.TokenIDs()
		if err != nil {
			return err
		}
		if err := next.Reissue(ids, e.now()); err != nil {
			return err
		}
		if err := creds.Write(creds.RotationPath(r.td.Path), next); err != nil {
			return err
		}
		r.staged = next
		e.logf(LevelInfo, "generated key %s; every tenant token signed with it, staged at %s", next.Manifest.KeyID, next.Path)
		r.e.checkpoint(ctx, "rotate-after-staged")
	}
	if r.staged != nil && r.staged.Manifest.KeyID != cur {
		next := r.staged.Manifest.KeyID
		pemBytes, err := creds.PublicKeyPEM(r.staged.PublicKey())
		if err != nil {
			return err
		}
		keys := map[string]string{cur: r.st.Keys[cur], next: string(pemBytes)}
		if err := r.applyAuth(ctx, keys, cur, time.Time{}); err != nil {
			return err
		}
		e.logf(LevelInfo, "kiln-auth trusts the old key %s and the new key %s (read back)", cur, next)
		r.e.checkpoint(ctx, "rotate-after-trust-both")
		swapped := *r.staged
		swapped.Manifest.State = creds.StateCommitted
		swapped.Previous = r.td.Key
		// The new key was just read back from kiln-auth: the committed
		// dir holds a key the cluster trusts, and its previous key too.
		if err := creds.Write(r.td.Path, &swapped); err != nil {
			return err
		}
		e.logf(LevelInfo, "token dir %s swapped to key %s (the old key %s kept in it until the rotation ends)", r.td.Path, next, cur)
		r.e.checkpoint(ctx, "rotate-after-swap")
		r.remember(next)
	}
	if r.staged != nil {
		if err := creds.DiscardRotation(r.td.Path); err != nil {
			return err
		}
		r.staged = nil
	}
	td, err := creds.Load(r.td.Path)
	if err != nil {
		return err
	}
	r.td = td
	return nil
}

// retire is the second phase: the old key leaves kiln-auth (now, or once
// --keep-old's deadline recorded on kiln-auth has passed), then the token
// dir drops its previous key.
func (r *rotation) retire(ctx context.Context) error {
	e, cur := r.e, r.td.Manifest.KeyID
	st, err := platform.Read(ctx, r.loc.Client)
	if err != nil {
		return err
	}
	r.st = st
	if old := r.others(); len(old) == 1 {
		if !r.retireNow() {
			exp := r.expiry()
			if st.OldKeyExpires.IsZero() {
				keys := map[string]string{cur: st.Keys[cur], old[0]: st.Keys[old[0]]}
				if err := r.applyAuth(ctx, keys, old[0], exp); err != nil {
					return err
				}
				r.e.checkpoint(ctx, "rotate-after-keep-old")
			}
			r.outcome = fmt.Sprintf("key of %s rotated to %s; the old key %s stays trusted until %s (`%s` removes it now; any %s after that time removes it)",
				r.req.Name, cur, old[0], exp.Format(time.RFC3339), r.finishCommand(), r.removers())
			return skip("old key %s kept until %s", old[0], exp.Format(time.RFC3339))
		}
		if err := r.applyAuth(ctx, map[string]string{cur: st.Keys[cur]}, "", time.Time{}); err != nil {
			return err
		}
		e.logf(LevelInfo, "kiln-auth trusts only key %s: tokens signed with %s no longer verify", cur, old[0])
		r.e.checkpoint(ctx, "rotate-after-retire")
		r.outcome = fmt.Sprintf("key of %s rotated to %s; the old key %s is no longer trusted", r.req.Name, cur, old[0])
	}
	if r.td.Previous != nil {
		td := *r.td
		td.Previous = nil
		if err := creds.Write(td.Path, &td); err != nil {
			return err
		}
		r.td = &td
		r.e.checkpoint(ctx, "rotate-after-end")
	}
	if r.outcome == "" {
		r.outcome = fmt.Sprintf("key of %s rotated to %s; the rotation is complete", r.req.Name, cur)
	}
	return nil
}

// applyAuth applies kiln-auth with keys (and the rotation record when
// oldKeyID is set) and reads it back.
func (r *rotation) applyAuth(ctx context.Context, keys map[string]string, oldKeyID string, expires time.Time) error {
	// The tenant table goes along unchanged: the rotation re-signs the
	// tokens with the same aud and tid.
	return applyAuthTable(ctx, r.e, r.loc.Client, r.req.Name, r.req.Timeout, keys, r.st.Table, oldKeyID, expires)
}

// applyAuthTable applies kiln-auth with keys and the tenant table (nil:
// none) and the rotation record when oldKeyID is set, and reads it back.
func applyAuthTable(ctx context.Context, e *Engine, cs kubernetes.Interface, name string, timeout time.Duration, keys map[string]string, table *creds.TenantTable, oldKeyID string, expires time.Time) error {
	obj, err := platform.AuthObject(name, keys, table)
	if err != nil {
		return err
	}
	if oldKeyID != "" {
		obj = platform.MarkRotation(obj, oldKeyID, expires)
	}
	if _, err := platform.Ensure(ctx, cs, obj); err != nil {
		return err
	}
	wctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	if _, err := e.watcher(cs).Until(wctx, []readiness.Ref{obj.Ref}, readiness.Ready); err != nil {
		return err
	}
	st, err := platform.Read(ctx, cs)
	if err != nil {
		return err
	}
	if len(st.Keys) != len(keys) || st.RotationOldKey != oldKeyID || !st.Table.Equal(table) {
		return fmt.Errorf("read back %s/%s: it does not hold the keys kiln applied", platform.Namespace, platform.AuthName)
	}
	for id := range keys {
		if _, ok := st.Keys[id]; !ok {
			return fmt.Errorf("read back %s/%s: key %s is not there", platform.Namespace, platform.AuthName, id)
		}
	}
	return nil
}

// remember points the keyring at the token dir's new key.
func (r *rotation) remember(keyID string) {
	if r.e.Keyring == nil {
		return
	}
	err := r.e.Keyring.Put(creds.Entry{Provider: r.req.Provider.Name(), Name: r.req.Name, TokenDir: r.td.Path, KeyID: keyID, Location: r.loc.Name})
	if err != nil {
		r.e.logf(LevelWarn, "keyring: could not record key %s of %s: %v", keyID, r.td.Path, err)
	}
}

// retireExpiredKey removes from kiln-auth the old key of a rotation whose
// --keep-old deadline has passed (any platform-changing operation calls it
// under the cluster lock).
func (e *Engine) retireExpiredKey(ctx context.Context, cs kubernetes.Interface, name string, timeout time.Duration) error {
	st, err := platform.Read(ctx, cs)
	if err != nil {
		return err
	}
	old := st.RotationOldKey
	if old == "" || st.OldKeyExpires.IsZero() || e.now().Before(st.OldKeyExpires) {
		return nil
	}
	keys := map[string]string{}
	for id, pemText := range st.Keys {
		if id != old {
			keys[id] = pemText
		}
	}
	if len(keys) == 0 {
		return nil // never leave kiln-auth empty
	}
	if err := applyAuthTable(ctx, e, cs, name, timeout, keys, st.Table, "", time.Time{}); err != nil {
		return err
	}
	e.logf(LevelInfo, "removed key %s from kiln-auth: the rotation kept it trusted until %s, which has passed", old, st.OldKeyExpires.Format(time.RFC3339))
	return nil
}

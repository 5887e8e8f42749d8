package engine

import (
	"context"

	"github.com/kilnctl/kiln/engine/event"

	"github.com/kilnctl/kiln/engine/platform"
)

// plan applies the decision table to what discovery found.
func (r *run) plan(ctx context.Context) error {
	if st := r.loc.State; st != nil && st.Installed {
		// An installed platform a newer kiln wrote is not this kiln's to
		// change (continue re-applies the gateway with its manifests).
		if err := r.e.checkVersion(st, r.req.Name); err != nil {
			return err
		}
	}
	out, err := r.decide(ctx, r.loc.State)
	if err != nil {
		return err
	}
	r.decision = out.Decision
	r.e.emit(event.DecisionEvent{Decision: out.Decision, Reason: out.Reason + uniqueness(r.req.Provider, r.req.Name, r.skipped)})
	return nil
}

// facts gathers what Decide needs: discovery's view of the target with
// platform state st, and the token dirs on disk as they are now.
func (r *run) facts(st *platform.State) Facts {
	p := r.req.Provider.Name()
	return Facts{
		Provider: p, Nouns: r.req.Provider.Nouns(), Location: r.loc.Name, Infra: r.loc.Infra, Cluster: r.loc.Cluster,
		Elsewhere: r.elsewhere, State: st,
		TokenDirs: loadTokenDirs(r.cands(), p, r.req.Name),
	}
}

// decide applies the decision table to the facts as they are now and asks
// the question it returns. The answer is kept: deciding again (under the
// lock) asks again only if the facts the user answered on have changed.
func (r *run) decide(ctx context.Context, st *platform.State) (Outcome, error) {
	f := r.facts(st)
	r.asked.Name, r.asked.Continue, r.asked.actions = r.req.Name, r.req.Continue, r.req.actions
	r.asked.Config, r.asked.ConfigPath = r.userCfg, r.req.ConfigPath
	out := Decide(f, r.asked)
	if out.Question != nil {
		ok := false
		if r.e.Confirm != nil {
			var err error
			if ok, err = r.e.Confirm.ConfirmContinue(ctx, *out.Question); err != nil {
				return Outcome{}, err
			}
		}
		if !ok {
			return Outcome{}, out.Err
		}
		q := *out.Question
		r.asked.Confirmed = &q
		out = Decide(f, r.asked)
	}
	if out.Question != nil || out.Err != nil {
		return Outcome{}, out.Err
	}
	r.cfg = out.Config
	if out.TokenDir != nil {
		r.td = out.TokenDir
	}
	return out, nil
}

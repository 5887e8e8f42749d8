package aws

import (
	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/input"
)

// command is the kiln command verb about aws cluster name in region, as
// hints give it (engine.Command); the frontend's own action when the
// engine handed the provider one (TakeActions: the wizard's keys).
func (p *Provider) command(verb, name, region string, args ...string) string {
	if p != nil && p.actions != nil {
		return p.actions([]string{verb}, args)
	}
	return engine.Command(engine.Target{Provider: &Provider{}, Name: name}, region, []string{verb}, args...)
}

// TakeActions implements engine.ActionsTaker: the provider's hints are
// worded by the frontend's Actions.
func (p *Provider) TakeActions(a engine.Actions) { p.actions = a }

// TakeNamer implements engine.NamerTaker: the inputs the provider's
// progress events name are worded by the frontend's Namer.
func (p *Provider) TakeNamer(n engine.Namer) { p.namer = n }

// inputName words in as the frontend does (the Namer the engine handed
// the provider; a CLI flag without one).
func (p *Provider) inputName(in input.Input) string {
	if p != nil && p.namer != nil {
		return p.namer(in)
	}
	return input.FlagName(in)
}

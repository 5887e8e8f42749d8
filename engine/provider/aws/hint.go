package aws

import "github.com/kilnctl/kiln/engine"

// command is the kiln command verb about aws cluster name in region, as
// hints give it (engine.Command).
func command(verb, name, region string, args ...string) string {
	return engine.Command(engine.Target{Provider: &Provider{}, Name: name}, region, []string{verb}, args...)
}

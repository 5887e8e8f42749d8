package engine

import "strings"

// Command is the kiln command a hint tells the user to run about one
// cluster, as they would type it: `kiln VERB... PROVIDER NAME ARGS...`,
// then the location it was found in (--context C, --region R: so the
// command goes straight to that cluster, whichever context is current),
// then --token-dir when the user named one (a token dir kiln would not
// find by itself). The other flags the user gave (--kubeconfig, the
// keyring backend) and the environment are theirs to repeat, and a hint
// never confirms in advance (no --yes): the command asks, or says what to
// pass. Hints put the command in backquotes.
//
// For a frontend that is not a shell (the wizard), Engine.Actions words
// the hint as that frontend's own action instead (its keys), so no message
// it shows names a CLI command or flag.
func Command(t Target, location string, verb []string, args ...string) string {
	if t.actions != nil {
		return t.actions(verb, args)
	}
	provider := ""
	var at Input
	if t.Provider != nil {
		provider, at = t.Provider.Name(), t.Provider.Nouns().Target
	}
	return joinCommand(provider, at, t.Name, location, t.TokenDir, verb, args)
}

// Actions words the kiln command a hint would give (verb: "destroy",
// "project rotate-token"; args: the rest, flags as the CLI spells them)
// as a frontend's own action. See Engine.Actions.
type Actions func(verb, args []string) string

// ActionsTaker is a Provider whose own messages give hints: the engine
// hands it its Actions with each request, so they are the frontend's
// words too.
type ActionsTaker interface{ TakeActions(Actions) }

// NamerTaker is a Provider whose own progress events name inputs (the
// message of a resource that failed on an input error): the engine hands
// it its Namer with each request, so they name the frontend's fields too,
// as the engine's own results do.
type NamerTaker interface{ TakeNamer(Namer) }

// hinted is t with the engine's Actions, for the hints of a request (and
// of its provider), and the provider with the engine's Namer.
func (e *Engine) hinted(t Target) Target {
	t.actions = e.Actions
	if p, ok := t.Provider.(ActionsTaker); ok && e.Actions != nil {
		p.TakeActions(e.Actions)
	}
	if p, ok := t.Provider.(NamerTaker); ok && e.Namer != nil {
		p.TakeNamer(e.Namer)
	}
	return t
}

// command is Command for one verb ("destroy"; "project rotate-token").
func command(t Target, location, verb string, args ...string) string {
	return Command(t, location, strings.Fields(verb), args...)
}

// joinCommand is Command from its parts: at is the input that names a
// location (--context, --region).
func joinCommand(provider string, at Input, name, location, tokenDir string, verb, args []string) string {
	if provider == "" {
		provider = "PROVIDER"
	}
	words := append([]string{"kiln"}, verb...)
	words = append(words, provider, name)
	words = append(words, args...)
	if location != "" && at != "" {
		words = append(words, FlagName(at), location)
	}
	if tokenDir != "" {
		words = append(words, FlagName(InputTokenDir), tokenDir)
	}
	return strings.Join(words, " ")
}

// Command is the kiln command verb about the cluster s is the status of,
// with args (see the package-level Command).
func (s *ClusterStatus) Command(verb string, args ...string) string {
	return joinCommand(s.Provider, s.Nouns.Target, s.Name, s.Location, "", strings.Fields(verb), args)
}

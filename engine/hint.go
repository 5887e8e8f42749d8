package engine

import "strings"

// Command is the kiln command a hint tells the user to run about one
// cluster, as they would type it: `kiln VERB... PROVIDER NAME ARGS...`,
// then the location it was found in (--context C, --region R: so the
// command goes straight to that cluster, whichever context is current),
// then --token-dir when the user named one (a token dir kiln would not
// find by itself). The other flags the user gave (--kubeconfig, the
// keyring backend) and the environment are theirs to repeat: a hint never
// guesses them. Hints put the command in backquotes.
func Command(t Target, location string, verb []string, args ...string) string {
	words := append([]string{"kiln"}, verb...)
	provider := "PROVIDER"
	if t.Provider != nil {
		provider = t.Provider.Name()
	}
	words = append(words, provider, t.Name)
	words = append(words, args...)
	if location != "" && t.Provider != nil {
		words = append(words, FlagName(t.Provider.Nouns().Target), location)
	}
	if t.TokenDir != "" {
		words = append(words, FlagName(InputTokenDir), t.TokenDir)
	}
	return strings.Join(words, " ")
}

// command is Command for one verb ("destroy"; "project rotate-token").
func command(t Target, location, verb string, args ...string) string {
	return Command(t, location, strings.Fields(verb), args...)
}

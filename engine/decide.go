package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/platform"
)

// Facts are what a create found before deciding: discovery's view of the
// target location and the token dirs that exist on this host. Gathering
// them does the I/O; Decide does none.
type Facts struct {
	// Provider is "kube" or "aws".
	Provider string
	// Nouns word the messages (the provider's Nouns).
	Nouns Nouns
	// Location is the target context or region.
	Location string
	// Infra is one of the Infra* constants for Location.
	Infra string
	// Cluster is the kiln cluster found at Location ("" if none).
	Cluster string
	// Elsewhere are the other locations where NAME was found.
	Elsewhere []string
	// State is the platform state at Location (nil when there is no
	// cluster yet or it could not be read).
	State *platform.State
	// TokenDirs are the token dir candidates, in lookup order.
	TokenDirs []TokenDirFact
}

// TokenDirFact is one token dir candidate as found on disk.
type TokenDirFact struct {
	Candidate candidate
	// Dir is the loaded token dir (nil when absent).
	Dir *creds.TokenDir
	// Err says why an existing dir is unusable or belongs to another
	// cluster (failure.Input: kiln never overwrites it).
	Err error
}

// Asked is what the user asked for.
type Asked struct {
	Name string
	// Continue is --continue.
	Continue bool
	// Config is the user's -c/--config (nil: the defaults, or the
	// installed config on continue); ConfigPath names it.
	Config     *config.ClusterConfig
	ConfigPath string
	// Confirmed is the continue question the user already answered yes
	// to. It stands while the facts give the same question; when they
	// changed, the question is asked again.
	Confirmed *ContinueQuestion
	// actions words the hints of the outcome (Engine.Actions).
	actions Actions
}

// Outcome is the decision table's answer: a decision, a question, or an
// error carrying its exit class.
type Outcome struct {
	// Decision is fresh, resume or continue ("" with Question or Err).
	Decision string
	Reason   string
	// Config is the cluster config the run applies or continues.
	Config *config.ClusterConfig
	// TokenDir, on continue, is the token dir holding a trusted key.
	TokenDir *creds.TokenDir
	// Question, when set, must be answered before anything changes; Err
	// is then the outcome of a "no" (failure.Confirm).
	Question *ContinueQuestion
	Err      error
}

// Placement is what the create decision says of creating cluster NAME at
// a location from discovery alone (the first rows of DESIGN.md §7).
type Placement int

const (
	// PlaceFree: nothing found stands against it.
	PlaceFree Placement = iota
	// PlaceHere: NAME is already at this location; create resumes or
	// continues it (asking first when it is installed).
	PlaceHere
	// PlaceElsewhere: NAME exists in other locations; a NAME is unique
	// per scope (kubeconfig, account), so it is refused here.
	PlaceElsewhere
	// PlaceTaken: the location hosts another kiln cluster; a cluster
	// hosts one kiln platform, so it is refused.
	PlaceTaken
)

// Place is the one home of those rules, a pure function: name is the
// cluster asked for, hosted the kiln cluster found at the location ("" if
// none), elsewhere the other locations where name was found. Decide asks
// it, and so does the wizard's create form as the user types, so that the
// form refuses exactly what create would.
func Place(name, hosted string, elsewhere []string) Placement {
	switch {
	case len(elsewhere) > 0:
		return PlaceElsewhere
	case hosted != "" && hosted != name:
		return PlaceTaken
	case hosted != "":
		return PlaceHere
	}
	return PlaceFree
}

// placeError words Place's refusal of name at location (nil for a place
// it allows): found at elsewhere (failure.Input, the first named as the location
// to use), or location hosting kiln cluster hosted. create's decision and
// an operation on an explicitly named location say it alike.
func placeError(pl Placement, n Nouns, name, location, hosted string, elsewhere []string) error {
	switch pl {
	case PlaceElsewhere:
		return inputErr(failure.Input, n.Target, name, "cluster %s already exists in %s %s, not in %s (a NAME is unique per %s); use {input} %s",
			name, n.Location, strings.Join(elsewhere, ", "), location, n.Scope, elsewhere[0])
	case PlaceTaken:
		return failure.BadInput("%s %s already hosts kiln cluster %s; a cluster hosts one kiln platform (NAME %s)", n.Location, location, hosted, name)
	}
	return nil
}

// Decide is the create decision table of DESIGN.md §7, a pure function of
// what was found and what was asked.
func Decide(f Facts, a Asked) Outcome {
	noun := f.Nouns.Location
	if err := placeError(Place(a.Name, f.Cluster, f.Elsewhere), f.Nouns, a.Name, f.Location, f.Cluster, f.Elsewhere); err != nil {
		return Outcome{Err: err}
	}
	st := f.State
	if st != nil && st.Installed {
		return decideInstalled(f, a)
	}
	// Before anything is written: every token dir candidate that exists
	// must be usable and belong to this cluster (failure.Input otherwise).
	var keys map[string]string
	if st != nil {
		keys = st.Keys
	}
	if _, _, err := trustedDir(f.TokenDirs, keys); err != nil {
		return Outcome{Err: err}
	}
	cfg := a.Config
	if cfg == nil {
		cfg = config.Default(a.Name)
	}
	switch {
	case st != nil && (st.NamespaceExists || len(st.Keys) > 0):
		return Outcome{Decision: DecisionResume, Config: cfg,
			Reason: fmt.Sprintf("%s exists in %s %s but kiln-config does not: an earlier create stopped part-way; resuming", platform.Namespace, noun, f.Location)}
	case f.Infra == InfraAbsent:
		return Outcome{Decision: DecisionFresh, Config: cfg, Reason: "no cluster found; creating infrastructure and platform"}
	default:
		return Outcome{Decision: DecisionFresh, Config: cfg, Reason: fmt.Sprintf("no kiln platform in %s %s", noun, f.Location)}
	}
}

// decideInstalled is the table's rows for an installed platform.
func decideInstalled(f Facts, a Asked) Outcome {
	st, noun := f.State, f.Nouns.Location
	td, found, err := trustedDir(f.TokenDirs, st.Keys)
	if !a.Continue {
		q := ContinueQuestion{Provider: f.Provider, Name: a.Name, Location: f.Location, TrustedKeyIDs: st.KeyIDs()}
		if err == nil && td != nil {
			q.TokenDir = td.Path
		}
		if !sameQuestion(a.Confirmed, q) {
			return Outcome{Question: &q, Err: inputErr(failure.Confirm, InputContinue, a.Name, "kiln platform %s is already installed in %s %s (trusted keys: %s); nothing was changed. Run again with {input} to continue it with the key material it already trusts (`%s`)",
				a.Name, noun, f.Location, strings.Join(st.KeyIDs(), ", "), f.command(a, "create", FlagName(InputContinue)))}
		}
	}
	if a.Config != nil {
		if diff := config.Diff(st.Config, a.Config); len(diff) > 0 {
			return Outcome{Err: inputErr(failure.Input, InputConfig, a.ConfigPath, "{input} %s differs from the installed kiln-config of %s; kiln never ignores a config silently, and create does not change an installed platform: to apply it, run `%s` (it shows the plan first). Differences:\n  %s",
				a.ConfigPath, a.Name, f.command(a, "upgrade", "-c", a.ConfigPath), strings.Join(diff, "\n  "))}
		}
	}
	if err != nil {
		return Outcome{Err: err}
	}
	if td == nil {
		var have []string
		for _, d := range found {
			have = append(have, fmt.Sprintf("%s has key %s", d.Path, d.Manifest.KeyID))
		}
		var looked []candidate
		for _, t := range f.TokenDirs {
			looked = append(looked, t.Candidate)
		}
		msg := fmt.Sprintf("kiln platform %s is installed in %s %s, but no token dir holds a key it trusts (trusted: %s). Looked in: %s",
			a.Name, noun, f.Location, strings.Join(st.KeyIDs(), ", "), describeCandidates(looked))
		if len(have) > 0 {
			msg += "; found: " + strings.Join(have, "; ")
		}
		return Outcome{Err: inputErr(failure.Failed, InputTokenDir, a.Name, "%s. Pass {input} with the directory created when the cluster was made", msg)}
	}
	return Outcome{Decision: DecisionContinue, Config: st.Config, TokenDir: td,
		Reason: fmt.Sprintf("platform installed in %s %s; continuing with trusted key %s from %s", noun, f.Location, td.Manifest.KeyID, td.Path)}
}

// sameQuestion reports whether the answered question asked about what q
// asks about: same location, same trusted keys, same token dir.
func sameQuestion(answered *ContinueQuestion, q ContinueQuestion) bool {
	return answered != nil && answered.Provider == q.Provider && answered.Name == q.Name &&
		answered.Location == q.Location && answered.TokenDir == q.TokenDir &&
		slices.Equal(answered.TrustedKeyIDs, q.TrustedKeyIDs)
}

// trustedDir is findTrusted over candidates already loaded: the first dir
// whose key the cluster trusts, every dir found up to it, and the error of
// the first unusable candidate before it.
func trustedDir(dirs []TokenDirFact, trusted map[string]string) (*creds.TokenDir, []*creds.TokenDir, error) {
	var found []*creds.TokenDir
	for _, d := range dirs {
		if d.Err != nil {
			return nil, found, d.Err
		}
		if d.Dir == nil {
			continue
		}
		found = append(found, d.Dir)
		if _, ok := trusted[d.Dir.Manifest.KeyID]; ok {
			return d.Dir, found, nil
		}
	}
	return nil, found, nil
}

// loadTokenDirs loads every candidate (the I/O half of the facts).
func loadTokenDirs(cands []candidate, provider, name string) []TokenDirFact {
	out := make([]TokenDirFact, 0, len(cands))
	for _, c := range cands {
		td, err := loadCandidate(c, provider, name)
		out = append(out, TokenDirFact{Candidate: c, Dir: td, Err: err})
	}
	return out
}

// command is the kiln command verb about the cluster the facts are of,
// with args (see Command).
func (f Facts) command(a Asked, verb string, args ...string) string {
	if a.actions != nil {
		return a.actions([]string{verb}, args)
	}
	return joinCommand(f.Provider, f.Nouns.Target, a.Name, f.Location, "", []string{verb}, args)
}

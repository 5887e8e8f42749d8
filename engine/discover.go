package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kilnctl/kiln/engine/event"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/internal/human"
)

// Discovery sources, reported in the discovery event.
const (
	// SourceDiscovery: every location in scope was searched.
	SourceDiscovery = event.SourceDiscovery
	// SourceNamed: only the location the user named was inspected.
	SourceNamed = event.SourceNamed
	// SourceRemembered: only the location kiln remembered for the cluster
	// was inspected.
	SourceRemembered = event.SourceRemembered
)

// slowAfter is when a location counts as slow in the discovery summary.
const slowAfter = time.Second

// found is what the discover phase found.
type found struct {
	loc   Location
	cands []candidate
	// skipped are the locations the user left out of discovery: NAME is
	// known unique only across the others.
	skipped []string
	// elsewhere (create only) are the other locations where NAME lives;
	// the decision table refuses them.
	elsewhere []string
}

// discoverTarget finds the location the operation is about and emits the
// discovery event. With create set, every location in scope is searched:
// the target is the user's (or default) location and NAME found anywhere
// else is an error. Otherwise the location the user named, or the one kiln
// remembered for NAME, is tried alone first and verified to hold NAME;
// only when that fails is every location searched.
func (e *Engine) discoverTarget(ctx context.Context, req Target, create bool) (found, error) {
	p := req.Provider
	cands, err := e.candidates(p.Name(), req.Name, req.TokenDir)
	if err != nil {
		return found{}, err
	}
	if !create {
		if loc, ok := e.direct(ctx, req, cands); ok {
			return found{loc: loc, cands: cands}, nil
		}
		if err := ctx.Err(); err != nil {
			return found{}, err
		}
	}
	start := time.Now()
	locs, err := p.Discover(ctx, req.Name)
	if err != nil {
		return found{}, err
	}
	searched, skipped := splitSkipped(locs)
	e.report(req, searched, skipped, cands, time.Since(start), SourceDiscovery)
	loc, elsewhere, err := e.pick(req, searched, skipped, create)
	return found{loc: loc, cands: cands, skipped: skipped, elsewhere: elsewhere}, err
}

// direct inspects only the location the user named or, failing that, the
// one kiln remembered for NAME; ok when NAME is there.
func (e *Engine) direct(ctx context.Context, req Target, cands []candidate) (Location, bool) {
	p := req.Provider
	insp, ok := p.(LocationInspector)
	if !ok {
		return Location{}, false
	}
	try := func(where, source, how string) (Location, bool) {
		l := insp.InspectLocation(ctx, req.Name, where)
		if l.Err == nil && l.Cluster == req.Name {
			e.report(req, []Location{l}, nil, cands, l.Elapsed, source)
			e.logf(LevelInfo, "cluster %s is in %s %s (%s); no other %s was searched", req.Name, locationNoun(p), where, how, locationNoun(p))
			return l, true
		}
		why := "no kiln cluster " + req.Name + " there"
		switch {
		case l.Err != nil:
			why = l.Err.Error()
		case l.Cluster != "":
			why = "it hosts kiln cluster " + l.Cluster
		}
		e.logf(LevelInfo, "cluster %s is not in %s %s (%s): %s; searching every %s", req.Name, locationNoun(p), where, how, why, locationNoun(p))
		return Location{}, false
	}
	if isExplicit(req, p) {
		how := e.Chosen
		if how == "" {
			how = "named with " + e.inputName(p.Nouns().Target)
		}
		return try(p.Target(), SourceNamed, how)
	}
	if where, how := e.remembered(req, cands); where != "" {
		return try(where, SourceRemembered, how)
	}
	return Location{}, false
}

// remembered returns where kiln last saw cluster NAME: its keyring entry's
// location, else the location in the manifest of its token dir.
func (e *Engine) remembered(req Target, cands []candidate) (location, source string) {
	p := req.Provider
	if e.Keyring != nil {
		if entry, ok, err := e.Keyring.Get(p.Name(), req.Name); err == nil && ok && entry.Location != "" {
			return entry.Location, "remembered in the keyring"
		}
	}
	for _, c := range cands {
		td, err := creds.Load(c.Path)
		if err == nil && td.Manifest.Cluster == req.Name && td.Manifest.Provider == p.Name() && td.Manifest.Location != "" {
			return td.Manifest.Location, "remembered in token dir " + c.Path
		}
	}
	return "", ""
}

// report emits the discovery event for the searched locations, warns about
// each that could not be inspected, and sums up how long discovery took and
// which locations were slow.
func (e *Engine) report(req Target, locs []Location, skipped []string, cands []candidate, took time.Duration, source string) {
	p := req.Provider
	var infos []ClusterInfo
	var slow []string
	for _, l := range locs {
		info := ClusterInfo{Provider: p.Name(), Name: l.Cluster, Location: l.Name, Infra: l.Infra, Platform: PlatformAbsent, ElapsedMS: l.Elapsed.Milliseconds()}
		if l.Err != nil {
			info.Error = l.Err.Error()
			e.logf(LevelWarn, "%s %s: %v", p.Name(), l.Name, l.Err)
		}
		if l.Elapsed >= slowAfter {
			s := fmt.Sprintf("%s %s", l.Name, l.Elapsed.Round(100*time.Millisecond))
			if l.Err != nil {
				s += " (" + l.Err.Error() + ")"
			}
			slow = append(slow, s)
		}
		if l.State != nil {
			if l.State.Installed {
				info.Platform = PlatformInstalled
			}
			info.KeyIDs = l.State.KeyIDs()
			if l.Cluster == req.Name {
				// Only the cluster this operation is about gets a token dir
				// lookup; loading other clusters' dirs is not our business.
				if td, _, err := findTrusted(cands, p.Name(), req.Name, l.State.Keys); err == nil && td != nil {
					info.TokenDir = nullable(td.Path)
				}
			}
		}
		infos = append(infos, info)
	}
	e.emit(event.DiscoveryEvent{Clusters: infos, Skipped: skipped, Source: source, ElapsedMS: took.Milliseconds()})
	noun := locationNoun(p)
	msg := fmt.Sprintf("discovery: %d %s%s searched in %s", len(locs), noun, human.Plural(len(locs)), took.Round(10*time.Millisecond))
	if len(skipped) > 0 {
		msg += fmt.Sprintf("; %d left out by the user: %s", len(skipped), strings.Join(skipped, ", "))
	}
	if len(slow) == 0 {
		e.logf(LevelInfo, "%s", msg)
		return
	}
	msg += "; slow: " + strings.Join(slow, "; ")
	if s, ok := p.(Scoper); ok && source == SourceDiscovery {
		in, env := s.Scope()
		how := e.inputName(in)
		if env != "" {
			how += " or " + env
		}
		msg += fmt.Sprintf(". Leave slow %ss out of discovery with %s", noun, how)
	}
	e.logf(LevelWarn, "%s", msg)
}

// pick chooses, among the searched locations, the one the operation is
// about (see discoverTarget). For create, NAME found elsewhere and a target
// hosting another NAME are facts for the decision table, not errors here.
func (e *Engine) pick(req Target, locs []Location, skipped []string, create bool) (Location, []string, error) {
	p := req.Provider
	target := p.Target()
	var where []string
	for _, l := range locs {
		if l.Cluster == req.Name {
			where = append(where, l.Name)
		}
	}
	if create && !isExplicit(req, p) && len(where) == 1 {
		// NAME is unique per kubeconfig/account: without an explicit
		// location, operate where it lives.
		target = where[0]
	}
	if create || target != "" && isExplicit(req, p) {
		if target == "" {
			return Location{}, nil, inputErr(failure.Input, p.Nouns().Target, req.Name, "{input}: no default location; pass {input}")
		}
		var elsewhere []string
		for _, w := range where {
			if w != target {
				elsewhere = append(elsewhere, w)
			}
		}
		if len(elsewhere) > 0 && !create {
			// Words the first place only, as this refusal always has.
			return Location{}, nil, placeError(PlaceElsewhere, p.Nouns(), req.Name, target, "", elsewhere[:1])
		}
		for _, l := range locs {
			if l.Name != target {
				continue
			}
			if l.Err != nil && l.State == nil && len(elsewhere) == 0 {
				return Location{}, nil, fmt.Errorf("%s %s is unreachable: %w", locationNoun(p), target, l.Err)
			}
			if !create && Place(req.Name, l.Cluster, nil) == PlaceTaken {
				return Location{}, nil, placeError(PlaceTaken, p.Nouns(), req.Name, target, l.Cluster, nil)
			}
			return l, elsewhere, nil
		}
		if create {
			// The aws provider creates its location; kube targets must exist.
			return Location{Name: target, Infra: InfraAbsent}, elsewhere, nil
		}
	}
	switch len(where) {
	case 0:
		var unreachable []string
		for _, l := range locs {
			if l.Err != nil {
				unreachable = append(unreachable, l.Name)
			}
		}
		msg := fmt.Sprintf("no kiln cluster %s found in any %s", req.Name, locationNoun(p))
		if len(skipped) > 0 {
			msg = fmt.Sprintf("no kiln cluster %s found in the %ss searched", req.Name, locationNoun(p))
		}
		var notes []string
		if len(unreachable) > 0 {
			notes = append(notes, "unreachable: "+strings.Join(unreachable, ", "))
		}
		if len(skipped) > 0 {
			notes = append(notes, "not searched: "+strings.Join(skipped, ", "))
		}
		if len(notes) > 0 {
			msg += " (" + strings.Join(notes, "; ") + ")"
		}
		return Location{}, nil, &notFoundError{msg: msg}
	case 1:
		for _, l := range locs {
			if l.Name == where[0] {
				return l, nil, nil
			}
		}
	}
	return Location{}, nil, inputErr(failure.Input, p.Nouns().Target, req.Name, "cluster %s found in several %ss: %s; choose one with {input}", req.Name, locationNoun(p), strings.Join(where, ", "))
}

// uniqueness says, for the decision, across which locations NAME was
// checked unique when the user left some out of discovery.
func uniqueness(p Provider, name string, skipped []string) string {
	if len(skipped) == 0 {
		return ""
	}
	return fmt.Sprintf("; %s is known unique only across the %ss searched (not searched: %s)", name, locationNoun(p), strings.Join(skipped, ", "))
}

type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }

func isExplicit(req Target, p Provider) bool {
	if k, ok := p.(interface{ Explicit() bool }); ok {
		return k.Explicit()
	}
	return false
}

func locationNoun(p Provider) string { return p.Nouns().Location }
func scopeNoun(p Provider) string    { return p.Nouns().Scope }

// splitSkipped separates the locations discovery searched from the names
// of those the user's scope left out.
func splitSkipped(locs []Location) (searched []Location, skipped []string) {
	for _, l := range locs {
		if l.Skipped {
			skipped = append(skipped, l.Name)
		} else {
			searched = append(searched, l)
		}
	}
	return searched, skipped
}

// nullable is s, or nil for "" (the discovery event's token_dir: null).
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/project"
	"github.com/kilnctl/kiln/engine/readiness"
)

// WaitRequest is what Wait needs.
type WaitRequest struct {
	Target
	// Timeout bounds the wait (failure.Timeout when it passes).
	Timeout time.Duration
	// Probe adds, after the API readiness, one authenticated request per
	// tenant through the gateway (wait --probe).
	Probe bool
}

// Wait waits until every platform object is ready and every tenant token
// verifies against kiln-auth. It needs no config file: tenants come from
// kiln-config.
func (e *Engine) Wait(ctx context.Context, req WaitRequest) error {
	ctx = e.traced(ctx)
	req.Target = e.hinted(req.Target)
	td, err := e.wait(ctx, req)
	dir := ""
	if td != nil {
		dir = td.Path
	}
	return e.finish(err, fmt.Sprintf("cluster %s is ready and every tenant token verifies", req.Name), dir)
}

func (e *Engine) wait(ctx context.Context, req WaitRequest) (*creds.TokenDir, error) {
	loc, cands, err := e.locate(ctx, req.Target, false)
	if err != nil {
		return nil, err
	}
	var td *creds.TokenDir
	var tenants []string
	err = e.phase(ctx, PhaseReadiness, func(ctx context.Context) error {
		wctx, cancel := withTimeout(ctx, req.Timeout)
		defer cancel()
		w := e.watcher(loc.Client)
		// Discovery has just read the platform state; when kiln-config was
		// there, wait for everything it lists at once (kiln-config among
		// them). The platform may still be being created: then wait for
		// kiln-config first, and read the state it describes.
		st := loc.State
		if st == nil || !st.Installed || st.Config == nil {
			cfgRef := readiness.Ref{Kind: readiness.KindConfigMap, Namespace: platform.Namespace, Name: platform.ConfigMapName}
			if _, err := w.Until(wctx, []readiness.Ref{cfgRef}, readiness.Ready); err != nil {
				return err
			}
			var err error
			if st, err = platform.Read(wctx, loc.Client); err != nil {
				return err
			}
		}
		if _, err := w.Until(wctx, platformRefs(req.Name, st.Config), readiness.Ready); err != nil {
			return err
		}
		var found []*creds.TokenDir
		td, found, err = findTrusted(cands, req.Provider.Name(), req.Name, st.Keys)
		if err != nil {
			return err
		}
		if td == nil {
			var have []string
			for _, f := range found {
				have = append(have, fmt.Sprintf("%s (key %s)", f.Path, f.Manifest.KeyID))
			}
			return fmt.Errorf("no token dir with a key the cluster trusts (trusted: %s); looked in %s%s",
				strings.Join(st.KeyIDs(), ", "), describeCandidates(cands), foundSuffix(have))
		}
		tenants = st.Config.Spec.Tenants
		if err := verifyTokens(td, st.Keys, st.Table, tenants); err != nil {
			return err
		}
		if st.Config.Spec.Gateway.Expose == config.ExposeLoadBalancer {
			if err := e.waitLoadBalancer(wctx, loc.Client); err != nil {
				return err
			}
		}
		fd := readFrontDoor(wctx, loc.Client, st.Config, hintsFor(req.Target, loc.Name))
		e.emit(&fd)
		return nil
	})
	if err == nil && req.Probe {
		err = e.phase(ctx, PhaseProbe, func(ctx context.Context) error {
			return e.probe(ctx, loc, req.Name, td, tenants)
		})
		if err == nil {
			err = e.reachRunning(ctx, loc, req, td)
		}
	}
	return td, err
}

// reachRunning probes every running project through the gateway (wait
// --probe), logging "reachable: …" for each; an unreachable project is
// reported, not a failure of the wait.
func (e *Engine) reachRunning(ctx context.Context, loc Location, req WaitRequest, td *creds.TokenDir) error {
	st, err := platform.Read(ctx, loc.Client)
	if err != nil {
		return err
	}
	if st.Config == nil {
		return nil
	}
	ops := e.opsFor(Location{Name: loc.Name, Client: loc.Client, REST: loc.REST, State: st}, req.Target, req.Timeout)
	list, err := ops.List(ctx, "")
	if err != nil {
		return err
	}
	var refs []project.Ref
	for _, p := range list {
		if p.State == project.StateRunning {
			refs = append(refs, project.Ref{Tenant: p.Tenant, Project: p.Project})
		}
	}
	if len(refs) == 0 {
		e.logf(LevelInfo, "probe: no running project to reach")
		return nil
	}
	e.reach(ctx, loc, req.Name, st.Config.Spec.Domain, td, refs)
	return nil
}

func foundSuffix(have []string) string {
	if len(have) == 0 {
		return ""
	}
	return "; found untrusted: " + strings.Join(have, ", ")
}

// withTimeout bounds a wait by the operation's --timeout (none when zero).
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return context.WithCancel(ctx)
}

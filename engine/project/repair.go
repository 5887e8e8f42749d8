package project

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/lock"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/readiness"
)

// Repair heals projects whose desired state is running: objects that are
// missing are created again, in order and verified; objects that exist are
// left alone (not even re-applied), and tokens are never rotated: a project
// whose Secret is gone is reported, not given a new token. Projects whose
// lease is held are skipped with a warning. It returns the repaired projects.
func (o *Ops) Repair(ctx context.Context) ([]string, error) {
	list, err := o.List(ctx, "")
	if err != nil {
		return nil, err
	}
	var repaired []string
	var problems []error
	for _, st := range list {
		if st.Desired != DesiredRunning || st.State == StateRunning || st.State == StateStarting {
			continue
		}
		r := Ref{Tenant: st.Tenant, Project: st.Project}
		did, err := o.repairOne(ctx, r)
		switch {
		case failure.Of(err) == failure.Locked:
			o.R.Logf(event.LevelWarn, "repair %s skipped: %v", r, err)
		case err != nil:
			o.R.Logf(event.LevelError, "repair %s: %v", r, err)
			problems = append(problems, fmt.Errorf("%s: %w", r, err))
		case did:
			repaired = append(repaired, r.String())
		}
	}
	return repaired, errors.Join(problems...)
}

func (o *Ops) repairOne(ctx context.Context, r Ref) (bool, error) {
	did := false
	err := o.locked(ctx, r, "repair", func(ctx context.Context, _ *lock.Lock) error {
		spec, err := o.mustSpec(ctx, r)
		if err != nil {
			return err
		}
		if spec.State != DesiredRunning {
			return nil // changed while we waited
		}
		s, err := o.getSecret(ctx, r)
		if err != nil {
			return err
		}
		if s == nil {
			return fmt.Errorf("secret %s/%s is missing, and with it the project's token: no copy of it is kept, so repair cannot restore it (and never makes a new one on its own). Issue a new token with `%s`", r.Namespace(), SecretName(r.Project), o.command("rotate-token", r))
		}
		k, err := o.currentKey(s, r)
		if err != nil {
			return err
		}
		objs := []platform.Object{
			o.deploymentObject(r, spec.Stack, k, TokenHash(s.Data[k])),
			o.serviceObject(r),
			o.routeObject(r),
		}
		for _, obj := range objs {
			res, err := readiness.Compute(ctx, o.Client, obj.Ref)
			if err != nil {
				return err
			}
			if drift, err := o.liveRouteDrift(ctx, r, obj.Ref); err != nil {
				return err
			} else if drift != "" {
				// A route that bypasses the gateway is not healthy: it is
				// put back, never waited on.
				o.R.Logf(event.LevelInfo, "repair %s: %s drifted (%s), applying it again", r, obj.Ref, drift)
				if err := o.R.Phase(ctx, phaseName(obj.Ref), func(ctx context.Context) error { return o.ensureReady(ctx, obj) }); err != nil {
					return err
				}
				did = true
				continue
			}
			if res.Status != readiness.NotFound {
				// Present: wait for it (a dependent must not go first),
				// but never rewrite it.
				wctx, cancel := o.withTimeout(ctx)
				_, err := o.R.Watcher().Until(wctx, []readiness.Ref{obj.Ref}, readiness.Ready)
				cancel()
				if err != nil {
					return err
				}
				continue
			}
			o.R.Logf(event.LevelInfo, "repair %s: %s missing, creating it", r, obj.Ref)
			if err := o.R.Phase(ctx, phaseName(obj.Ref), func(ctx context.Context) error { return o.ensureReady(ctx, obj) }); err != nil {
				return err
			}
			did = true
		}
		// An earlier kiln's route in the tenant namespace bypasses the
		// gateway: once the route above is ready, it goes.
		if left, err := o.legacyRouteLeft(ctx, r); err != nil {
			return err
		} else if left {
			ref := legacyRouteRef(r)
			o.R.Logf(event.LevelInfo, "repair %s: %s routes around the gateway (made by an earlier kiln), deleting it", r, ref)
			if err := o.R.Phase(ctx, phaseName(ref), func(ctx context.Context) error { return o.gone(ctx, ref) }); err != nil {
				return err
			}
			did = true
		}
		return nil
	})
	return did, err
}

// liveRouteDrift is how the live route of r differs from what kiln makes
// (routeDrift); "" for any other object, or a route that is absent.
func (o *Ops) liveRouteDrift(ctx context.Context, r Ref, ref readiness.Ref) (string, error) {
	if ref.Kind != readiness.KindIngress {
		return "", nil
	}
	ing, err := o.Client.NetworkingV1().Ingresses(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("get %s: %w", ref, err)
	}
	return o.routeDrift(r, ing), nil
}

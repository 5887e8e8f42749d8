// Over 400 lines on purpose: every project operation (create, start,
// suspend, restack, delete, rotate-token) runs through the same lease,
// ordered provision/deprovision and verification helpers below, and reads
// best next to them.

package project

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/input"
	"github.com/kilnctl/kiln/engine/lock"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/readiness"
)

// locked runs fn holding Lease kiln-project-P (failure.Locked naming the holder
// when another operation has it). fn's context ends if the lease is lost.
func (o *Ops) locked(ctx context.Context, r Ref, op string, fn func(context.Context, *lock.Lock) error) error {
	return o.lockedSeen(ctx, r, op, nil, fn)
}

// lockedSeen is locked with the lease as a batch's LIST saw it (see
// lock.Options.Seen; nil: read it).
func (o *Ops) lockedSeen(ctx context.Context, r Ref, op string, seen **coordinationv1.Lease, fn func(context.Context, *lock.Lock) error) error {
	var l *lock.Lock
	var lctx context.Context
	err := o.R.Phase(ctx, "lock", func(ctx context.Context) error {
		var err error
		// A platform-changing cluster operation (destroy) excludes
		// project operations; its side checks ours likewise. One that runs
		// project operations itself (upgrade) holds that lease already.
		excludes := []lock.Exclusion{{
			Namespace: platform.Namespace, Name: platform.LockName, ExclusiveOnly: true,
			Advice: "project operations are refused while an operation that changes the cluster's platform holds it; nothing was changed. Wait for it to finish, then run again",
		}}
		if o.PlatformHeld {
			excludes = nil
		}
		l, lctx, err = lock.Acquire(ctx, o.Client, lock.Options{
			Namespace: r.Namespace(), Name: LeaseName(r.Project),
			Operation: "project " + op + " " + r.String(), Labels: o.labels(r),
			Excludes: excludes, Seen: seen, Gated: true,
			Logf: func(f string, a ...any) { o.R.Logf(event.LevelInfo, f, a...) },
		})
		if err == nil {
			o.R.Logf(event.LevelInfo, "holding lease %s/%s as %s", r.Namespace(), LeaseName(r.Project), l.Holder())
		}
		return err
	})
	if err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := l.Release(rctx); err != nil {
			o.R.Logf(event.LevelWarn, "%v", err)
		}
	}()
	err = fn(lctx, l)
	if ctx.Err() == nil {
		err = l.Explain(err) // a lost lease exits 4 saying to whom
	}
	return err
}

// precheck refuses bad input before anything is written: the tenant
// namespace must exist, and for every operation but create the project too.
func (o *Ops) precheck(ctx context.Context, r Ref, mustExist bool) (*Spec, error) {
	if _, err := o.Client.CoreV1().Namespaces().Get(ctx, r.Namespace(), metav1.GetOptions{}); err != nil {
		return nil, failure.BadInput("tenant %q: namespace %s: %v", r.Tenant, r.Namespace(), err)
	}
	if !mustExist {
		s, _, err := o.readSpec(ctx, r)
		return s, err
	}
	return o.mustSpec(ctx, r)
}

// maxHost is the longest DNS name, which the project's host P.T.DOMAIN
// (its route's rule) must fit.
const maxHost = 253

func quoteHost(h string) string {
	if len(h) > 60 {
		return h[:28] + "…" + h[len(h)-28:]
	}
	return h
}

// Create records the project (desired running, the stack) and provisions it.
// Creating an existing project with the same stack is a start; with another
// stack it is refused (use restack).
func (o *Ops) Create(ctx context.Context, r Ref, stackName string) error {
	if h := o.Host(r); len(h) > maxHost {
		return failure.BadInput("TENANT/PROJECT %s: its host %s is %d characters; a host name has at most %d (shorten the project or tenant name, or the cluster's spec.domain)", r, quoteHost(h), len(h), maxHost)
	}
	st, err := o.stack(stackName)
	if err != nil {
		return err
	}
	cur, err := o.precheck(ctx, r, false)
	if err != nil {
		return err
	}
	if err := sameStack(r, cur, stackName, st); err != nil {
		return err
	}
	return o.locked(ctx, r, "create", func(ctx context.Context, l *lock.Lock) error {
		spec, err := o.writeSpec(ctx, r, "create", l.Holder(), func(cur *Spec) (*Spec, error) {
			if err := sameStack(r, cur, stackName, st); err != nil {
				return nil, err
			}
			if cur != nil {
				cur.State = DesiredRunning
				return cur, nil
			}
			return &Spec{Stack: st, State: DesiredRunning}, nil
		})
		if err != nil {
			return err
		}
		return o.provision(ctx, r, spec)
	})
}

func sameStack(r Ref, cur *Spec, stackName string, st config.Stack) error {
	if cur != nil && stackName != "" && cur.Stack.Name != st.Name {
		return failure.BadInput("project %s already exists with stack %q, not %q; use kiln project restack to change it", r, cur.Stack.Name, st.Name)
	}
	return nil
}

// Start sets the desired state to running and provisions in order.
func (o *Ops) Start(ctx context.Context, r Ref) error {
	if _, err := o.precheck(ctx, r, true); err != nil {
		return err
	}
	return o.locked(ctx, r, "start", func(ctx context.Context, l *lock.Lock) error {
		spec, err := o.setState(ctx, r, "start", l.Holder(), DesiredRunning)
		if err != nil {
			return err
		}
		return o.provision(ctx, r, spec)
	})
}

// Suspend sets the desired state to suspended and removes the route,
// Service and Deployment in that order, each verified gone. The Secret stays, so a
// later start keeps the token.
func (o *Ops) Suspend(ctx context.Context, r Ref) error {
	if _, err := o.precheck(ctx, r, true); err != nil {
		return err
	}
	return o.locked(ctx, r, "suspend", func(ctx context.Context, l *lock.Lock) error {
		if _, err := o.setState(ctx, r, "suspend", l.Holder(), DesiredSuspended); err != nil {
			return err
		}
		return o.deprovision(ctx, r)
	})
}

// Restack suspends the project and starts it with another stack, under one
// lease.
func (o *Ops) Restack(ctx context.Context, r Ref, stackName string) error {
	if stackName == "" {
		return input.New(failure.Input, input.Stack, "", "{input}: required for restack")
	}
	st, err := o.stack(stackName)
	if err != nil {
		return err
	}
	if _, err := o.precheck(ctx, r, true); err != nil {
		return err
	}
	return o.locked(ctx, r, "restack", func(ctx context.Context, l *lock.Lock) error {
		spec, err := o.writeSpec(ctx, r, "restack", l.Holder(), func(cur *Spec) (*Spec, error) {
			if cur == nil {
				return nil, failure.BadInput("project %s: no such project (deleted meanwhile)", r)
			}
			cur.Stack, cur.State = st, DesiredRunning
			return cur, nil
		})
		if err != nil {
			return err
		}
		if err := o.deprovision(ctx, r); err != nil {
			return err
		}
		return o.provision(ctx, r, spec)
	})
}

// Delete removes everything of the project, each object verified gone:
// the route, Service, Deployment, Secret, the spec ConfigMap, then the Lease.
func (o *Ops) Delete(ctx context.Context, r Ref) error {
	if _, err := o.precheck(ctx, r, true); err != nil {
		// A delete killed after removing the spec ConfigMap leaves the
		// Lease (and nothing else): finish it rather than refuse.
		if failure.Of(err) != failure.Input || !o.leaseLeft(ctx, r) {
			return err
		}
		o.R.Logf(event.LevelWarn, "project %s: spec ConfigMap already gone but Lease %s/%s left (an interrupted delete): finishing the delete", r, r.Namespace(), LeaseName(r.Project))
	}
	return o.locked(ctx, r, "delete", func(ctx context.Context, l *lock.Lock) error {
		if err := o.deprovision(ctx, r); err != nil {
			return err
		}
		secret, _, _, _, spec := refs(r)
		for _, ref := range []readiness.Ref{secret, spec} {
			if err := o.R.Phase(ctx, phaseName(ref), func(ctx context.Context) error { return o.gone(ctx, ref) }); err != nil {
				return err
			}
		}
		l.StopRenewing()
		lease := readiness.Ref{Kind: readiness.KindLease, Namespace: r.Namespace(), Name: LeaseName(r.Project)}
		return o.gone(ctx, lease)
	})
}

// leaseLeft says whether the project's Lease still exists.
func (o *Ops) leaseLeft(ctx context.Context, r Ref) bool {
	_, err := o.Client.CoordinationV1().Leases(r.Namespace()).Get(ctx, LeaseName(r.Project), metav1.GetOptions{})
	return err == nil
}

func (o *Ops) setState(ctx context.Context, r Ref, op, holder, state string) (*Spec, error) {
	return o.writeSpec(ctx, r, op, holder, func(cur *Spec) (*Spec, error) {
		if cur == nil {
			return nil, failure.BadInput("project %s: no such project (deleted meanwhile)", r)
		}
		cur.State = state
		return cur, nil
	})
}

func phaseName(ref readiness.Ref) event.Phase {
	switch ref.Kind {
	case readiness.KindConfigMap:
		return "spec"
	case readiness.KindSecret:
		return "secret"
	case readiness.KindDeployment:
		return "deployment"
	case readiness.KindService:
		return "service"
	case readiness.KindIngress:
		return "ingress" // the route; the phase keeps the seed's name
	}
	return event.Phase(ref.Kind)
}

// provision applies Secret → Deployment → Service → route, each confirmed
// ready through the API (watched) before the next is applied.
func (o *Ops) provision(ctx context.Context, r Ref, spec *Spec) error {
	return o.provisionThen(ctx, r, spec, nil)
}

// provisionThen is provision calling applied (when set) once the
// Deployment is applied, before its rollout is awaited: a batch frees its
// slot there, so the next projects' writes go while this one's Deployment
// rolls out and its Service and Ingress follow, in order, each verified.
func (o *Ops) provisionThen(ctx context.Context, r Ref, spec *Spec, applied func()) error {
	var key, hash string
	err := o.R.Phase(ctx, "secret", func(ctx context.Context) error {
		var err error
		key, hash, err = o.settleToken(ctx, r)
		return err
	})
	if err != nil {
		return err
	}
	err = o.R.Phase(ctx, "deployment", func(ctx context.Context) error {
		if err := o.ensureReadyThen(ctx, o.deploymentObject(r, spec.Stack, key, hash), applied); err != nil {
			return err
		}
		// The Deployment runs with key: any other key is a rotation that
		// never committed; drop it.
		if err := o.pruneTo(ctx, r, key); err != nil {
			return err
		}
		return o.recordToken(ctx, r, key, hash)
	})
	if err != nil {
		return err
	}
	if err := o.R.Phase(ctx, "service", func(ctx context.Context) error { return o.ensureReady(ctx, o.serviceObject(r)) }); err != nil {
		return err
	}
	return o.R.Phase(ctx, "ingress", func(ctx context.Context) error { return o.ensureReady(ctx, o.routeObject(r)) })
}

// deprovision removes route → Service → Deployment, each watched until it
// is gone before the next is deleted. A route the previous kiln left in
// the tenant namespace (Ingress kiln-tenant-T/P) goes with the route.
func (o *Ops) deprovision(ctx context.Context, r Ref) error {
	return o.deprovisionThen(ctx, r, nil)
}

// deprovisionThen is deprovision calling deleted (when set) once the
// Deployment's deletion is requested, before it is confirmed gone (a
// batch's slot, as in provisionThen).
func (o *Ops) deprovisionThen(ctx context.Context, r Ref, deleted func()) error {
	_, dep, svc, route, _ := refs(r)
	steps := []readiness.Ref{route}
	if left, err := o.legacyRouteLeft(ctx, r); err != nil {
		return err
	} else if left {
		steps = append(steps, legacyRouteRef(r))
	}
	for _, ref := range append(steps, svc, dep) {
		then := func() {}
		if ref == dep && deleted != nil {
			then = deleted
		}
		if err := o.R.Phase(ctx, phaseName(ref), func(ctx context.Context) error { return o.goneThen(ctx, ref, then) }); err != nil {
			return err
		}
	}
	return nil
}

// legacyRouteLeft says whether the previous kiln's route of r (Ingress
// kiln-tenant-T/P) still exists; a batch's informers answer without a
// request.
func (o *Ops) legacyRouteLeft(ctx context.Context, r Ref) (bool, error) {
	ref := legacyRouteRef(r)
	if absent, ok := o.R.Watcher().Shared.Absent(ctx, ref); ok {
		return !absent, nil
	}
	res, err := readiness.Compute(ctx, o.Client, ref)
	if err != nil {
		return false, err
	}
	return res.Status != readiness.NotFound, nil
}

func (o *Ops) ensureReady(ctx context.Context, obj platform.Object) error {
	return o.ensureReadyThen(ctx, obj, nil)
}

// ensureReadyThen is ensureReady calling applied (when set) between the
// write and the wait.
func (o *Ops) ensureReadyThen(ctx context.Context, obj platform.Object, applied func()) error {
	w := o.R.Watcher()
	if absent, ok := w.Shared.Absent(ctx, obj.Ref); ok && absent {
		// A batch's informers show it missing: apply without reading it
		// first (the apply is right either way, should the cache lag).
		if err := platform.Apply(ctx, o.Client, obj); err != nil {
			return err
		}
	} else if _, err := platform.Ensure(ctx, o.Client, obj); err != nil {
		return err
	}
	if applied != nil {
		applied()
	}
	wctx, cancel := o.withTimeout(ctx)
	defer cancel()
	_, err := w.Until(wctx, []readiness.Ref{obj.Ref}, readiness.Ready)
	return err
}

func (o *Ops) gone(ctx context.Context, ref readiness.Ref) error {
	return o.goneThen(ctx, ref, nil)
}

func (o *Ops) goneThen(ctx context.Context, ref readiness.Ref, deleted func()) error {
	if err := platform.Delete(ctx, o.Client, ref); err != nil {
		return err
	}
	if deleted != nil {
		deleted()
	}
	wctx, cancel := o.withTimeout(ctx)
	defer cancel()
	_, err := o.R.Watcher().Until(wctx, []readiness.Ref{ref}, readiness.Gone)
	return err
}

// settleToken returns the Secret key to run with, creating the Secret with
// a first token when missing. A rotation interrupted after its rollout
// became ready (the Deployment runs the new key, ready, in sync) is
// committed; any other interrupted rotation is abandoned in favour of the
// key in force.
func (o *Ops) settleToken(ctx context.Context, r Ref) (string, string, error) {
	key, hash, err := o.ensureSecret(ctx, r)
	if err != nil {
		return "", "", err
	}
	s, err := o.getSecret(ctx, r)
	if err != nil || s == nil || len(s.Data) <= 1 {
		return key, hash, err
	}
	d, err := o.getDeployment(ctx, r)
	if err != nil || d == nil {
		return key, hash, err
	}
	dk := deploymentTokenKey(d)
	tok, ok := s.Data[dk]
	if dk == key || !ok || d.Spec.Template.Annotations[AnnotationToken] != TokenHash(tok) {
		return key, hash, nil
	}
	res, err := readiness.Compute(ctx, o.Client, readiness.Ref{Kind: readiness.KindDeployment, Namespace: r.Namespace(), Name: r.Project})
	if err != nil {
		return "", "", err
	}
	if res.Status != readiness.Current {
		return key, hash, nil
	}
	o.R.Logf(event.LevelInfo, "an interrupted token rotation had rolled out: committing %s", dk)
	if err := o.keepOnly(ctx, r, dk); err != nil {
		return "", "", err
	}
	return dk, TokenHash(tok), nil
}

// pruneTo removes every Secret key but key (nothing to do when it is the
// only one).
func (o *Ops) pruneTo(ctx context.Context, r Ref, key string) error {
	s, err := o.getSecret(ctx, r)
	if err != nil {
		return err
	}
	if s != nil && len(s.Data) == 1 && s.Annotations[AnnotationKey] == key {
		return nil
	}
	o.R.Logf(event.LevelInfo, "secret %s/%s: removing keys other than %s (an unfinished rotation)", r.Namespace(), SecretName(r.Project), key)
	return o.keepOnly(ctx, r, key)
}

// RotateToken replaces the project token in two phases: the new token is
// added to the Secret under a new key and the Deployment switched to it;
// only when that rollout is ready is the old key removed. If the rollout
// fails, the Deployment is switched back and the new key removed, so the
// project keeps working with the old token.
func (o *Ops) RotateToken(ctx context.Context, r Ref) error {
	if _, err := o.precheck(ctx, r, true); err != nil {
		return err
	}
	return o.locked(ctx, r, "rotate-token", func(ctx context.Context, l *lock.Lock) error {
		spec, err := o.writeSpec(ctx, r, "rotate-token", l.Holder(), func(cur *Spec) (*Spec, error) {
			if cur == nil {
				return nil, failure.BadInput("project %s: no such project (deleted meanwhile)", r)
			}
			return cur, nil
		})
		if err != nil {
			return err
		}
		var oldKey, oldHash, newKey, newHash string
		err = o.R.Phase(ctx, "secret", func(ctx context.Context) error {
			var err error
			if oldKey, oldHash, err = o.settleToken(ctx, r); err != nil {
				return err
			}
			if spec.State == DesiredRunning {
				// Settle first: the Deployment must run the key in force.
				if err := o.ensureReady(ctx, o.deploymentObject(r, spec.Stack, oldKey, oldHash)); err != nil {
					return err
				}
				if err := o.pruneTo(ctx, r, oldKey); err != nil {
					return err
				}
			}
			tok, err := newToken()
			if err != nil {
				return err
			}
			s, err := o.updateSecret(ctx, r, func(s *corev1.Secret) error {
				newKey = nextKey(s)
				s.Data[newKey] = []byte(tok)
				return nil
			})
			if err != nil {
				return err
			}
			newHash = TokenHash(s.Data[newKey])
			o.R.Logf(event.LevelInfo, "secret %s/%s: new token under %s (sha256 %s); %s stays valid until the rollout is ready", r.Namespace(), SecretName(r.Project), newKey, newHash[:12], oldKey)
			return nil
		})
		if err != nil {
			return err
		}
		if spec.State != DesiredRunning {
			return o.R.Phase(ctx, "commit", func(ctx context.Context) error { return o.keepOnly(ctx, r, newKey) })
		}
		rollErr := o.R.Phase(ctx, "rollout", func(ctx context.Context) error {
			return o.ensureReady(ctx, o.deploymentObject(r, spec.Stack, newKey, newHash))
		})
		if rollErr == nil {
			return o.R.Phase(ctx, "commit", func(ctx context.Context) error { return o.keepOnly(ctx, r, newKey) })
		}
		if ctx.Err() != nil && !errors.Is(rollErr, context.DeadlineExceeded) && failure.Of(rollErr) != failure.Timeout {
			return rollErr // interrupted or lost the lease: the next operation settles
		}
		o.R.Logf(event.LevelWarn, "rollout with the new token failed (%v); switching back to %s", rollErr, oldKey)
		backErr := o.R.Phase(ctx, "rollback", func(ctx context.Context) error {
			if err := o.ensureReady(ctx, o.deploymentObject(r, spec.Stack, oldKey, oldHash)); err != nil {
				return err
			}
			return o.keepOnly(ctx, r, oldKey)
		})
		if backErr != nil {
			return fmt.Errorf("token rotation failed (%v) and switching back failed: %w", rollErr, backErr)
		}
		return fmt.Errorf("token rotation failed; the project runs with its old token: %w", rollErr)
	})
}

func (o *Ops) getDeployment(ctx context.Context, r Ref) (*appsv1.Deployment, error) {
	d, err := o.Client.AppsV1().Deployments(r.Namespace()).Get(ctx, r.Project, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get deployment %s/%s: %w", r.Namespace(), r.Project, err)
	}
	return d, nil
}

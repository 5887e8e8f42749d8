package tuitest

import (
	"context"
	"fmt"
	"time"

	"github.com/kilnctl/kiln/engine/event"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/input"
	"github.com/kilnctl/kiln/tui"
)

// dayTwoCalls records the upgrades and rotations a Backend ran.
type dayTwoCalls struct {
	upgrades []Upgrade
	rotates  []engine.RotateKeyRequest
	answers  []bool
}

// Upgrade is one upgrade the wizard asked for: the request and what the
// EKS fields asked of the infrastructure.
type Upgrade struct {
	Req   engine.UpgradeRequest
	Infra engine.Infra
}

// Upgrade runs OnUpgrade.
func (b *Backend) Upgrade(_ engine.ClusterRef, in engine.Infra, req engine.UpgradeRequest) tui.Op {
	return func(ctx context.Context, sink engine.Sink, c engine.Confirmer) error {
		b.mu.Lock()
		b.day2.upgrades = append(b.day2.upgrades, Upgrade{Req: req, Infra: in})
		b.mu.Unlock()
		return run(ctx, b.OnUpgrade, sink, &recording{Confirmer: c, b: b})
	}
}

// RotateKey runs OnRotate.
func (b *Backend) RotateKey(_ engine.ClusterRef, req engine.RotateKeyRequest) tui.Op {
	return func(ctx context.Context, sink engine.Sink, c engine.Confirmer) error {
		b.mu.Lock()
		b.day2.rotates = append(b.day2.rotates, req)
		b.mu.Unlock()
		return run(ctx, b.OnRotate, sink, &recording{Confirmer: c, b: b})
	}
}

// Upgrades are the upgrades run so far.
func (b *Backend) Upgrades() []Upgrade {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Upgrade(nil), b.day2.upgrades...)
}

// Rotations are the rotate-key requests run so far.
func (b *Backend) Rotations() []engine.RotateKeyRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]engine.RotateKeyRequest(nil), b.day2.rotates...)
}

// Answers are the wizard's answers to the upgrade and rotate questions.
func (b *Backend) Answers() []bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]bool(nil), b.day2.answers...)
}

// recording is the wizard's confirmer, recording its upgrade and rotate
// answers.
type recording struct {
	engine.Confirmer
	b *Backend
}

func (r *recording) record(ok bool, err error) (bool, error) {
	if err == nil {
		r.b.mu.Lock()
		r.b.day2.answers = append(r.b.day2.answers, ok)
		r.b.mu.Unlock()
	}
	return ok, err
}

func (r *recording) ConfirmUpgrade(ctx context.Context, q engine.UpgradeQuestion) (bool, error) {
	c, ok := r.Confirmer.(engine.UpgradeConfirmer)
	if !ok {
		return false, nil
	}
	return r.record(c.ConfirmUpgrade(ctx, q))
}

func (r *recording) ConfirmRotate(ctx context.Context, q engine.RotateQuestion) (bool, error) {
	c, ok := r.Confirmer.(engine.RotateConfirmer)
	if !ok {
		return false, nil
	}
	return r.record(c.ConfirmRotate(ctx, q))
}

// emitter stamps events with the fixed clock and emits them.
func emitter(sink engine.Sink) func(event.Payload) {
	at := T0
	return func(p event.Payload) {
		at = at.Add(10 * time.Millisecond)
		sink.Emit(event.Event{Time: at, Payload: p})
	}
}

// UpgradePlan is the plan of an upgrade of cluster NAME that adds tenant
// staging, runs two gateway replicas and moves the domain (so project
// default/blog's route follows), as the engine plans it.
func UpgradePlan(name string) []engine.PlanChange {
	key := "sha256:3f1c0a9be2d47d6b1e0f5a8c9d2e7b4a6c1f0e9d8b7a6c5d4e3f2a1b0c9d8e7f"
	dir := "/home/dev/.local/state/kiln/kube/" + name + "/tokens"
	return []engine.PlanChange{
		{Action: "create", Kind: engine.KindToken, Name: "staging", Message: "token of tenant staging, signed with trusted key " + key + ", added to " + dir},
		{Action: "create", Kind: "Namespace", Name: "kiln-tenant-staging", Message: "tenant staging"},
		{Action: "create", Kind: "NetworkPolicy", Namespace: "kiln-tenant-staging", Name: "kiln-deny-ingress", Message: "network isolation of kiln-tenant-staging"},
		{Action: "update", Kind: "Deployment", Namespace: "kiln-system", Name: "kiln-gateway", Fields: []string{"spec.replicas"}, Message: "the gateway"},
		{Action: "update", Kind: "Ingress", Namespace: "kiln-system", Name: "default.blog", Fields: []string{"spec.rules[0].host"}, Message: "project default/blog served at blog.default.next.example.test"},
		{Action: "delete", Kind: "Namespace", Name: "kiln-tenant-old", Message: "tenant old removed: its namespace is deleted"},
		{Action: "update", Kind: "ConfigMap", Namespace: "kiln-system", Name: "kiln-config", Fields: []string{"spec.domain", "spec.tenants", "spec.gateway.replicas"},
			Message: "spec.domain: \"up.example.test\" (cluster) vs \"next.example.test\" (file); records kiln v0.9.0 (platform schema 2)"},
	}
}

// UpgradeScript is an upgrade of NAME in LOCATION shaped like the engine's:
// discover, the plan (plan events, then a note), the question; declined:
// failure.Confirm with nothing changed; confirmed: the platform, projects and
// config phases, then the result.
func UpgradeScript(name, location string, changes []engine.PlanChange) Script {
	return UpgradeScriptOn("kube", name, location, changes)
}

// EKSUpgradePlan is an upgrade plan of aws cluster NAME whose EKS fields
// ask Kubernetes 1.32 and 3 nodes: the infrastructure first, as the aws
// provider plans it, then a platform change.
func EKSUpgradePlan(name string) []engine.PlanChange {
	return []engine.PlanChange{
		{Action: "update", Kind: "EKSCluster", Name: name, Fields: []string{"version"}, Message: "Kubernetes 1.31 → 1.32: the EKS control plane, one minor version (EKS keeps serving meanwhile)"},
		{Action: "update", Kind: "Nodegroup", Name: "kiln-nodes", Fields: []string{"version"}, Message: "Kubernetes 1.31 → 1.32: EKS replaces the nodes one at a time, draining each"},
		{Action: "update", Kind: "Nodegroup", Name: "kiln-nodes", Fields: []string{"scalingConfig.desiredSize", "scalingConfig.maxSize", "scalingConfig.minSize"}, Message: "2 → 3 nodes (t3.medium)"},
		{Action: "update", Kind: "Deployment", Namespace: "kiln-system", Name: "kiln-gateway", Fields: []string{"spec.template"}, Message: "the gateway"},
	}
}

// RefusedEKSUpgradeScript is an upgrade of aws cluster NAME refused by the
// aws provider (failure.Input) for a Kubernetes version jump, worded with the
// upgrade screen's field as the wizard's engine words it.
func RefusedEKSUpgradeScript(name string) Script {
	return func(ctx context.Context, sink engine.Sink, confirm engine.Confirmer) error {
		emit := emitter(sink)
		emit(event.PhaseEvent{Phase: "discover", State: engine.PhaseStarted})
		emit(event.PhaseEvent{Phase: "discover", State: engine.PhaseSucceeded, ElapsedMS: 40})
		emit(event.PhaseEvent{Phase: "plan", State: engine.PhaseStarted})
		err := engine.NewInputError(failure.Input, input.KubernetesVersion, "1.33", "{input} 1.33: EKS cluster %s runs Kubernetes 1.31, and EKS upgrades a control plane one minor version at a time; nothing was changed. Upgrade to 1.32 first, then on from there", name)
		res := engine.FailedResult(err, tui.UpgradeInputName, "")
		emit(event.PhaseEvent{Phase: "plan", State: engine.PhaseFailed, ElapsedMS: 80, Message: res.Message})
		emit(res)
		return err
	}
}

// UpgradeScriptOn is UpgradeScript of a cluster of provider.
func UpgradeScriptOn(provider, name, location string, changes []engine.PlanChange) Script {
	return func(ctx context.Context, sink engine.Sink, confirm engine.Confirmer) error {
		emit := emitter(sink)
		phase := func(p event.Phase, state event.State, ms int64, msg string) {
			emit(event.PhaseEvent{Phase: p, State: state, ElapsedMS: ms, Message: msg})
		}
		phase("discover", engine.PhaseStarted, 0, "")
		phase("discover", engine.PhaseSucceeded, 40, "")
		phase("plan", engine.PhaseStarted, 0, "")
		for _, c := range changes {
			emit(event.PlanEvent{Action: c.Action, Kind: c.Kind, Namespace: c.Namespace, Name: c.Name, Fields: c.Fields, Message: c.Message})
		}
		emit(event.LogEvent{Level: engine.LevelWarn, Message: "project default/api needs a restack: stack web changed (stack.image)"})
		phase("plan", engine.PhaseSucceeded, 120, "")
		ok := false
		if c, can := confirm.(engine.UpgradeConfirmer); can {
			var err error
			if ok, err = c.ConfirmUpgrade(ctx, engine.UpgradeQuestion{Provider: provider, Name: name, Location: location, Changes: changes}); err != nil {
				return err
			}
		}
		if !ok {
			msg := fmt.Sprintf("upgrading platform %s needs confirmation (%d changes planned above); nothing was changed. Pass %s to apply it", name, len(changes), tui.InputName(engine.InputYes))
			err := failure.NeedsConfirm("%s", msg)
			emit(event.ResultEvent{Err: err, Message: msg})
			return err
		}
		phase("platform", engine.PhaseStarted, 0, "")
		emit(event.ResourceEvent{Kind: "Namespace", Name: "kiln-tenant-staging", Status: engine.StatusCurrent})
		emit(event.ResourceEvent{Kind: "Deployment", Namespace: "kiln-system", Name: "kiln-gateway", Status: engine.StatusCurrent, Message: "2/2 replicas available"})
		phase("platform", engine.PhaseSucceeded, 900, "")
		phase("config", engine.PhaseStarted, 0, "")
		phase("config", engine.PhaseSucceeded, 30, "")
		emit(event.ResultEvent{OK: true, Message: fmt.Sprintf("platform %s upgraded: %d changes applied", name, len(changes))})
		return nil
	}
}

// RefusedUpgradeScript is an upgrade whose config removes tenant old,
// which still has project old/web: the plan, then the engine's refusal
// (failure.Input) naming the project and the option that lets it go.
func RefusedUpgradeScript(name string) Script {
	return func(ctx context.Context, sink engine.Sink, confirm engine.Confirmer) error {
		emit := emitter(sink)
		emit(event.PhaseEvent{Phase: "discover", State: engine.PhaseStarted})
		emit(event.PhaseEvent{Phase: "discover", State: engine.PhaseSucceeded, ElapsedMS: 40})
		emit(event.PhaseEvent{Phase: "plan", State: engine.PhaseStarted})
		emit(event.PlanEvent{Action: "delete", Kind: "Namespace", Name: "kiln-tenant-old", Message: "tenant old removed: its namespace is deleted, with its project old/web"})
		emit(event.PlanEvent{Action: "delete", Kind: engine.KindToken, Name: "old", Message: "token of removed tenant old deleted from /home/dev/.local/state/kiln/kube/" + name + "/tokens"})
		err := engine.NewInputError(failure.Input, engine.InputDeleteProjects, name, "the config removes tenants that still have projects: old/web; nothing was changed. Delete those projects first, or pass {input} to delete them with their tenant")
		res := engine.FailedResult(err, tui.InputName, "")
		emit(event.PhaseEvent{Phase: "plan", State: engine.PhaseFailed, ElapsedMS: 80, Message: res.Message})
		emit(res)
		return err
	}
}

// RotateScript is a rotate-key of NAME in LOCATION shaped like the
// engine's: discover, plan, the question of step (engine.RotateStart,
// Resume or Retire) with keepOld; declined: failure.Confirm, nothing changed;
// confirmed: the credentials and retire phases and the result.
func RotateScript(name, location, step string, keepOld time.Duration) Script {
	return func(ctx context.Context, sink engine.Sink, confirm engine.Confirmer) error {
		emit := emitter(sink)
		phase := func(p event.Phase, state event.State, ms int64) {
			emit(event.PhaseEvent{Phase: p, State: state, ElapsedMS: ms})
		}
		oldKey := "sha256:3f1c0a9be2d47d6b1e0f5a8c9d2e7b4a6c1f0e9d8b7a6c5d4e3f2a1b0c9d8e7f"
		newKey := "sha256:9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b"
		phase("discover", engine.PhaseStarted, 0)
		phase("discover", engine.PhaseSucceeded, 40)
		phase("plan", engine.PhaseStarted, 0)
		phase("plan", engine.PhaseSucceeded, 20)
		q := engine.RotateQuestion{Provider: "kube", Name: name, Location: location, KeyID: oldKey,
			TokenDir: "/home/dev/.local/state/kiln/kube/" + name + "/tokens", Step: step, KeepOld: keepOld}
		if step != engine.RotateStart {
			q.KeyID, q.OldKeyID = newKey, oldKey
		}
		ok := false
		if c, can := confirm.(engine.RotateConfirmer); can {
			var err error
			if ok, err = c.ConfirmRotate(ctx, q); err != nil {
				return err
			}
		}
		if !ok {
			msg := "rotating the signing key of " + name + " needs confirmation; nothing was changed. Pass " + tui.InputName(engine.InputYes) + " to rotate it"
			err := failure.NeedsConfirm("%s", msg)
			emit(event.ResultEvent{Err: err, Message: msg})
			return err
		}
		phase("credentials", engine.PhaseStarted, 0)
		emit(event.ResourceEvent{Kind: "ConfigMap", Namespace: "kiln-system", Name: "kiln-auth", Status: engine.StatusCurrent, Message: "trusts 2 keys"})
		phase("credentials", engine.PhaseSucceeded, 300)
		phase("retire", engine.PhaseStarted, 0)
		emit(event.ResourceEvent{Kind: "ConfigMap", Namespace: "kiln-system", Name: "kiln-auth", Status: engine.StatusCurrent, Message: "trusts 1 key"})
		phase("retire", engine.PhaseSucceeded, 100)
		emit(event.ResultEvent{OK: true, Message: "key of " + name + " rotated to " + newKey + "; the old key " + oldKey + " is no longer trusted"})
		return nil
	}
}

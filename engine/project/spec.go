package project

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/lock"
)

// Spec is the desired spec and state of a project, stored as JSON under key
// spec.json of ConfigMap kiln-project-P. It is the source of truth: the
// stack is stored resolved, so a later change of the cluster config does not
// silently change a running project (restack does).
type Spec struct {
	Tenant  string       `json:"tenant"`
	Project string       `json:"project"`
	Stack   config.Stack `json:"stack"`
	// State is the desired state: running or suspended.
	State string `json:"state"`
	// Revision counts accepted operations: every operation that got the
	// lease writes the spec exactly once, so a lost update shows as a gap.
	Revision      int64     `json:"revision"`
	LastOperation string    `json:"last_operation"`
	UpdatedAt     time.Time `json:"updated_at"`
	UpdatedBy     string    `json:"updated_by"`
}

// MaxSpecSize bounds a spec kiln decodes: its own are a few hundred bytes.
const MaxSpecSize = 64 << 10

// decodeSpec reads the spec of ConfigMap cm and checks that it is one kiln
// could have written there: it decodes, its tenant and project are valid
// names that match the ConfigMap's own namespace and name, its state is
// known, and its stack passes the config's validation. A tenant who can
// write ConfigMaps in its namespace can plant anything; such a spec is
// refused (and skipped by list), never deployed.
func decodeSpec(cm *corev1.ConfigMap) (*Spec, error) {
	where := fmt.Sprintf("project spec configmap %s/%s", cm.Namespace, cm.Name)
	raw := cm.Data[SpecKey]
	if len(raw) > MaxSpecSize {
		return nil, fmt.Errorf("%s: key %s is %d bytes (at most %d)", where, SpecKey, len(raw), MaxSpecSize)
	}
	var s Spec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return nil, fmt.Errorf("%s key %s: %w", where, SpecKey, err)
	}
	if _, _, err := config.ValidateProjectRef(s.Tenant + "/" + s.Project); err != nil {
		return nil, fmt.Errorf("%s: %v", where, err)
	}
	r := Ref{Tenant: s.Tenant, Project: s.Project}
	if r.Namespace() != cm.Namespace || SpecName(r.Project) != cm.Name {
		return nil, fmt.Errorf("%s: holds the spec of %s, which belongs in %s/%s", where, r, r.Namespace(), SpecName(r.Project))
	}
	if s.State != DesiredRunning && s.State != DesiredSuspended {
		return nil, fmt.Errorf("%s: unknown state %q", where, s.State)
	}
	if err := config.ValidateStack("stack", s.Stack); err != nil {
		return nil, fmt.Errorf("%s: %v", where, err)
	}
	return &s, nil
}

// readSpec returns the spec, or nil when the project does not exist.
func (o *Ops) readSpec(ctx context.Context, r Ref) (*Spec, *corev1.ConfigMap, error) {
	cm, err := o.Client.CoreV1().ConfigMaps(r.Namespace()).Get(ctx, SpecName(r.Project), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get configmap %s/%s: %w", r.Namespace(), SpecName(r.Project), err)
	}
	s, err := decodeSpec(cm)
	return s, cm, err
}

// mustSpec is readSpec for operations on an existing project: a missing
// project is bad input (failure.Input).
func (o *Ops) mustSpec(ctx context.Context, r Ref) (*Spec, error) {
	s, _, err := o.readSpec(ctx, r)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, failure.BadInput("project %s: no such project in cluster %s (ConfigMap %s/%s not found); create it with kiln project create", r, o.Cluster, r.Namespace(), SpecName(r.Project))
	}
	return s, nil
}

// writeSpec changes the spec with a resourceVersion precondition: Create
// when the project is new, otherwise Update carrying the resourceVersion
// that was read. On a conflict it reads again and re-applies mutate, so no
// concurrent write is silently overwritten. mutate gets nil for a project
// that does not exist and returns the spec to store.
func (o *Ops) writeSpec(ctx context.Context, r Ref, op, holder string, mutate func(*Spec) (*Spec, error)) (*Spec, error) {
	cms := o.Client.CoreV1().ConfigMaps(r.Namespace())
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if err := conflictBackoff(ctx, attempt); err != nil {
			return nil, err
		}
		cur, cm, err := o.readSpec(ctx, r)
		if err != nil {
			return nil, err
		}
		var in *Spec
		if cur != nil {
			c := *cur
			in = &c
		}
		next, err := mutate(in)
		if err != nil {
			return nil, err
		}
		if cur != nil {
			next.Revision = cur.Revision + 1
		} else {
			next.Revision = 1
		}
		next.Tenant, next.Project = r.Tenant, r.Project
		next.LastOperation, next.UpdatedBy, next.UpdatedAt = op, lock.Who(holder), o.now().UTC()
		data, err := json.Marshal(next)
		if err != nil {
			return nil, err
		}
		if cm == nil {
			obj := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: SpecName(r.Project), Namespace: r.Namespace(), Labels: o.labels(r)},
				Data:       map[string]string{SpecKey: string(data)},
			}
			_, err = cms.Create(ctx, obj, metav1.CreateOptions{FieldManager: "kiln"})
		} else {
			upd := cm.DeepCopy() // carries the resourceVersion read above
			upd.Data = map[string]string{SpecKey: string(data)}
			_, err = cms.Update(ctx, upd, metav1.UpdateOptions{FieldManager: "kiln"})
		}
		if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
			// A retried write whose first answer was lost meets its own
			// landed write. The spec carries its write time to the
			// nanosecond, so finding exactly our bytes means it landed:
			// done, not written twice (which would bump the revision and
			// re-apply mutate).
			if landed, rerr := o.specIs(ctx, r, string(data)); rerr != nil {
				return nil, rerr
			} else if landed {
				return next, nil
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("write configmap %s/%s: %w", r.Namespace(), SpecName(r.Project), err)
		}
		return next, nil
	}
	return nil, fmt.Errorf("write configmap %s/%s: too many concurrent changes", r.Namespace(), SpecName(r.Project))
}

// specIs reports whether the stored spec is exactly data.
func (o *Ops) specIs(ctx context.Context, r Ref, data string) (bool, error) {
	_, cm, err := o.readSpec(ctx, r)
	if err != nil {
		return false, err
	}
	return cm != nil && cm.Data[SpecKey] == data, nil
}

// maxAttempts bounds how often a write that lost a resourceVersion race is
// retried.
const maxAttempts = 100

// conflictBackoff waits a little, randomly, before retry attempt (nothing
// before the first), so racing writers spread out instead of colliding
// again in lockstep.
func conflictBackoff(ctx context.Context, attempt int) error {
	if attempt == 0 {
		return nil
	}
	d := time.Duration(rand.Int64N(int64(min(attempt, 10))*int64(5*time.Millisecond))) + time.Millisecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (o *Ops) labels(r Ref) map[string]string {
	return map[string]string{
		LabelManagedBy: "kiln",
		LabelCluster:   o.Cluster,
		LabelTenant:    r.Tenant,
		LabelProject:   r.Project,
	}
}

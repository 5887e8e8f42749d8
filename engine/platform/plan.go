package platform

import (
	"context"
	"fmt"
	"reflect"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// Actions of a planned change (the plan event's action).
const (
	ActionCreate = "create"
	ActionUpdate = "update"
	ActionDelete = "delete"
)

// maxFields bounds the field paths one planned update lists.
const maxFields = 20

// Change is what applying one object would do: nothing (Action ""),
// create it, or update the listed fields.
type Change struct {
	Action string
	// Fields are the paths that change (update only), e.g.
	// spec.replicas or spec.template.spec.containers[0].image.
	Fields []string
}

// Plan says what Ensure would do to obj, without writing: a GET, and for
// an object that exists a server-side dry-run apply compared with it
// (so defaulting and admission are the server's, exactly as Ensure sees
// them).
func Plan(ctx context.Context, cs kubernetes.Interface, obj Object) (Change, error) {
	live, err := getLive(ctx, cs, obj.Ref)
	if err != nil {
		return Change{}, err
	}
	return PlanLive(ctx, cs, obj, live)
}

// PlanLive is Plan with the live object already read (nil: absent), by a
// LIST say: planning many objects of a kind then costs one LIST and a
// dry-run apply each.
func PlanLive(ctx context.Context, cs kubernetes.Interface, obj Object, live runtime.Object) (Change, error) {
	if live != nil && reflect.ValueOf(live).IsNil() {
		live = nil // a typed nil from a lookup
	}
	if m, ok := live.(metav1.Object); ok && m.GetDeletionTimestamp() != nil {
		live = nil // being deleted: applied again once gone
	}
	if live == nil {
		return Change{Action: ActionCreate}, nil
	}
	dry, err := apply(ctx, cs, obj, true)
	if err != nil {
		return Change{}, err
	}
	fields, err := changedFields(live, dry)
	if err != nil {
		return Change{}, fmt.Errorf("compare %s: %w", obj.Ref, err)
	}
	if len(fields) == 0 {
		return Change{}, nil
	}
	return Change{Action: ActionUpdate, Fields: fields}, nil
}

// changedFields lists the paths where a and b differ, ignoring what the
// server maintains by itself (as equivalent does).
func changedFields(a, b runtime.Object) ([]string, error) {
	ma, mb, err := withoutServerFields(a, b)
	if err != nil {
		return nil, err
	}
	var out []string
	diffValue("", ma, mb, &out)
	sort.Strings(out)
	if len(out) > maxFields {
		out = append(out[:maxFields], fmt.Sprintf("(%d more)", len(out)-maxFields))
	}
	return out, nil
}

func diffValue(path string, a, b any, out *[]string) {
	if reflect.DeepEqual(a, b) {
		return
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			diffValue(p, am[k], bm[k], out)
		}
		return
	}
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok && bok && len(as) == len(bs) {
		for i := range as {
			diffValue(fmt.Sprintf("%s[%d]", path, i), as[i], bs[i], out)
		}
		return
	}
	*out = append(*out, path)
}

// Apply applies obj with server-side apply (field manager kiln, forced),
// without comparing first: for an object a plan has just compared.
func Apply(ctx context.Context, cs kubernetes.Interface, obj Object) error {
	_, err := apply(ctx, cs, obj, false)
	return err
}

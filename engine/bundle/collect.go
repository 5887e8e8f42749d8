package bundle

import (
	"context"
	"fmt"
	"path"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// Scope is what of one namespace to collect.
type Scope struct {
	Namespace string
	// Selector narrows the namespace's objects (a project's label); "" is
	// every object.
	Selector string
	// Event keeps an event about kind/name; nil keeps every event.
	Event func(kind, name string) bool
	// Redact, when set, rewrites each (already sanitized) object before
	// it is written.
	Redact func(runtime.Object) runtime.Object
}

// Limits bound the logs a bundle holds.
type Limits struct {
	// LogLines is how many last lines of each container (and of its
	// previous instance) are kept.
	LogLines int64
	// LogBytes bounds each container's log.
	LogBytes int64
}

// DefaultLimits keep a bundle small enough to attach to a ticket.
var DefaultLimits = Limits{LogLines: 500, LogBytes: 256 << 10}

// lastApplied is kubectl's copy of a whole object: for a Secret, its data.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// Collect writes every object of the scope (objects/NS/KIND/NAME.json),
// its events (events/NS.json), its pods' statuses (pods/NS.json) and their
// bounded logs (logs/NS/POD/CONTAINER.log). What cannot be read is a
// Problem, not a failure: a read-only role may not list everything.
func (b *Bundle) Collect(ctx context.Context, cs kubernetes.Interface, s Scope, lim Limits) error {
	ns := s.Namespace
	opts := metav1.ListOptions{LabelSelector: s.Selector}
	type lister struct {
		kind string
		list func() (runtime.Object, error)
	}
	listers := []lister{
		{"ConfigMap", func() (runtime.Object, error) { return cs.CoreV1().ConfigMaps(ns).List(ctx, opts) }},
		{"Secret", func() (runtime.Object, error) { return cs.CoreV1().Secrets(ns).List(ctx, opts) }},
		{"Deployment", func() (runtime.Object, error) { return cs.AppsV1().Deployments(ns).List(ctx, opts) }},
		{"ReplicaSet", func() (runtime.Object, error) { return cs.AppsV1().ReplicaSets(ns).List(ctx, opts) }},
		{"Pod", func() (runtime.Object, error) { return cs.CoreV1().Pods(ns).List(ctx, opts) }},
		{"Service", func() (runtime.Object, error) { return cs.CoreV1().Services(ns).List(ctx, opts) }},
		{"EndpointSlice", func() (runtime.Object, error) { return cs.DiscoveryV1().EndpointSlices(ns).List(ctx, opts) }},
		{"Ingress", func() (runtime.Object, error) { return cs.NetworkingV1().Ingresses(ns).List(ctx, opts) }},
		{"NetworkPolicy", func() (runtime.Object, error) { return cs.NetworkingV1().NetworkPolicies(ns).List(ctx, opts) }},
		{"Lease", func() (runtime.Object, error) { return cs.CoordinationV1().Leases(ns).List(ctx, opts) }},
		{"ServiceAccount", func() (runtime.Object, error) { return cs.CoreV1().ServiceAccounts(ns).List(ctx, opts) }},
		{"Role", func() (runtime.Object, error) { return cs.RbacV1().Roles(ns).List(ctx, opts) }},
		{"RoleBinding", func() (runtime.Object, error) { return cs.RbacV1().RoleBindings(ns).List(ctx, opts) }},
	}
	var pods []corev1.Pod
	for _, l := range listers {
		list, err := l.list()
		if err != nil {
			b.Problem("list %s in %s: %v", l.kind, ns, err)
			continue
		}
		if pl, ok := list.(*corev1.PodList); ok {
			pods = pl.Items
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return fmt.Errorf("support bundle: %s in %s: %w", l.kind, ns, err)
		}
		for _, it := range items {
			m, err := meta.Accessor(it)
			if err != nil {
				return fmt.Errorf("support bundle: %s in %s: %w", l.kind, ns, err)
			}
			obj := Sanitize(it)
			if s.Redact != nil {
				obj = s.Redact(obj)
			}
			name := path.Join("objects", ns, l.kind, m.GetName()+".json")
			if err := b.AddJSON(name, l.kind+" "+ns+"/"+m.GetName()+": spec and status", obj); err != nil {
				return err
			}
		}
	}

	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Problem("list events in %s: %v", ns, err)
	} else {
		kept := []corev1.Event{}
		for _, ev := range evs.Items {
			if s.Event == nil || s.Event(ev.InvolvedObject.Kind, ev.InvolvedObject.Name) {
				ev.ManagedFields = nil
				kept = append(kept, ev)
			}
		}
		sort.SliceStable(kept, func(i, j int) bool { return kept[i].LastTimestamp.After(kept[j].LastTimestamp.Time) })
		if err := b.AddJSON(path.Join("events", ns+".json"), "Kubernetes Events in "+ns+", newest first", kept); err != nil {
			return err
		}
	}

	type podStatus struct {
		Name       string                   `json:"name"`
		Phase      corev1.PodPhase          `json:"phase"`
		Node       string                   `json:"node"`
		Conditions []corev1.PodCondition    `json:"conditions"`
		Containers []corev1.ContainerStatus `json:"containers"`
	}
	statuses := []podStatus{}
	for _, p := range pods {
		statuses = append(statuses, podStatus{p.Name, p.Status.Phase, p.Spec.NodeName, p.Status.Conditions,
			append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)})
		for _, c := range p.Status.ContainerStatuses {
			b.addLog(ctx, cs, ns, p.Name, c, false, lim)
			if c.RestartCount > 0 || c.LastTerminationState.Terminated != nil {
				b.addLog(ctx, cs, ns, p.Name, c, true, lim)
			}
		}
	}
	if len(pods) > 0 {
		return b.AddJSON(path.Join("pods", ns+".json"), "pod statuses in "+ns+" (phase, conditions, restarts, last termination)", statuses)
	}
	return nil
}

func (b *Bundle) addLog(ctx context.Context, cs kubernetes.Interface, ns, pod string, c corev1.ContainerStatus, previous bool, lim Limits) {
	if !previous && c.State.Running == nil && c.State.Terminated == nil {
		return // never started: no log
	}
	lines, bytes_ := lim.LogLines, lim.LogBytes
	raw, err := cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: c.Name, Previous: previous, TailLines: &lines, LimitBytes: &bytes_}).DoRaw(ctx)
	which := "log"
	if previous {
		which = "previous log"
	}
	if err != nil {
		b.Problem("%s of pod %s/%s container %s: %v", which, ns, pod, c.Name, err)
		return
	}
	name := path.Join("logs", ns, pod, c.Name+".log")
	if previous {
		name = path.Join("logs", ns, pod, c.Name+".previous.log")
	}
	_ = b.Add(name, fmt.Sprintf("%s of pod %s container %s (last %d lines, at most %d bytes)", which, pod, c.Name, lim.LogLines, lim.LogBytes), raw)
}

// Sanitize returns a copy of obj safe to share: no managedFields or
// last-applied annotation; a Secret keeps name, namespace, labels, type and
// its key names (values removed).
func Sanitize(obj runtime.Object) runtime.Object {
	obj = obj.DeepCopyObject()
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
		if a := m.GetAnnotations(); a != nil {
			delete(a, lastApplied)
			m.SetAnnotations(a)
		}
	}
	if s, ok := obj.(*corev1.Secret); ok {
		return SecretKeys(s)
	}
	return obj
}

// SecretSummary is all a bundle says of a Secret.
type SecretSummary struct {
	metav1.TypeMeta `json:",inline"`
	Name            string            `json:"name"`
	Namespace       string            `json:"namespace"`
	Labels          map[string]string `json:"labels,omitempty"`
	Type            corev1.SecretType `json:"type"`
	Keys            []string          `json:"keys"`
	Created         metav1.Time       `json:"creationTimestamp"`
}

func (s *SecretSummary) DeepCopyObject() runtime.Object { c := *s; return &c }

// SecretKeys reduces a Secret to its summary.
func SecretKeys(s *corev1.Secret) *SecretSummary {
	keys := []string{}
	for k := range s.Data {
		keys = append(keys, k)
	}
	for k := range s.StringData {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return &SecretSummary{Name: s.Name, Namespace: s.Namespace, Labels: s.Labels, Type: s.Type, Keys: keys, Created: s.CreationTimestamp,
		TypeMeta: metav1.TypeMeta{Kind: "Secret", APIVersion: "v1"}}
}

package bundle

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	// Event further narrows the events kept (they are always only those
	// about an object the bundle holds); nil keeps them all.
	Event func(kind, name string) bool
	// Redact, when set, rewrites each (already sanitized) object before
	// it is written.
	Redact func(runtime.Object) runtime.Object
	// ConfigMapKeys names the keys of a ConfigMap whose values the bundle
	// may hold: kiln's own data (kiln-config's config.yaml, a project's
	// spec). Every other value is replaced by Redacted, whoever labelled
	// the ConfigMap; nil keeps no value.
	ConfigMapKeys func(name string) []string
}

// Redacted replaces every value the bundle may not hold: an environment
// variable's value, a ConfigMap key's value that is not kiln's own data.
const Redacted = "(redacted)"

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

// LogEntry is one log file of the bundle, as logs.json lists it.
type LogEntry struct {
	File      string `json:"file"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Container string `json:"container"`
	Previous  bool   `json:"previous"`
	Lines     int    `json:"lines"`
	Bytes     int    `json:"bytes"`
	// Truncated: the container's log was longer than the limits, and the
	// file holds its last lines only.
	Truncated bool `json:"truncated"`
}

// lastApplied is kubectl's copy of a whole object: for a Secret, its data.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// Collect writes every object of the scope (objects/NS/KIND/NAME.json),
// the events about them (events/NS.json), its pods' statuses
// (pods/NS.json) and their bounded logs (logs/NS/POD/CONTAINER.log, each
// in Logs). The caller's Selector decides which objects are kiln's. What
// cannot be read is a Problem, not a failure; Secrets a role may not read
// at all (the support role) are a Note.
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
	held := map[string]bool{} // kind/name of every object written
	for _, l := range listers {
		list, err := l.list()
		if err != nil {
			if l.kind == "Secret" && apierrors.IsForbidden(err) {
				b.Note("Secrets in %s: not listed, the role may not read Secrets (the support role never can)", ns)
				continue
			}
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
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				var keep []string
				if s.ConfigMapKeys != nil {
					keep = s.ConfigMapKeys(cm.Name)
				}
				RedactConfigMap(cm, keep)
			}
			if s.Redact != nil {
				obj = s.Redact(obj)
			}
			held[l.kind+"/"+m.GetName()] = true
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
			io := ev.InvolvedObject
			if !held[io.Kind+"/"+io.Name] && !(io.Kind == "Namespace" && io.Name == ns) {
				continue // about an object that is not kiln's
			}
			if s.Event == nil || s.Event(io.Kind, io.Name) {
				ev.ManagedFields = nil
				kept = append(kept, ev)
			}
		}
		sort.SliceStable(kept, func(i, j int) bool { return kept[i].LastTimestamp.After(kept[j].LastTimestamp.Time) })
		if err := b.AddJSON(path.Join("events", ns+".json"), "Kubernetes Events about kiln's objects in "+ns+", newest first", kept); err != nil {
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
	which := "log"
	if previous {
		which = "previous log"
	}
	// One line and one byte more than kept: having them is how the
	// bundle knows the log was longer.
	lines, limit := lim.LogLines+1, lim.LogBytes+1
	rc, err := cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: c.Name, Previous: previous, TailLines: &lines, LimitBytes: &limit}).Stream(ctx)
	if err != nil {
		b.Problem("%s of pod %s/%s container %s: %v", which, ns, pod, c.Name, err)
		return
	}
	raw, err := io.ReadAll(io.LimitReader(rc, limit)) // whatever the server honours
	_ = rc.Close()
	if err != nil {
		b.Problem("%s of pod %s/%s container %s: %v", which, ns, pod, c.Name, err)
		return
	}
	raw, truncated := boundLog(raw, lim)
	name := path.Join("logs", ns, pod, c.Name+".log")
	if previous {
		name = path.Join("logs", ns, pod, c.Name+".previous.log")
	}
	n := bytes.Count(raw, []byte("\n"))
	if len(raw) > 0 && raw[len(raw)-1] != '\n' {
		n++
	}
	what := fmt.Sprintf("%s of pod %s container %s: complete, %d lines", which, pod, c.Name, n)
	if truncated {
		what = fmt.Sprintf("%s of pod %s container %s: TRUNCATED to its last %d lines (limits: %d lines, %d bytes)", which, pod, c.Name, n, lim.LogLines, lim.LogBytes)
	}
	if err := b.Add(name, what, raw); err != nil {
		b.Problem("%s of pod %s/%s container %s: %v", which, ns, pod, c.Name, err)
		return
	}
	b.Logs = append(b.Logs, LogEntry{File: name, Namespace: ns, Pod: pod, Container: c.Name, Previous: previous, Lines: n, Bytes: len(raw), Truncated: truncated})
}

// boundLog keeps at most lim.LogLines whole lines and lim.LogBytes bytes
// of raw, the end of the log (its newest lines), and says whether it cut
// anything.
func boundLog(raw []byte, lim Limits) ([]byte, bool) {
	truncated := false
	if int64(len(raw)) > lim.LogBytes {
		// The server may have cut the tail's end (limitBytes counts from
		// the tail's start): keep whole lines from the end of what came.
		raw, truncated = raw[int64(len(raw))-lim.LogBytes:], true
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			raw = raw[i+1:]
		}
	}
	lines := bytes.SplitAfter(raw, []byte("\n"))
	if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	if int64(len(lines)) > lim.LogLines {
		lines, truncated = lines[int64(len(lines))-lim.LogLines:], true
		raw = bytes.Join(lines, nil)
	}
	return raw, truncated
}

// RedactConfigMap replaces the value of every key of cm but keep with
// Redacted (binary data too): the key names stay.
func RedactConfigMap(cm *corev1.ConfigMap, keep []string) {
	kept := map[string]bool{}
	for _, k := range keep {
		kept[k] = true
	}
	for k := range cm.Data {
		if !kept[k] {
			cm.Data[k] = Redacted
		}
	}
	for k := range cm.BinaryData {
		cm.BinaryData[k] = []byte(Redacted)
	}
}

// redactPodSpec replaces every environment variable's value with Redacted:
// names stay, and so do valueFrom references (which name a Secret or
// ConfigMap key, not its value).
func redactPodSpec(ps *corev1.PodSpec) {
	redact := func(env []corev1.EnvVar) {
		for i := range env {
			if env[i].Value != "" {
				env[i].Value = Redacted
			}
		}
	}
	for i := range ps.InitContainers {
		redact(ps.InitContainers[i].Env)
	}
	for i := range ps.Containers {
		redact(ps.Containers[i].Env)
	}
	for i := range ps.EphemeralContainers {
		redact(ps.EphemeralContainers[i].Env)
	}
}

// Sanitize returns a copy of obj safe to share: no managedFields or
// last-applied annotation; a Secret keeps name, namespace, labels, type and
// its key names (values removed); a Pod's, Deployment's or ReplicaSet's
// environment variables keep their names and valueFrom references, never
// their values.
func Sanitize(obj runtime.Object) runtime.Object {
	obj = obj.DeepCopyObject()
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
		if a := m.GetAnnotations(); a != nil {
			delete(a, lastApplied)
			m.SetAnnotations(a)
		}
	}
	switch o := obj.(type) {
	case *corev1.Secret:
		return SecretKeys(o)
	case *corev1.Pod:
		redactPodSpec(&o.Spec)
	case *appsv1.Deployment:
		redactPodSpec(&o.Spec.Template.Spec)
	case *appsv1.ReplicaSet:
		redactPodSpec(&o.Spec.Template.Spec)
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

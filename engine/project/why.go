package project

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilnctl/kiln/engine/platform"
)

// MaxEvents bounds the Kubernetes Events Inspect reports per project.
const MaxEvents = 50

// EventInfo is one Kubernetes Event about a project's object or pod.
type EventInfo struct {
	// Object is KIND/NAME of the object the event is about.
	Object  string    `json:"object"`
	Type    string    `json:"type"` // Normal or Warning
	Reason  string    `json:"reason"`
	Count   int32     `json:"count"`
	Last    time.Time `json:"last_seen"`
	AgeS    int64     `json:"age_s"`
	Message string    `json:"message"`
}

// PodInfo is the status of one of a project's pods: why it restarts.
type PodInfo struct {
	Name     string `json:"name"`
	Phase    string `json:"phase"`
	Ready    bool   `json:"ready"`
	Restarts int32  `json:"restarts"`
	// Waiting is the reason a container waits (CrashLoopBackOff,
	// ImagePullBackOff …), "" when none does.
	Waiting string `json:"waiting"`
	// LastTermination is the reason the last container instance ended
	// (Error, OOMKilled, Completed …), "" if none ended.
	LastTermination string `json:"last_termination"`
	LastExitCode    int32  `json:"last_exit_code"`
	Node            string `json:"node"`
}

// podInfos reports the statuses of a project's pods, by name.
func podInfos(pods []corev1.Pod) []PodInfo {
	rows := make([]podRow, len(pods))
	for i := range pods {
		rows[i] = newPodRow(&pods[i])
	}
	return rowInfos(rows)
}

// rowInfos is podInfos of pods already read into rows.
func rowInfos(rows []podRow) []PodInfo {
	out := make([]PodInfo, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// podRow is what observe reads of a pod, computed as its page is read:
// its status for the report, and the reasons its containers (init
// containers first) are waiting, for podProblems.
type podRow struct {
	info  PodInfo
	waits []string
}

func newPodRow(p *corev1.Pod) podRow {
	r := podRow{info: PodInfo{Name: p.Name, Phase: string(p.Status.Phase), Node: p.Spec.NodeName}}
	pi := &r.info
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			pi.Ready = c.Status == corev1.ConditionTrue
		}
	}
	for _, css := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range css {
			pi.Restarts += cs.RestartCount
			if w := cs.State.Waiting; w != nil {
				if pi.Waiting == "" {
					pi.Waiting = w.Reason
				}
				r.waits = append(r.waits, w.Reason)
			}
			if t := cs.LastTerminationState.Terminated; t != nil && pi.LastTermination == "" {
				pi.LastTermination, pi.LastExitCode = t.Reason, t.ExitCode
			}
			if t := cs.State.Terminated; t != nil && pi.LastTermination == "" {
				pi.LastTermination, pi.LastExitCode = t.Reason, t.ExitCode
			}
		}
	}
	return r
}

// Owns reports whether an object named name of kind belongs to project
// p: its own objects by name, and the ReplicaSets (P-HASH) and pods
// (P-HASH-SUFFIX) of its Deployment, which outlive the label snapshot.
func Owns(p, kind, name string) bool {
	switch kind {
	case "ConfigMap":
		return name == SpecName(p)
	case "Secret":
		return name == SecretName(p)
	case "Deployment", "Service", "Ingress", "EndpointSlice", "Endpoints":
		return name == p || (kind == "EndpointSlice" && strings.HasPrefix(name, p+"-") && !strings.Contains(name[len(p)+1:], "-"))
	case "Lease":
		return name == LeaseName(p)
	case "ReplicaSet":
		return strings.HasPrefix(name, p+"-") && !strings.Contains(name[len(p)+1:], "-")
	case "Pod":
		return strings.HasPrefix(name, p+"-") && strings.Count(name[len(p)+1:], "-") == 1
	}
	return false
}

// events lists the Events about project p's objects and pods (its
// namespace's, and its route's in kiln-system), newest first, at most
// MaxEvents.
func (o *Ops) events(ctx context.Context, r Ref) ([]EventInfo, error) {
	list, err := o.Client.CoreV1().Events(r.Namespace()).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list events in %s: %w", r.Namespace(), err)
	}
	// The route lives in kiln-system: its Events are read there, by name.
	routes, err := o.Client.CoreV1().Events(platform.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Ingress,involvedObject.name=" + RouteName(r),
	})
	if err != nil {
		return nil, fmt.Errorf("list events of route %s/%s: %w", platform.Namespace, RouteName(r), err)
	}
	now := o.now()
	out := []EventInfo{}
	for _, ev := range append(list.Items, routes.Items...) {
		io := ev.InvolvedObject
		if ev.Namespace == platform.Namespace {
			io.Name = platform.Namespace + "/" + io.Name
		} else if !Owns(r.Project, io.Kind, io.Name) {
			continue
		}
		last := eventTime(&ev)
		count := ev.Count
		if ev.Series != nil && ev.Series.Count > count {
			count = ev.Series.Count
		}
		if count == 0 {
			count = 1
		}
		out = append(out, EventInfo{
			Object: io.Kind + "/" + io.Name, Type: ev.Type, Reason: ev.Reason, Count: count,
			Last: last, AgeS: int64(now.Sub(last).Seconds()), Message: strings.TrimSpace(ev.Message),
		})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Last.After(out[j].Last) })
	if len(out) > MaxEvents {
		out = out[:MaxEvents]
	}
	return out, nil
}

// eventTime is when an event last happened, whichever API wrote it.
func eventTime(ev *corev1.Event) time.Time {
	switch {
	case ev.Series != nil && !ev.Series.LastObservedTime.IsZero():
		return ev.Series.LastObservedTime.Time
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	}
	return ev.CreationTimestamp.Time
}

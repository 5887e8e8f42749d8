package project

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOwns(t *testing.T) {
	for _, c := range []struct {
		kind, name string
		want       bool
	}{
		{"Deployment", "blog", true},
		{"Deployment", "blog-api", false},
		{"ReplicaSet", "blog-6d4f9c7b", true},
		{"ReplicaSet", "blog-api-6d4f9c7b", false}, // project blog-api's
		{"Pod", "blog-6d4f9c7b-x2kqp", true},
		{"Pod", "blog-api-6d4f9c7b-x2kqp", false},
		{"ConfigMap", "kiln-project-blog", true},
		{"Secret", "blog-auth", true},
		{"Lease", "kiln-project-blog", true},
		{"EndpointSlice", "blog-abcde", true},
		{"Service", "other", false},
		{"Node", "blog", false},
	} {
		if got := Owns("blog", c.kind, c.name); got != c.want {
			t.Errorf("Owns(blog, %s, %s) = %v, want %v", c.kind, c.name, got, c.want)
		}
	}
}

func TestPodInfosReadRestartsAndLastTermination(t *testing.T) {
	p := corev1.Pod{}
	p.Name = "blog-1-a"
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: "app", RestartCount: 3,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137, FinishedAt: metaNow()}},
	}}
	got := podInfos([]corev1.Pod{p})
	if len(got) != 1 || got[0].Restarts != 3 || got[0].Waiting != "CrashLoopBackOff" || got[0].LastTermination != "OOMKilled" || got[0].LastExitCode != 137 {
		t.Fatalf("podInfos = %+v", got)
	}
}

func TestEventTimePrefersTheLatestRecord(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ev := &corev1.Event{}
	ev.CreationTimestamp.Time = t0
	if !eventTime(ev).Equal(t0) {
		t.Errorf("creation time not used")
	}
	ev.LastTimestamp.Time = t0.Add(time.Minute)
	if !eventTime(ev).Equal(t0.Add(time.Minute)) {
		t.Errorf("last timestamp not used")
	}
	ev.Series = &corev1.EventSeries{Count: 5}
	ev.Series.LastObservedTime.Time = t0.Add(time.Hour)
	if !eventTime(ev).Equal(t0.Add(time.Hour)) {
		t.Errorf("series last observed time not used")
	}
}

func metaNow() (m metav1.Time) { m.Time = time.Now(); return }

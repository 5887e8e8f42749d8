package main

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// inspect shows the Kubernetes Events of the project's objects and pods,
// newest first, and its pods' statuses; logs prints every pod's log
// prefixed with the pod, --tail bounds it, -f follows a pod that starts
// later and ends with exit 0 on Ctrl-C.
func TestProjectInspectEventsAndLogs(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "why", "kiln-b")
	expect(t, e.kiln("create", "kube", "why", "--context", "kiln-b"), 0)
	expect(t, e.kiln("project", "create", "kube", "why", "default/app", "--context", "kiln-b"), 0)

	r := e.kiln("project", "inspect", "kube", "why", "default/app", "--context", "kiln-b", "-o", "json")
	expect(t, r, 0)
	ev := projectEvent(t, r)
	pods, _ := ev["pods"].([]any)
	if len(pods) != 1 {
		t.Fatalf("inspect pods = %v, want one pod", ev["pods"])
	}
	pod := pods[0].(map[string]any)
	podName := pod["name"].(string)
	if pod["phase"] != "Running" || pod["restarts"] != float64(0) || pod["last_termination"] != "" {
		t.Errorf("pod status %v", pod)
	}
	events, _ := ev["events"].([]any)
	reasons := map[string]bool{}
	var prev time.Time
	for i, x := range events {
		m := x.(map[string]any)
		reasons[m["reason"].(string)] = true
		last, err := time.Parse(time.RFC3339Nano, m["last_seen"].(string))
		if err != nil {
			t.Fatalf("event %v: last_seen: %v", m, err)
		}
		if i > 0 && last.After(prev) {
			t.Errorf("events not newest first: %v after %v", last, prev)
		}
		prev = last
		if m["count"].(float64) < 1 || m["object"] == "" || m["type"] == "" {
			t.Errorf("event lacks count/object/type: %v", m)
		}
	}
	for _, want := range []string{"ScalingReplicaSet", "SuccessfulCreate", "Scheduled"} {
		if !reasons[want] {
			t.Errorf("inspect events lack reason %s; have %v", want, reasons)
		}
	}
	r = e.kiln("project", "inspect", "kube", "why", "default/app", "--context", "kiln-b")
	expect(t, r, 0)
	for _, want := range []string{"RESTARTS", "LAST TERMINATION", podName, "REASON", "Scheduled", "ScalingReplicaSet"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("inspect text lacks %q:\n%s", want, r.stdout)
		}
	}

	marker := fmt.Sprintf("log-marker-%d", time.Now().UnixNano())
	if err := clusterB.AppendPodLog(marker+" one", marker+" two"); err != nil {
		t.Fatal(err)
	}
	logs := []string{"project", "logs", "kube", "why", "default/app", "--context", "kiln-b"}
	r = e.kiln(logs...)
	expect(t, r, 0)
	if !strings.Contains(r.stdout, "["+podName+"] "+marker+" one\n["+podName+"] "+marker+" two\n") {
		t.Errorf("logs lack the pod-prefixed lines:\n%s", r)
	}
	r = e.kiln(append(logs, "--tail", "1")...)
	expect(t, r, 0)
	if r.stdout != "["+podName+"] "+marker+" two\n" {
		t.Errorf("--tail 1 printed %q", r.stdout)
	}
	r = e.kiln(append(logs, "-o", "json", "--tail", "1")...)
	expect(t, r, 0)
	if l := r.last(t, "pod_log"); l["type"] != "pod_log" || l["pod"] != podName || l["container"] == "" || l["line"] != marker+" two" {
		t.Errorf("json log line %v", l)
	}
	if res := r.last(t, "result"); res["ok"] != true {
		t.Errorf("result %v", res)
	}

	// Follow: a new line, then a pod that starts later.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := e.command(ctx, nil, append(logs, "-f", "--tail", "0")...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	until := func(what string, ok func(string) bool) {
		t.Helper()
		// Lines written before the follower's stream opened are not shown
		// (--tail 0), and kwok answers a follow only once a line comes:
		// append until one comes through.
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				if err := clusterB.AppendPodLog(marker + " follow"); err != nil {
					t.Fatal(err)
				}
			case l, open := <-lines:
				if !open {
					t.Fatalf("follower ended before %s; stderr:\n%s", what, stderr.String())
				}
				if ok(l) {
					return
				}
			case <-ctx.Done():
				t.Fatalf("follower never printed %s", what)
			}
		}
	}
	until("the followed line", func(l string) bool { return l == "["+podName+"] "+marker+" follow" })
	cs := clientFor("kiln-b")
	if err := cs.CoreV1().Pods("kiln-tenant-default").Delete(ctx, podName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	until("a line of the replacement pod", func(l string) bool {
		return strings.HasPrefix(l, "[app-") && !strings.HasPrefix(l, "["+podName+"]")
	})
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("follower after Ctrl-C: %v\n%s", err, stderr.String())
	}
}

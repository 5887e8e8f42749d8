package main

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// objectRow finds the row of kind/name in a project event's objects.
func objectRow(p map[string]any, kind, name string) map[string]any {
	objs, _ := p["objects"].([]any)
	for _, o := range objs {
		m, _ := o.(map[string]any)
		if m["kind"] == kind && m["name"] == name {
			return m
		}
	}
	return nil
}

// Every row is a live read (DESIGN §17): each object of a running project
// is deleted in turn by hand, and project inspect, status and project list
// say at once that it is gone — never Current — with the project degraded
// and a reason naming it. status --repair heals what it can; the Secret,
// whose token exists nowhere else, it refuses to invent, naming the
// command that issues a new one, and that command is then run as printed.
// A user bound to the shipped support role, who may not read Secrets,
// sees the Secret's row as Unknown, saying why, never Current.
func TestEveryRowIsALiveRead(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	const name, kctx = "truth", "kiln-b"
	cleanup(t, e, name, kctx)
	expect(t, e.kiln("create", "kube", name, "--context", kctx, "--headless"), 0)
	expect(t, e.kiln("project", "create", "kube", name, "default/api", "--context", kctx, "--headless"), 0)
	cs := clusterB.Client
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const ns = "kiln-tenant-default"
	inspect := func() map[string]any {
		t.Helper()
		r := e.kiln("project", "inspect", "kube", name, "default/api", "--context", kctx, "-o", "json")
		expect(t, r, 0)
		return projectEvent(t, r)
	}

	for _, c := range []struct {
		kind, ns, name, reason string
		del                    func() error
	}{
		{"Secret", ns, "api-auth", "secret api-auth missing", func() error {
			return cs.CoreV1().Secrets(ns).Delete(ctx, "api-auth", metav1.DeleteOptions{})
		}},
		{"Deployment", ns, "api", "deployment missing", func() error {
			return cs.AppsV1().Deployments(ns).Delete(ctx, "api", metav1.DeleteOptions{})
		}},
		{"Service", ns, "api", "service missing", func() error {
			return cs.CoreV1().Services(ns).Delete(ctx, "api", metav1.DeleteOptions{})
		}},
		{"Ingress", "kiln-system", "default.api", "route missing", func() error {
			return cs.NetworkingV1().Ingresses("kiln-system").Delete(ctx, "default.api", metav1.DeleteOptions{})
		}},
	} {
		t.Run(c.kind, func(t *testing.T) {
			if p := inspect(); p["state"] != "running" {
				t.Fatalf("before deleting the %s: %v (%s)", c.kind, p["state"], reasons(p))
			}
			if err := c.del(); err != nil {
				t.Fatal(err)
			}
			waitGone(t, cs, c.kind, c.ns, c.name)
			p := inspect()
			row := objectRow(p, c.kind, c.name)
			if row == nil || row["status"] == "Current" {
				t.Errorf("inspect after deleting %s %s: row %v, want not Current", c.kind, c.name, row)
			}
			if p["state"] != "degraded" || !strings.Contains(reasons(p), c.reason) {
				t.Errorf("inspect after deleting %s: state %v, reasons %q; want degraded naming %q", c.kind, p["state"], reasons(p), c.reason)
			}
			st := e.kiln("status", "kube", name, "--context", kctx, "-o", "json")
			expect(t, st, 0)
			if !strings.Contains(st.stdout, c.reason) {
				t.Errorf("status -o json after deleting %s does not say %q", c.kind, c.reason)
			}
			txt := e.kiln("project", "list", "kube", name, "--context", kctx)
			if !strings.Contains(txt.stdout, "degraded") {
				t.Errorf("project list after deleting %s:\n%s", c.kind, txt)
			}

			r := e.kiln("status", "kube", name, "--context", kctx, "--repair", "-o", "json")
			if c.kind == "Secret" {
				expect(t, r, 1)
				msg, _ := r.last(t, "result")["message"].(string)
				const hint = "kiln project rotate-token kube truth default/api --context " + kctx
				if !strings.Contains(msg, "cannot restore it") || !strings.Contains(msg, "`"+hint+"`") {
					t.Fatalf("repair of a missing Secret: %q, want it to say why and name `%s`", msg, hint)
				}
				// The hint is a command: run it as printed.
				expect(t, e.kiln(append(strings.Fields(hint)[1:], "--headless")...), 0)
			} else {
				expect(t, r, 0)
			}
			if p := inspect(); p["state"] != "running" || objectRow(p, c.kind, c.name)["status"] != "Current" {
				t.Errorf("after repair of the %s: state %v, row %v", c.kind, p["state"], objectRow(p, c.kind, c.name))
			}
		})
	}

	t.Run("support role: the Secret's row is Unknown, not Current", func(t *testing.T) {
		sup := newEnv(t)
		sup.kubeconfig = roleUser(t, clusterB, kctx, "rbac-support.yaml", "support-truth")
		// A support engineer bound after the platform was made gets kiln's
		// namespaced role with the next create --continue (or upgrade).
		expect(t, e.kiln("create", "kube", name, "--context", kctx, "--continue", "--headless"), 0)
		r := sup.kiln("project", "inspect", "kube", name, "default/api", "--context", kctx, "-o", "json")
		expect(t, r, 0)
		p := projectEvent(t, r)
		row := objectRow(p, "Secret", "api-auth")
		if row == nil || row["status"] != "Unknown" || !strings.Contains(row["message"].(string), "not permitted to read secrets") {
			t.Errorf("the Secret's row as support: %v, want Unknown, not permitted to read secrets", row)
		}
		if p["state"] != "running" {
			t.Errorf("as support: state %v (%s), want running", p["state"], reasons(p))
		}
	})
}

// waitGone waits until the object kind ns/name is no longer there.
func waitGone(t *testing.T, cs kubernetes.Interface, kind, ns, name string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var err error
		ctx := context.Background()
		switch kind {
		case "Secret":
			_, err = cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		case "Deployment":
			_, err = cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		case "Service":
			_, err = cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		case "Ingress":
			_, err = cs.NetworkingV1().Ingresses(ns).Get(ctx, name, metav1.GetOptions{})
		}
		if err != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s %s/%s still there", kind, ns, name)
}

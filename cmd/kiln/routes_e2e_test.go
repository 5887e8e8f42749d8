package main

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

const routesConfig = `apiVersion: kiln.dev/v1alpha1
kind: ClusterConfig
spec:
  tenants: [default]
  domain: routes.example.test
  gateway: {ingressClassName: nginx}
  stacks:
    - {name: web, image: "nginx:1.27-alpine", port: 80, cpu: 50m, memory: 64Mi}
`

// previousRoute turns project T/P's route into what the previous kiln
// made: no Ingress in kiln-system, Ingress kiln-tenant-T/P straight to
// Service P, with the labels that kiln set.
func previousRoute(t *testing.T, cs kubernetes.Interface, cluster, tenant, project, host string) {
	t.Helper()
	ctx := context.Background()
	ns := "kiln-tenant-" + tenant
	prefix := networkingv1.PathTypePrefix
	old := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: project, Namespace: ns, Labels: map[string]string{
			"app.kubernetes.io/managed-by": "kiln", "kiln.dev/cluster": cluster, "kiln.dev/tenant": tenant, "kiln.dev/project": project,
		}},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
			Host: host,
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: project, Port: networkingv1.ServiceBackendPort{Number: 80},
				}},
			}}}},
		}}},
	}
	// The old route first, then the new one goes: the project is never
	// without a route here either.
	if _, err := cs.NetworkingV1().Ingresses(ns).Create(ctx, old, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.NetworkingV1().Ingresses("kiln-system").Delete(ctx, tenant+"."+project, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// routeWatch follows every Ingress of project P (any namespace) with one
// watch, so its events come in the API server's order, and keeps the set
// that exists after each event.
type routeWatch struct {
	mu     sync.Mutex
	live   map[string]bool
	events []string // "ADDED kiln-system/default.blog@rv"
	empty  []string // the events after which no route of P existed
}

func watchRoutes(t *testing.T, cs kubernetes.Interface, project string) *routeWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sel := metav1.ListOptions{LabelSelector: "kiln.dev/project=" + project}
	list, err := cs.NetworkingV1().Ingresses("").List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	rw := &routeWatch{live: map[string]bool{}}
	for _, i := range list.Items {
		rw.live[i.Namespace+"/"+i.Name] = true
	}
	if len(rw.live) == 0 {
		t.Fatalf("project %s has no route when the watch starts", project)
	}
	sel.ResourceVersion = list.ResourceVersion
	w, err := cs.NetworkingV1().Ingresses("").Watch(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			ing, ok := ev.Object.(*networkingv1.Ingress)
			if !ok {
				continue
			}
			k := ing.Namespace + "/" + ing.Name
			rw.mu.Lock()
			switch ev.Type {
			case watch.Added, watch.Modified:
				rw.live[k] = true
			case watch.Deleted:
				delete(rw.live, k)
			}
			e := string(ev.Type) + " " + k + "@" + ing.ResourceVersion
			rw.events = append(rw.events, e)
			if len(rw.live) == 0 {
				rw.empty = append(rw.empty, e)
			}
			rw.mu.Unlock()
		}
	}()
	return rw
}

// seen waits until the watch delivered an event of type typ on ns/name and
// returns its resourceVersion.
func (rw *routeWatch) seen(t *testing.T, typ, key string) int64 {
	t.Helper()
	var rv int64
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		rw.mu.Lock()
		defer rw.mu.Unlock()
		for _, e := range rw.events {
			if strings.HasPrefix(e, typ+" "+key+"@") {
				rv, _ = strconv.ParseInt(e[strings.LastIndex(e, "@")+1:], 10, 64)
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		rw.mu.Lock()
		defer rw.mu.Unlock()
		t.Fatalf("the watch saw no %s %s; events: %v", typ, key, rw.events)
	}
	return rv
}

func (rw *routeWatch) check(t *testing.T) {
	t.Helper()
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if len(rw.empty) > 0 {
		t.Errorf("the running project had no route after %v (events %v)", rw.empty, rw.events)
	}
}

// A platform the previous kiln made routes projects from Ingress
// kiln-tenant-T/P straight to the project. kiln upgrade, and kiln create
// --continue, move every running project's route to kiln-system/T.P
// through the gateway: the new route is ready before the old one is
// deleted, so at no instant is a running project without a route.
func TestRoutesMigrateFromThePreviousKiln(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	const name, kctx = "routes", "kiln-a"
	cleanup(t, e, name, kctx)
	cs := clusterA.Client
	ctx := context.Background()
	cfg := writeConfig(t, routesConfig)
	expect(t, e.kiln("create", "kube", name, "--context", kctx, "-c", cfg), 0)
	kp := func(args ...string) result {
		return e.kiln(append([]string{"project", args[0], "kube", name}, append(args[1:], "--context", kctx, "-o", "json")...)...)
	}
	expect(t, kp("create", "default/blog", "--stack", "web"), 0)
	expect(t, kp("create", "default/shop", "--stack", "web"), 0)
	expect(t, kp("suspend", "default/shop"), 0)
	const host = "blog.default.routes.example.test"
	checkRoute(t, cs, "default", "blog", host, "nginx")
	if _, err := cs.NetworkingV1().Ingresses("kiln-system").Get(ctx, "default.shop", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a suspended project has a route: %v", err)
	}

	t.Run("upgrade plans and moves the route", func(t *testing.T) {
		previousRoute(t, cs, name, "default", "blog", host)
		p := kp("inspect", "default/blog")
		expect(t, p, 0)
		if ev := projectEvent(t, p); ev["state"] != "degraded" || !strings.Contains(reasons(ev), "route missing") {
			t.Errorf("inspect on the previous kiln's platform = %v", ev)
		}
		r := e.kiln("upgrade", "kube", name, "--context", kctx, "--dry-run", "-o", "json")
		expect(t, r, 0)
		plan := plans(t, r)
		create, del := plan["create Ingress kiln-system/default.blog"], plan["delete Ingress kiln-tenant-default/blog"]
		if create == nil || del == nil {
			t.Fatalf("plan lacks the route's move; plan: %v", plan)
		}
		if msg, _ := create["message"].(string); !strings.Contains(msg, "kiln-gateway") || !strings.Contains(msg, "bypassing the gateway") {
			t.Errorf("create message %q should say why", msg)
		}
		if msg, _ := del["message"].(string); !strings.Contains(msg, "kiln-system/default.blog") {
			t.Errorf("delete message %q should say where the route went", msg)
		}
		if len(plan) != 2 {
			t.Errorf("plan has %d changes, want the 2 of the route: %v", len(plan), plan)
		}

		rw := watchRoutes(t, cs, "blog")
		expect(t, e.kiln("upgrade", "kube", name, "--context", kctx, "--yes", "-o", "json"), 0)
		added := rw.seen(t, "ADDED", "kiln-system/default.blog")
		deleted := rw.seen(t, "DELETED", "kiln-tenant-default/blog")
		if added >= deleted {
			t.Errorf("the old route went (rv %d) before the new one was made (rv %d)", deleted, added)
		}
		rw.check(t)
		checkRoute(t, cs, "default", "blog", host, "nginx")
		p = kp("inspect", "default/blog")
		expect(t, p, 0)
		if ev := projectEvent(t, p); ev["state"] != "running" {
			t.Errorf("after upgrade: %v", ev)
		}
		// Converged: a second plan is empty.
		r = e.kiln("upgrade", "kube", name, "--context", kctx, "--dry-run", "-o", "json")
		expect(t, r, 0)
		if plan := plans(t, r); len(plan) != 0 {
			t.Errorf("plan after the move: %v", plan)
		}
	})

	t.Run("create --continue moves the route too", func(t *testing.T) {
		previousRoute(t, cs, name, "default", "blog", host)
		rw := watchRoutes(t, cs, "blog")
		expect(t, e.kiln("create", "kube", name, "--context", kctx, "-c", cfg, "--continue", "-o", "json"), 0)
		added := rw.seen(t, "ADDED", "kiln-system/default.blog")
		deleted := rw.seen(t, "DELETED", "kiln-tenant-default/blog")
		if added >= deleted {
			t.Errorf("the old route went (rv %d) before the new one was made (rv %d)", deleted, added)
		}
		rw.check(t)
		checkRoute(t, cs, "default", "blog", host, "nginx")
	})

	t.Run("no Ingress in a tenant namespace", func(t *testing.T) {
		l, err := cs.NetworkingV1().Ingresses("kiln-tenant-default").List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) != 0 {
			t.Errorf("Ingresses in kiln-tenant-default: %v (%v)", l, err)
		}
	})
}

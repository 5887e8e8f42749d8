package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kilnctl/kiln/engine/lock"
)

const projectConfig = `apiVersion: kiln.dev/v1alpha1
kind: ClusterConfig
spec:
  tenants: [default, staging]
  domain: proj.example.test
  stacks:
    - {name: web, image: "nginx:1.27-alpine", port: 80, cpu: 50m, memory: 64Mi}
    - {name: api, image: "ghcr.io/example/api:v1.4.2", port: 8080, cpu: 100m, memory: 128Mi}
`

// apiEvent is one watch event as the API server reported it. rv is the
// object's resourceVersion in the event: etcd's revision, which orders
// writes across every resource type of the cluster.
type apiEvent struct {
	typ, kind, name string
	rv              int64
	ready           bool // Deployment: an available replica; EndpointSlice: a ready endpoint
}

// recorder watches a namespace's project objects from the API server's side.
type recorder struct {
	mu  sync.Mutex
	evs []apiEvent
}

func record(t *testing.T, cs kubernetes.Interface, ns string) *recorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	rec := &recorder{}
	type lw struct {
		kind  string
		list  func(context.Context, metav1.ListOptions) (runtime.Object, error)
		watch func(context.Context, metav1.ListOptions) (watch.Interface, error)
	}
	c := cs.CoreV1()
	srcs := []lw{
		{"Secret", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.Secrets(ns).List(ctx, o)
		}, c.Secrets(ns).Watch},
		{"ConfigMap", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.ConfigMaps(ns).List(ctx, o)
		}, c.ConfigMaps(ns).Watch},
		{"Deployment", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return cs.AppsV1().Deployments(ns).List(ctx, o)
		}, cs.AppsV1().Deployments(ns).Watch},
		{"Service", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.Services(ns).List(ctx, o)
		}, c.Services(ns).Watch},
		{"EndpointSlice", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return cs.DiscoveryV1().EndpointSlices(ns).List(ctx, o)
		}, cs.DiscoveryV1().EndpointSlices(ns).Watch},
		// The project's route lives in kiln-system (Ingress T.P); an
		// Ingress in the tenant namespace is recorded as TenantIngress,
		// which kiln must never make.
		{"Ingress", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return cs.NetworkingV1().Ingresses("kiln-system").List(ctx, o)
		}, cs.NetworkingV1().Ingresses("kiln-system").Watch},
		{"TenantIngress", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return cs.NetworkingV1().Ingresses(ns).List(ctx, o)
		}, cs.NetworkingV1().Ingresses(ns).Watch},
	}
	for _, s := range srcs {
		list, err := s.list(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		lm, _ := meta.ListAccessor(list)
		w, err := s.watch(ctx, metav1.ListOptions{ResourceVersion: lm.GetResourceVersion()})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer w.Stop()
			for ev := range w.ResultChan() {
				m, err := meta.Accessor(ev.Object)
				if err != nil {
					continue
				}
				rv, _ := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
				a := apiEvent{typ: string(ev.Type), kind: s.kind, name: m.GetName(), rv: rv}
				switch o := ev.Object.(type) {
				case *appsv1.Deployment:
					a.ready = o.Status.AvailableReplicas > 0
				case *discoveryv1.EndpointSlice:
					a.name = o.Labels[discoveryv1.LabelServiceName]
					for _, e := range o.Endpoints {
						if e.Conditions.Ready == nil || *e.Conditions.Ready {
							a.ready = true
						}
					}
				}
				rec.mu.Lock()
				rec.evs = append(rec.evs, a)
				rec.mu.Unlock()
			}
		}()
	}
	return rec
}

// first waits for the first event matching and returns its revision.
// An empty typ matches any event type.
func (r *recorder) first(t *testing.T, typ, kind, name string, ready bool) int64 {
	t.Helper()
	return r.after(t, 0, typ, kind, name, ready)
}

// after is first, counting only events after revision floor.
func (r *recorder) after(t *testing.T, floor int64, typ, kind, name string, ready bool) int64 {
	t.Helper()
	var rv int64
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, e := range r.evs {
			if e.rv > floor && (typ == "" || e.typ == typ) && e.kind == kind && e.name == name && (!ready || e.ready) {
				rv = e.rv
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s %s %s (ready=%v) event seen by the watch", typ, kind, name, ready)
	}
	return rv
}

// count is how many events of kind r saw.
func (r *recorder) count(kind string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.evs {
		if e.kind == kind {
			n++
		}
	}
	return n
}

// checkRoute checks project T/P's route: Ingress kiln-system/T.P with
// kiln's labels, host, path / Prefix, backend kiln-gateway:80, the given
// class ("" for none) and its upstream; and no Ingress P in the tenant
// namespace.
func checkRoute(t *testing.T, cs kubernetes.Interface, tenant, project, host, class string) {
	t.Helper()
	ctx := context.Background()
	ing, err := cs.NetworkingV1().Ingresses("kiln-system").Get(ctx, tenant+"."+project, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("route kiln-system/%s.%s: %v", tenant, project, err)
	}
	if ing.Labels["kiln.dev/tenant"] != tenant || ing.Labels["kiln.dev/project"] != project || ing.Labels["app.kubernetes.io/managed-by"] != "kiln" || ing.Labels["kiln.dev/cluster"] == "" {
		t.Errorf("route labels %v", ing.Labels)
	}
	if got := ing.Annotations["kiln.dev/upstream"]; got != "kiln-tenant-"+tenant+"/"+project {
		t.Errorf("route upstream %q", got)
	}
	gotClass := ""
	if ing.Spec.IngressClassName != nil {
		gotClass = *ing.Spec.IngressClassName
	}
	if gotClass != class {
		t.Errorf("route ingressClassName %q, want %q", gotClass, class)
	}
	if len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].Host != host || ing.Spec.Rules[0].HTTP == nil || len(ing.Spec.Rules[0].HTTP.Paths) != 1 {
		t.Fatalf("route rules %+v, want one rule for %s", ing.Spec.Rules, host)
	}
	path := ing.Spec.Rules[0].HTTP.Paths[0]
	if path.Path != "/" || path.PathType == nil || *path.PathType != "Prefix" || path.Backend.Service == nil ||
		path.Backend.Service.Name != "kiln-gateway" || path.Backend.Service.Port.Number != 80 {
		t.Errorf("route path %+v, want / Prefix to kiln-gateway:80", path)
	}
	if _, err := cs.NetworkingV1().Ingresses("kiln-tenant-"+tenant).Get(ctx, project, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Ingress kiln-tenant-%s/%s: %v, want none in the tenant namespace", tenant, project, err)
	}
}

func (r *recorder) reset() {
	r.mu.Lock()
	r.evs = nil
	r.mu.Unlock()
}

func assertOrder(t *testing.T, what []string, rvs []int64) {
	t.Helper()
	for i := 1; i < len(rvs); i++ {
		if rvs[i-1] >= rvs[i] {
			t.Errorf("order from the API server: %s (rv %d) must come before %s (rv %d)", what[i-1], rvs[i-1], what[i], rvs[i])
		}
	}
}

// projectEvent returns the last project event of r.
func projectEvent(t *testing.T, r result) map[string]any {
	t.Helper()
	return r.last(t, "project")
}

func reasons(p map[string]any) string {
	var out []string
	for _, r := range p["reasons"].([]any) {
		out = append(out, r.(string))
	}
	return strings.Join(out, "; ")
}

// tokenState is what the Secret and the Deployment say about the token.
type tokenState struct {
	key, hash       string // the Secret's key in force and its token's hash
	keys            int
	depKey, depHash string // what the Deployment references
}

func readToken(t *testing.T, cs kubernetes.Interface, ns, p string) tokenState {
	t.Helper()
	ctx := context.Background()
	s, err := cs.CoreV1().Secrets(ns).Get(ctx, p+"-auth", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := tokenState{key: s.Annotations["kiln.dev/current-key"], keys: len(s.Data)}
	sum := sha256.Sum256(s.Data[st.key])
	st.hash = hex.EncodeToString(sum[:])
	if len(s.Data[st.key]) > 0 {
		outputsMu.Lock()
		secrets[string(s.Data[st.key])] = true // the output scan checks for it
		outputsMu.Unlock()
	}
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, p, metav1.GetOptions{})
	if err == nil {
		st.depHash = d.Spec.Template.Annotations["kiln.dev/token-sha256"]
		// The token is a file (a secret volume selecting the key in
		// force), never an environment variable.
		if len(d.Spec.Template.Spec.Containers[0].Env) != 0 {
			t.Errorf("deployment %s/%s has environment variables %v: the token must be a file only", ns, p, d.Spec.Template.Spec.Containers[0].Env)
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == "project-token" && v.Secret != nil && len(v.Secret.Items) == 1 {
				st.depKey = v.Secret.Items[0].Key
			}
		}
	}
	return st
}

func (s tokenState) inSync() bool { return s.keys == 1 && s.key == s.depKey && s.hash == s.depHash }

// nsObjects records the resourceVersion of every object of a namespace
// that a project operation could touch.
func nsObjects(t *testing.T, cs kubernetes.Interface, ns string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	add := func(kind string, list runtime.Object, err error) {
		if err != nil {
			t.Fatal(err)
		}
		items, _ := meta.ExtractList(list)
		for _, it := range items {
			m, _ := meta.Accessor(it)
			out[kind+"/"+m.GetName()] = m.GetResourceVersion()
		}
	}
	l1, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	add("cm", l1, err)
	l2, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	add("secret", l2, err)
	l3, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	add("deploy", l3, err)
	l4, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	add("svc", l4, err)
	l5, err := cs.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{})
	add("ing", l5, err)
	l6, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
	add("lease", l6, err)
	return out
}

func sameMap(t *testing.T, what string, a, b map[string]string) {
	t.Helper()
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("%s changed:\nbefore %v\nafter  %v", what, a, b)
	}
}

func TestProjectLifecycle(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "proj", "kiln-a")
	cfg := writeConfig(t, projectConfig)
	expect(t, e.kiln("create", "kube", "proj", "--context", "kiln-a", "-c", cfg), 0)
	cs := clusterA.Client
	ctx := context.Background()
	const ns, nsStaging = "kiln-tenant-default", "kiln-tenant-staging"
	kp := func(args ...string) result {
		return e.kiln(append([]string{"project", args[0], "kube", "proj"}, append(args[1:], "--context", "kiln-a", "-o", "json")...)...)
	}
	inspect := func(ref string) map[string]any {
		t.Helper()
		r := kp("inspect", ref)
		expect(t, r, 0)
		return projectEvent(t, r)
	}
	rec := record(t, cs, ns)

	t.Run("create provisions in order, each verified", func(t *testing.T) {
		r := kp("create", "default/blog", "--stack", "web")
		expect(t, r, 0)
		if res := r.last(t, "result"); !strings.Contains(res["message"].(string), "blog.default.proj.example.test") {
			t.Errorf("result = %v", res)
		}
		added := rec.first(t, "ADDED", "Deployment", "blog", false)
		svc := rec.first(t, "ADDED", "Service", "blog", false)
		rvs := []int64{
			rec.first(t, "ADDED", "ConfigMap", "kiln-project-blog", false),
			rec.first(t, "ADDED", "Secret", "blog-auth", false),
			added,
			rec.after(t, added, "MODIFIED", "Deployment", "blog", true),
			svc,
			rec.after(t, svc, "", "EndpointSlice", "blog", true),
			rec.first(t, "ADDED", "Ingress", "default.blog", false),
		}
		assertOrder(t, []string{"spec ConfigMap added", "Secret added", "Deployment added", "Deployment available", "Service added", "ready endpoint", "Ingress added"}, rvs)
		p := inspect("default/blog")
		if p["state"] != "running" || p["desired"] != "running" || p["stack"] != "web" {
			t.Errorf("inspect = %v", p)
		}
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "blog", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Spec.Template.Labels["kiln.dev/project"] != "blog" || d.Labels["kiln.dev/project"] != "blog" {
			t.Errorf("deployment labels %v, pod template labels %v", d.Labels, d.Spec.Template.Labels)
		}
		if !readToken(t, cs, ns, "blog").inSync() {
			t.Errorf("token not in sync: %+v", readToken(t, cs, ns, "blog"))
		}
		checkRoute(t, cs, "default", "blog", "blog.default.proj.example.test", "")
		if n := rec.count("TenantIngress"); n != 0 {
			t.Errorf("%d Ingress events in %s: kiln must make no Ingress in a tenant namespace", n, ns)
		}
	})

	t.Run("same project name in two tenants touches only its own namespace", func(t *testing.T) {
		before := nsObjects(t, cs, ns)
		expect(t, kp("create", "staging/blog"), 0)
		sameMap(t, ns, before, nsObjects(t, cs, ns))
		if p := inspect("staging/blog"); p["state"] != "running" || p["namespace"] != nsStaging {
			t.Errorf("staging/blog = %v", p)
		}
		before = nsObjects(t, cs, nsStaging)
		expect(t, kp("suspend", "default/blog"), 0)
		sameMap(t, nsStaging, before, nsObjects(t, cs, nsStaging))
		expect(t, kp("delete", "staging/blog"), 0)
		for kind, rv := range nsObjects(t, cs, nsStaging) {
			if strings.Contains(kind, "blog") {
				t.Errorf("after delete, %s still exists (rv %s)", kind, rv)
			}
		}
		expect(t, kp("start", "default/blog"), 0)
	})

	t.Run("suspend removes ingress, service, deployment in order, verified", func(t *testing.T) {
		tok := readToken(t, cs, ns, "blog")
		rec.reset()
		expect(t, kp("suspend", "default/blog"), 0)
		rvs := []int64{
			rec.first(t, "DELETED", "Ingress", "default.blog", false),
			rec.first(t, "DELETED", "Service", "blog", false),
			rec.first(t, "DELETED", "Deployment", "blog", false),
		}
		assertOrder(t, []string{"Ingress deleted", "Service deleted", "Deployment deleted"}, rvs)
		if p := inspect("default/blog"); p["state"] != "suspended" || p["desired"] != "suspended" {
			t.Errorf("inspect = %v", p)
		}
		pods, _ := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "kiln.dev/project=blog"})
		if len(pods.Items) != 0 {
			t.Errorf("%d pods left after suspend", len(pods.Items))
		}
		rec.reset()
		expect(t, kp("start", "default/blog"), 0)
		added := rec.first(t, "ADDED", "Deployment", "blog", false)
		svc := rec.first(t, "ADDED", "Service", "blog", false)
		rvs = []int64{
			added,
			rec.after(t, added, "MODIFIED", "Deployment", "blog", true),
			svc,
			rec.after(t, svc, "", "EndpointSlice", "blog", true),
			rec.first(t, "ADDED", "Ingress", "default.blog", false),
		}
		assertOrder(t, []string{"Deployment added", "Deployment available", "Service added", "ready endpoint", "Ingress added"}, rvs)
		after := readToken(t, cs, ns, "blog")
		if after.hash != tok.hash || !after.inSync() {
			t.Errorf("start changed or desynced the token: before %+v after %+v", tok, after)
		}
	})

	t.Run("restack", func(t *testing.T) {
		tok := readToken(t, cs, ns, "blog")
		rec.reset()
		expect(t, kp("restack", "default/blog", "--stack", "api"), 0)
		added := rec.first(t, "ADDED", "Deployment", "blog", false)
		rvs := []int64{
			rec.first(t, "DELETED", "Ingress", "default.blog", false),
			rec.first(t, "DELETED", "Service", "blog", false),
			rec.first(t, "DELETED", "Deployment", "blog", false),
			added,
			rec.after(t, added, "MODIFIED", "Deployment", "blog", true),
			rec.first(t, "ADDED", "Service", "blog", false),
			rec.first(t, "ADDED", "Ingress", "default.blog", false),
		}
		assertOrder(t, []string{"Ingress deleted", "Service deleted", "Deployment deleted", "Deployment added", "Deployment available", "Service added", "Ingress added"}, rvs)
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "blog", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := d.Spec.Template.Spec.Containers[0]
		if c.Image != "ghcr.io/example/api:v1.4.2" || c.Ports[0].ContainerPort != 8080 || !c.Resources.Requests.Cpu().Equal(resource.MustParse("100m")) {
			t.Errorf("container after restack: %+v", c)
		}
		if p := inspect("default/blog"); p["state"] != "running" || p["stack"] != "api" {
			t.Errorf("inspect = %v", p)
		}
		if after := readToken(t, cs, ns, "blog"); after.hash != tok.hash {
			t.Errorf("restack changed the token")
		}
		// Text mode: a report on stdout.
		r := e.kiln("project", "inspect", "kube", "proj", "default/blog", "--context", "kiln-a")
		expect(t, r, 0)
		for _, want := range []string{"State     running (desired running)", "Stack     api", "Deployment  blog", "Ingress     kiln-system/default.blog"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("text inspect lacks %q:\n%s", want, r.stdout)
			}
		}
	})

	t.Run("bad input changes nothing", func(t *testing.T) {
		before := nsObjects(t, cs, ns)
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"create", "default/other", "--stack", "nope"}, `--stack "nope"`},
			{[]string{"restack", "default/blog", "--stack", "nope"}, `--stack "nope"`},
			{[]string{"create", "default/Bad_Name"}, "Bad_Name"},
			{[]string{"create", "nobody/blog"}, `tenant "nobody"`},
			{[]string{"start", "default/ghost"}, "ghost"},
			{[]string{"suspend", "default/ghost"}, "ghost"},
			{[]string{"delete", "default/ghost"}, "ghost"},
			{[]string{"inspect", "default/ghost"}, "ghost"},
			{[]string{"rotate-token", "default/ghost"}, "ghost"},
			{[]string{"create", "default/blog", "--stack", "web"}, "restack"},
		} {
			r := kp(c.args...)
			expect(t, r, 2)
			if msg := r.last(t, "result")["message"].(string); !strings.Contains(msg, c.want) {
				t.Errorf("%v: message %q does not name %q", c.args, msg, c.want)
			}
		}
		sameMap(t, ns, before, nsObjects(t, cs, ns))
	})

	t.Run("repair heals only what is missing", func(t *testing.T) {
		tok := readToken(t, cs, ns, "blog")
		dep, err := cs.AppsV1().Deployments(ns).Get(ctx, "blog", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.NetworkingV1().Ingresses("kiln-system").Delete(ctx, "default.blog", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cs.CoreV1().Services(ns).Delete(ctx, "blog", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		p := inspect("default/blog")
		if p["state"] != "degraded" || !strings.Contains(reasons(p), "route missing") || !strings.Contains(reasons(p), "service missing") {
			t.Fatalf("inspect after deleting the route and service = %v", p)
		}
		r := e.kiln("status", "kube", "proj", "--context", "kiln-a", "--repair", "-o", "json")
		expect(t, r, 0)
		if p := r.last(t, "project"); p["project"] != "blog" || p["state"] != "running" {
			t.Errorf("status --repair reports %v", p)
		}
		if p := inspect("default/blog"); p["state"] != "running" {
			t.Errorf("after repair: %v", p)
		}
		after, err := cs.AppsV1().Deployments(ns).Get(ctx, "blog", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if after.ResourceVersion != dep.ResourceVersion {
			t.Errorf("repair rewrote the healthy Deployment: rv %s -> %s", dep.ResourceVersion, after.ResourceVersion)
		}
		if now := readToken(t, cs, ns, "blog"); now != tok {
			t.Errorf("repair touched the token: %+v -> %+v", tok, now)
		}
		checkRoute(t, cs, "default", "blog", "blog.default.proj.example.test", "")
		// Nothing missing: a second repair writes nothing at all.
		before := nsObjects(t, cs, ns)
		route, err := cs.NetworkingV1().Ingresses("kiln-system").Get(ctx, "default.blog", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		expect(t, e.kiln("status", "kube", "proj", "--context", "kiln-a", "--repair", "-o", "json"), 0)
		sameMap(t, ns, before, nsObjects(t, cs, ns))
		if again, err := cs.NetworkingV1().Ingresses("kiln-system").Get(ctx, "default.blog", metav1.GetOptions{}); err != nil || again.ResourceVersion != route.ResourceVersion {
			t.Errorf("a repair with nothing missing rewrote the route: %v", err)
		}

		// A route pointed past the gateway, straight at the project, is
		// drift: degraded with the reason, and repair puts it back.
		route.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "blog"
		if _, err := cs.NetworkingV1().Ingresses("kiln-system").Update(ctx, route, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if p := inspect("default/blog"); p["state"] != "degraded" || !strings.Contains(reasons(p), "route drifted: backend svc/blog is not kiln-gateway") {
			t.Errorf("inspect with a drifted route = %v", p)
		}
		expect(t, e.kiln("status", "kube", "proj", "--context", "kiln-a", "--repair", "-o", "json"), 0)
		checkRoute(t, cs, "default", "blog", "blog.default.proj.example.test", "")
		if p := inspect("default/blog"); p["state"] != "running" {
			t.Errorf("after repairing the drifted route: %v", p)
		}
	})

	t.Run("token rotation", func(t *testing.T) {
		old := readToken(t, cs, ns, "blog")
		expect(t, kp("rotate-token", "default/blog"), 0)
		now := readToken(t, cs, ns, "blog")
		if now.hash == old.hash || now.key == old.key || !now.inSync() {
			t.Errorf("after rotation: old %+v new %+v", old, now)
		}
		if p := inspect("default/blog"); p["state"] != "running" {
			t.Errorf("inspect = %v", p)
		}
	})

	t.Run("failed rotation keeps the old token referenced", func(t *testing.T) {
		old := readToken(t, cs, ns, "blog")
		depBefore, err := cs.AppsV1().Deployments(ns).Get(ctx, "blog", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// A quota of one pod: the rolling update cannot create its surge
		// pod, so the rollout with the new token never becomes ready.
		quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "one-pod"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}}}
		if _, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cs.CoreV1().ResourceQuotas(ns).Delete(ctx, "one-pod", metav1.DeleteOptions{}) }()
		err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "one-pod", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			used, ok := q.Status.Used[corev1.ResourcePods]
			return ok && used.Value() >= 1, nil
		})
		if err != nil {
			t.Fatalf("quota usage never computed: %v", err)
		}
		r := e.kiln("project", "rotate-token", "kube", "proj", "default/blog", "--context", "kiln-a", "-o", "json", "--timeout", "3s")
		expect(t, r, 5)
		if msg := r.last(t, "result")["message"].(string); !strings.Contains(msg, "old token") {
			t.Errorf("result message %q does not say the old token stays", msg)
		}
		now := readToken(t, cs, ns, "blog")
		if now != old {
			t.Errorf("after a failed rotation: before %+v after %+v", old, now)
		}
		dep, err := cs.AppsV1().Deployments(ns).Get(ctx, "blog", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if dep.Spec.Template.Annotations["kiln.dev/token-sha256"] != depBefore.Spec.Template.Annotations["kiln.dev/token-sha256"] {
			t.Errorf("deployment annotation not switched back")
		}
		if p := inspect("default/blog"); p["state"] != "running" {
			t.Errorf("inspect after failed rotation = %v", p)
		}
	})

	t.Run("kill -9 mid-operation, then run again", func(t *testing.T) {
		for _, c := range []struct{ op, at string }{
			{"suspend", "after-service"},
			{"start", "after-deployment"},
			{"rotate-token", "after-secret"},
			{"rotate-token", "after-rollout"},
			{"restack", "after-deployment"},
		} {
			args := []string{"project", c.op, "kube", "proj", "default/blog", "--context", "kiln-a", "-o", "json"}
			if c.op == "restack" {
				args = append(args, "--stack", "web")
			}
			r := e.kilnWith([]string{"KILN_TEST_CRASH_AT=" + c.at}, args...)
			if !r.killed {
				t.Fatalf("%s at %s: not killed: %s", c.op, c.at, r)
			}
			expect(t, e.kiln(args...), 0)
			p := inspect("default/blog")
			want := "running"
			if c.op == "suspend" {
				want = "suspended"
			}
			if p["state"] != want {
				t.Errorf("%s after kill at %s: %v", c.op, c.at, p)
			}
			if want == "running" && !readToken(t, cs, ns, "blog").inSync() {
				t.Errorf("%s after kill at %s: token %+v", c.op, c.at, readToken(t, cs, ns, "blog"))
			}
		}
	})

	t.Run("list", func(t *testing.T) {
		expect(t, kp("create", "staging/shop"), 0)
		r := kp("list")
		expect(t, r, 0)
		var got []string
		for _, ev := range r.events(t) {
			if ev["type"] == "project" {
				got = append(got, fmt.Sprintf("%s/%s:%s", ev["tenant"], ev["project"], ev["state"]))
			}
		}
		if strings.Join(got, ",") != "default/blog:running,staging/shop:running" {
			t.Errorf("list = %v", got)
		}
		r = kp("list", "--tenant", "staging")
		expect(t, r, 0)
		if n := strings.Count(r.stdout, `"type":"project"`); n != 1 {
			t.Errorf("list --tenant staging: %d projects", n)
		}
		expect(t, kp("suspend", "--all", "--concurrency", "2"), 0)
		for _, ref := range []string{"default/blog", "staging/shop"} {
			if p := inspect(ref); p["state"] != "suspended" {
				t.Errorf("after suspend --all: %v", p)
			}
		}
		expect(t, kp("start", "--all", "--tenant", "staging"), 0)
		if p := inspect("staging/shop"); p["state"] != "running" {
			t.Errorf("after start --all --tenant staging: %v", p)
		}
		if p := inspect("default/blog"); p["state"] != "suspended" {
			t.Errorf("start --all --tenant staging touched default/blog: %v", p)
		}
	})

	t.Run("start --all: ordered per project, a failed one named, the others started", func(t *testing.T) {
		expect(t, kp("suspend", "--all"), 0)
		// Another operation holds staging/shop's Lease for the whole batch.
		held, _, err := lock.Acquire(ctx, cs, lock.Options{Namespace: "kiln-tenant-staging", Name: "kiln-project-shop", Operation: "project restack staging/shop (another run)"})
		if err != nil {
			t.Fatal(err)
		}
		rec.reset()
		r := kp("start", "--all", "--concurrency", "4")
		if rerr := held.Release(ctx); rerr != nil {
			t.Fatal(rerr)
		}
		expect(t, r, 4)
		if !strings.Contains(r.stderr+r.stdout, "1 failed (staging/shop)") {
			t.Errorf("start --all does not name the failed project:\n%s", r)
		}
		summary := false
		for _, ev := range r.events(t) {
			if msg, _ := ev["message"].(string); ev["type"] == "log" && strings.HasPrefix(msg, "start --all: 1/2 running, 0 in progress, 1 failed") {
				summary = true
			}
		}
		if !summary {
			t.Errorf("no progress line in\n%s", r.stdout)
		}
		assertOrder(t, []string{"Deployment created", "Service created", "Ingress created"}, []int64{
			rec.first(t, "ADDED", "Deployment", "blog", false),
			rec.first(t, "ADDED", "Service", "blog", false),
			rec.first(t, "ADDED", "Ingress", "default.blog", false),
		})
		if p := inspect("default/blog"); p["state"] != "running" {
			t.Errorf("default/blog after start --all: %v", p)
		}
		if p := inspect("staging/shop"); p["state"] != "suspended" {
			t.Errorf("staging/shop (locked) after start --all: %v", p)
		}
		expect(t, kp("start", "--all"), 0)
		if p := inspect("staging/shop"); p["state"] != "running" {
			t.Errorf("staging/shop after the second start --all: %v", p)
		}
	})

	t.Run("delete removes everything, verified", func(t *testing.T) {
		expect(t, kp("start", "default/blog"), 0)
		rec.reset()
		expect(t, kp("delete", "default/blog"), 0)
		rvs := []int64{
			rec.first(t, "DELETED", "Ingress", "default.blog", false),
			rec.first(t, "DELETED", "Service", "blog", false),
			rec.first(t, "DELETED", "Deployment", "blog", false),
			rec.first(t, "DELETED", "Secret", "blog-auth", false),
			rec.first(t, "DELETED", "ConfigMap", "kiln-project-blog", false),
		}
		assertOrder(t, []string{"Ingress deleted", "Service deleted", "Deployment deleted", "Secret deleted", "spec ConfigMap deleted"}, rvs)
		for kind := range nsObjects(t, cs, ns) {
			if strings.Contains(kind, "blog") {
				t.Errorf("after delete: %s still exists", kind)
			}
		}
		if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "kiln-project-blog", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("spec ConfigMap: %v", err)
		}
		expect(t, kp("inspect", "default/blog"), 2)
	})
}

// TestProjectConcurrentOperations races 20 kiln processes on one project:
// each either gets the lease (exit 0) or is refused naming the holder
// (exit 4); the spec's revision counts exactly the accepted operations and
// the final state is the one the last accepted operation asked for.
func TestProjectConcurrentOperations(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "race", "kiln-b")
	expect(t, e.kiln("create", "kube", "race", "--context", "kiln-b"), 0)
	cs := clusterB.Client
	const ns = "kiln-tenant-default"
	expect(t, e.kiln("project", "create", "kube", "race", "default/app", "--context", "kiln-b"), 0)
	revision := func() (int64, string) {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), "kiln-project-app", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Revision int64  `json:"revision"`
			State    string `json:"state"`
		}
		if err := json.Unmarshal([]byte(cm.Data["spec.json"]), &s); err != nil {
			t.Fatal(err)
		}
		return s.Revision, s.State
	}
	rev0, _ := revision()
	type outcome struct {
		op  string
		r   result
		end time.Time
	}
	outs := make([]outcome, 20)
	var wg sync.WaitGroup
	for i := range outs {
		op := "start"
		if i%2 == 1 {
			op = "suspend"
		}
		wg.Go(func() {
			// Launches are spread over a few seconds (a schedule, not a
			// wait for state) so that some operations find the lease free
			// and run one after another, and others collide with them.
			time.Sleep(time.Duration(i) * 200 * time.Millisecond)
			r := e.kiln("project", op, "kube", "race", "default/app", "--context", "kiln-b", "-o", "json")
			outs[i] = outcome{op, r, time.Now()}
		})
	}
	wg.Wait()
	accepted := 0
	var last outcome
	for _, o := range outs {
		switch o.r.code {
		case 0:
			accepted++
			if o.end.After(last.end) {
				last = o
			}
		case 4:
			if msg := o.r.last(t, "result")["message"].(string); !strings.Contains(msg, "locked by kiln project") {
				t.Errorf("exit 4 does not name the holder: %q", msg)
			}
		default:
			t.Errorf("%s: want exit 0 or 4, got %s", o.op, o.r)
		}
	}
	if accepted < 2 {
		t.Fatalf("only %d operation accepted: the race did not exercise serialization", accepted)
	}
	rev, state := revision()
	if rev-rev0 != int64(accepted) {
		t.Errorf("spec revision went %d -> %d, but %d operations were accepted: an update was lost or a refused one wrote", rev0, rev, accepted)
	}
	want := map[string]string{"start": "running", "suspend": "suspended"}[last.op]
	if state != want {
		t.Errorf("desired state %s, last accepted operation was %s", state, last.op)
	}
	r := e.kiln("project", "inspect", "kube", "race", "default/app", "--context", "kiln-b", "-o", "json")
	expect(t, r, 0)
	if p := projectEvent(t, r); p["state"] != want {
		t.Errorf("observed %v, last accepted operation was %s", p, last.op)
	}
	t.Logf("%d of %d operations accepted; last %s", accepted, len(outs), last.op)
}

// While an operation holds a project's lease, another is refused with exit
// 4 naming the holder, and inspect shows the operation under way.
func TestProjectLeaseHeldDuringOperation(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "held", "kiln-b")
	expect(t, e.kiln("create", "kube", "held", "--context", "kiln-b"), 0)
	args := func(op string) []string {
		return []string{"project", op, "kube", "held", "default/app", "--context", "kiln-b", "-o", "json"}
	}
	expect(t, e.kiln(args("create")...), 0)
	p := e.startPaused("after-ingress", args("suspend")...)
	r := e.kiln(args("start")...)
	expect(t, r, 4)
	if msg := r.last(t, "result")["message"].(string); !strings.Contains(msg, "kiln-tenant-default/kiln-project-app is locked by kiln project suspend default/app") {
		t.Errorf("exit 4 message %q does not name the holder", msg)
	}
	r = e.kiln(args("inspect")...)
	expect(t, r, 0)
	if ev := projectEvent(t, r); ev["state"] != "suspending" || !strings.Contains(fmt.Sprint(ev["operation"]), "suspend default/app") || !strings.Contains(reasons(ev), "service, deployment") {
		t.Errorf("inspect while suspend holds the lease: %v", ev)
	}
	expect(t, p.resume(), 0)
	r = e.kiln(args("inspect")...)
	expect(t, r, 0)
	if ev := projectEvent(t, r); ev["state"] != "suspended" {
		t.Errorf("after suspend: %v", ev)
	}
}

// projectLeftovers lists every object of project p left in namespace ns:
// the spec ConfigMap, Secret, Deployment, Service, Ingress and Lease.
func projectLeftovers(t *testing.T, cs kubernetes.Interface, ns, p string) []string {
	t.Helper()
	var left []string
	for kind := range nsObjects(t, cs, ns) {
		name := kind[strings.Index(kind, "/")+1:]
		if name == p || name == p+"-auth" || name == "kiln-project-"+p {
			left = append(left, kind)
		}
	}
	return left
}

// TestProjectDeleteKilled kills kiln -9 at each checkpoint inside project
// delete; running delete again must remove everything, the spec ConfigMap
// and the Lease included.
func TestProjectDeleteKilled(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "pdel", "kiln-b")
	expect(t, e.kiln("create", "kube", "pdel", "--context", "kiln-b"), 0)
	cs := clusterB.Client
	const ns = "kiln-tenant-default"
	args := func(op string) []string {
		return []string{"project", op, "kube", "pdel", "default/doomed", "--context", "kiln-b", "-o", "json"}
	}
	// Checkpoints are after each phase of delete: lock, ingress, service,
	// deployment, secret, spec (the Lease is removed last).
	for _, at := range []string{"after-lock", "after-service", "after-deployment", "after-secret", "after-spec"} {
		t.Run(at, func(t *testing.T) {
			expect(t, e.kiln(args("create")...), 0)
			r := e.kilnWith([]string{"KILN_TEST_CRASH_AT=" + at}, args("delete")...)
			if !r.killed {
				t.Fatalf("delete at %s: not killed: %s", at, r)
			}
			if len(projectLeftovers(t, cs, ns, "doomed")) == 0 {
				t.Fatalf("killed at %s, yet nothing was left over: the crash did not hit mid-delete", at)
			}
			r = e.kiln(args("delete")...)
			expect(t, r, 0)
			if left := projectLeftovers(t, cs, ns, "doomed"); len(left) > 0 {
				t.Errorf("after delete killed at %s and run again, still present: %v", at, left)
			}
			if _, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), "kiln-project-doomed", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("spec ConfigMap after delete: %v", err)
			}
			expect(t, e.kiln(args("inspect")...), 2)
		})
	}
}

// TestProjectStartInterrupted sends SIGINT to project start between two
// phases: exit 130, the Lease released (holder cleared, the next operation
// proceeds), and start run again converges to running, token in sync.
func TestProjectStartInterrupted(t *testing.T) {
	skipShort(t)
	e := newEnv(t)
	cleanup(t, e, "pint", "kiln-b")
	expect(t, e.kiln("create", "kube", "pint", "--context", "kiln-b"), 0)
	cs := clusterB.Client
	ctx := context.Background()
	const ns = "kiln-tenant-default"
	args := func(op string) []string {
		return []string{"project", op, "kube", "pint", "default/app", "--context", "kiln-b", "-o", "json"}
	}
	expect(t, e.kiln(args("create")...), 0)
	tok := readToken(t, cs, ns, "app")
	expect(t, e.kiln(args("suspend")...), 0)

	// Held after the Deployment phase: the Deployment is rolled out, the
	// Service and Ingress are not there yet.
	p := e.startPaused("after-deployment", args("start")...)
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// The signal cancels kiln's context asynchronously; give it a moment
	// before the pause hook lets the process go on.
	time.Sleep(300 * time.Millisecond)
	r := p.resume()
	expect(t, r, 130)
	if res := r.last(t, "result"); res["exit_code"] != float64(130) {
		t.Errorf("result event = %v", res)
	}
	if _, err := cs.CoreV1().Services(ns).Get(ctx, "app", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("interrupted before the service phase, yet the Service exists (err %v)", err)
	}
	l, err := cs.CoordinationV1().Leases(ns).Get(ctx, "kiln-project-app", metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		t.Fatal(err)
	case l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "":
		t.Errorf("lease still held after the interrupt: holder %q", *l.Spec.HolderIdentity)
	}
	r = e.kiln(args("inspect")...)
	expect(t, r, 0)
	if ev := projectEvent(t, r); ev["operation"] != nil && ev["operation"] != "" {
		t.Errorf("inspect after the interrupt still shows an operation: %v", ev)
	}

	// The next operation proceeds (not exit 4) and converges.
	expect(t, e.kiln(args("start")...), 0)
	r = e.kiln(args("inspect")...)
	expect(t, r, 0)
	if ev := projectEvent(t, r); ev["state"] != "running" {
		t.Errorf("after start run again: %v", ev)
	}
	now := readToken(t, cs, ns, "app")
	if !now.inSync() || now.hash != tok.hash {
		t.Errorf("token after interrupt and rerun: before %+v after %+v", tok, now)
	}
}

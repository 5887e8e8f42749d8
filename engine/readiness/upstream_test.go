package readiness

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A route (an Ingress to a gateway, naming the Service the gateway
// forwards to in AnnotationUpstream) is ready only when the gateway and
// the upstream are: a ready gateway in front of a dead project is not a
// ready route. Per-object watches and a Shared agree, and both wait for
// the upstream in its own namespace.
func TestRouteWaitsForUpstream(t *testing.T) {
	ctx := testCtx(t)
	gw, app := cluster.Namespace(t), cluster.Namespace(t)
	cs := cluster.Client
	must[*corev1.Service](t)(cs.CoreV1().Services(gw).Create(ctx, service(gw, "gateway", "gateway"), metav1.CreateOptions{}))
	must[*appsv1.Deployment](t)(cs.AppsV1().Deployments(gw).Create(ctx, deployment(gw, "gateway", 1), metav1.CreateOptions{}))
	route := ingress(gw, "default.blog", "gateway")
	route.Labels = map[string]string{"kiln.dev/project": "blog"}
	route.Annotations = map[string]string{AnnotationUpstream: app + "/blog"}
	must[*networkingv1.Ingress](t)(cs.NetworkingV1().Ingresses(gw).Create(ctx, route, metav1.CreateOptions{}))
	// A second route, which the Shared's selector leaves out.
	other := ingress(gw, "unlabelled", "gateway")
	must[*networkingv1.Ingress](t)(cs.NetworkingV1().Ingresses(gw).Create(ctx, other, metav1.CreateOptions{}))
	ref := Ref{Kind: KindIngress, Namespace: gw, Name: "default.blog"}
	waitFor(t, ctx, Ref{Kind: KindService, Namespace: gw, Name: "gateway"}, Ready)

	upstream := "upstream svc/" + app + "/blog"
	if r := compute(t, ctx, ref); r != (Result{InProgress, upstream + " missing"}) {
		t.Errorf("upstream missing: %+v", r)
	}

	sh := NewShared(cs)
	sh.IngressSelector = "kiln.dev/project"
	defer sh.Close()
	rec, shRec := newRecorder(), newRecorder()
	plain := startUntil(ctx, &Watcher{Client: cs, OnChange: rec.onChange}, []Ref{ref}, Ready)
	shared := startUntil(ctx, &Watcher{Client: cs, OnChange: shRec.onChange, Shared: sh}, []Ref{ref}, Ready)
	missing := func(r Result) bool { return r.Message == upstream+" missing" }
	rec.waitSeen(t, ctx, missing, ref)
	shRec.waitSeen(t, ctx, missing, ref)

	must[*corev1.Service](t)(cs.CoreV1().Services(app).Create(ctx, service(app, "blog", "blog"), metav1.CreateOptions{}))
	noEndpoints := func(r Result) bool { return r.Message == upstream+" has no ready endpoints" }
	rec.waitSeen(t, ctx, noEndpoints, ref)
	shRec.waitSeen(t, ctx, noEndpoints, ref)
	for _, done := range []<-chan untilResult{plain, shared} {
		select {
		case r := <-done:
			t.Fatalf("the route was ready before its upstream had endpoints: %v, %v", r.res, r.err)
		default:
		}
	}

	must[*appsv1.Deployment](t)(cs.AppsV1().Deployments(app).Create(ctx, deployment(app, "blog", 1), metav1.CreateOptions{}))
	want := Result{Current, "1 backend ready, " + upstream + " ready"}
	for name, done := range map[string]<-chan untilResult{"per-object": plain, "shared": shared} {
		r := await(t, ctx, done)
		if r.err != nil || r.res[ref] != want {
			t.Errorf("%s wait: %+v, %v; want %+v", name, r.res[ref], r.err, want)
		}
	}
	if absent, ok := sh.Absent(ctx, Ref{Kind: KindIngress, Namespace: gw, Name: "unlabelled"}); !ok || !absent {
		t.Errorf("the Shared's Ingress informer holds an Ingress its selector leaves out (absent=%v, ok=%v)", absent, ok)
	}
	if seq := shRec.results(ref); !strings.Contains(seq[len(seq)-1].Message, "upstream") {
		t.Errorf("shared sequence %v", seq)
	}
}

// Upstream reads the annotation, refusing a malformed one.
func TestUpstream(t *testing.T) {
	for _, tt := range []struct {
		ann      string
		ns, name string
		ok       bool
	}{
		{"kiln-tenant-a/blog", "kiln-tenant-a", "blog", true},
		{"", "", "", false},
		{"blog", "", "", false},
		{"/blog", "", "", false},
		{"ns/", "", "", false},
	} {
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationUpstream: tt.ann}}}
		ns, name, ok := Upstream(ing)
		if ns != tt.ns || name != tt.name || ok != tt.ok {
			t.Errorf("Upstream(%q) = %q, %q, %v", tt.ann, ns, name, ok)
		}
	}
}

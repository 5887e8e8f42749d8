package readiness

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kilnctl/kiln/engine/failure"
)

// Waits fed by a Shared reach Ready and Gone as per-object watches do,
// with the same final results (confirmed from the API), report every
// change, and wait out a Terminating object.
func TestSharedReadyThenGone(t *testing.T) {
	ctx := testCtx(t)
	ns := cluster.Namespace(t)
	cs := cluster.Client
	sh := NewShared(cs)
	defer sh.Close()
	rec := newRecorder()
	w := &Watcher{Client: cs, OnChange: rec.onChange, Shared: sh}
	dep := Ref{Kind: KindDeployment, Namespace: ns, Name: "web"}
	svc := Ref{Kind: KindService, Namespace: ns, Name: "web"}
	ing := Ref{Kind: KindIngress, Namespace: ns, Name: "web"}
	cm := Ref{Kind: KindConfigMap, Namespace: ns, Name: "cfg"} // not a shared kind: followed alone
	// An Ingress whose backend has another name wakes on the namespace's
	// events, not only on its own name's.
	front := Ref{Kind: KindIngress, Namespace: ns, Name: "front"}

	if absent, ok := sh.Absent(ctx, dep); !ok || !absent {
		t.Fatalf("Absent(%s) before it exists = %v, %v", dep, absent, ok)
	}
	if _, ok := sh.Absent(ctx, cm); ok {
		t.Errorf("Absent answers for a ConfigMap, which no informer follows")
	}
	done := startUntil(ctx, w, []Ref{dep, svc, ing, cm, front}, Ready)
	rec.waitSeen(t, ctx, is(NotFound), dep, svc, ing, cm, front)
	must[*networkingv1.Ingress](t)(cs.NetworkingV1().Ingresses(ns).Create(ctx, ingress(ns, "front", "web"), metav1.CreateOptions{}))
	must[*corev1.ConfigMap](t)(cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}}, metav1.CreateOptions{}))
	must[*networkingv1.Ingress](t)(cs.NetworkingV1().Ingresses(ns).Create(ctx, ingress(ns, "web", "web"), metav1.CreateOptions{}))
	must[*corev1.Service](t)(cs.CoreV1().Services(ns).Create(ctx, service(ns, "web", "web"), metav1.CreateOptions{}))
	held := deployment(ns, "web", 1, func(d *appsv1.Deployment) { d.Finalizers = []string{testFinalizer} })
	must[*appsv1.Deployment](t)(cs.AppsV1().Deployments(ns).Create(ctx, held, metav1.CreateOptions{}))
	t.Cleanup(func() { dropFinalizer(t, cs, ns, "web") })

	r := await(t, ctx, done)
	if r.err != nil {
		t.Fatalf("Until Ready: %v", r.err)
	}
	for ref, want := range map[Ref]Result{
		dep: {Current, "1/1 replicas available"}, svc: {Current, "1 ready endpoint"},
		ing: {Current, "1 backend ready"}, cm: {Current, "exists"}, front: {Current, "1 backend ready"},
	} {
		if r.res[ref] != want {
			t.Errorf("%s: %+v, want %+v", ref, r.res[ref], want)
		}
		checkSequence(t, ref, rec.results(ref), want)
	}
	// The Ingress waited for its backend: it was reported not ready first.
	if seq := rec.results(ing); len(seq) < 3 || !strings.Contains(seq[1].Message, "backend svc/web") {
		t.Errorf("ingress sequence %v, want NotFound, waiting on backend svc/web, ..., Current", seq)
	}
	if absent, ok := sh.Absent(ctx, dep); !ok || absent {
		t.Errorf("Absent(%s) after it is ready = %v, %v", dep, absent, ok)
	}

	gone := startUntil(ctx, w, []Ref{ing, svc, dep}, Gone)
	for _, del := range []func() error{
		func() error { return cs.NetworkingV1().Ingresses(ns).Delete(ctx, "web", metav1.DeleteOptions{}) },
		func() error { return cs.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}) },
		func() error { return cs.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{}) },
	} {
		if err := del(); err != nil {
			t.Fatal(err)
		}
	}
	rec.waitSeen(t, ctx, is(Terminating), dep)
	select {
	case r := <-gone:
		t.Fatalf("Until Gone returned while the Deployment is Terminating: %v, %v", r.res, r.err)
	default:
	}
	dropFinalizer(t, cs, ns, "web")
	r = await(t, ctx, gone)
	if r.err != nil {
		t.Fatalf("Until Gone: %v", r.err)
	}
	for _, ref := range []Ref{ing, svc, dep} {
		if r.res[ref].Status != NotFound {
			t.Errorf("%s: %+v, want NotFound", ref, r.res[ref])
		}
		if absent, ok := sh.Absent(ctx, ref); !ok || !absent {
			t.Errorf("Absent(%s) once gone = %v, %v", ref, absent, ok)
		}
	}
}

// A Shared wait fails on a Failed object and, at its deadline, names what
// is pending, as per-object watches do.
func TestSharedFailedAndTimeout(t *testing.T) {
	ctx := testCtx(t)
	ns := cluster.Namespace(t)
	cs := cluster.Client
	sh := NewShared(cs)
	defer sh.Close()
	w := &Watcher{Client: cs, Shared: sh}

	doomed := Ref{Kind: KindDeployment, Namespace: ns, Name: "doomed"}
	d := deployment(ns, "doomed", 1, unschedulable, func(d *appsv1.Deployment) { d.Spec.ProgressDeadlineSeconds = ptr.To[int32](1) })
	must[*appsv1.Deployment](t)(cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}))
	res, err := w.Until(ctx, []Ref{doomed}, Ready)
	if failure.Of(err) != failure.Failed || err == nil || !strings.Contains(err.Error(), doomed.String()+" failed: Progress deadline exceeded") {
		t.Errorf("Until on a deployment past its deadline: kind %v: %v", failure.Of(err), err)
	}
	if res[doomed].Status != Failed {
		t.Errorf("result %+v, want Failed", res[doomed])
	}

	svc := Ref{Kind: KindService, Namespace: ns, Name: "lonely"}
	must[*corev1.Service](t)(cs.CoreV1().Services(ns).Create(ctx, service(ns, "lonely", "nobody"), metav1.CreateOptions{}))
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err = w.Until(wctx, []Ref{svc}, Ready)
	if failure.Of(err) != failure.Timeout || !strings.Contains(err.Error(), svc.String()+" (InProgress: no ready endpoints)") {
		t.Errorf("Until on a service without endpoints: kind %v: %v", failure.Of(err), err)
	}
}

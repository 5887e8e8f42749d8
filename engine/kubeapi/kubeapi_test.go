package kubeapi_test

import (
	"context"
	"flag"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kilnctl/kiln/engine/kubeapi"
	"github.com/kilnctl/kiln/internal/testenv/faultproxy"
	"github.com/kilnctl/kiln/internal/testenv/testcluster"
)

var cluster *testcluster.Cluster

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // the unit tests only; the others skip
	}
	os.Exit(testcluster.Main(m, testcluster.Options{}, &cluster))
}

// client reaches the real API server through a fault proxy that injects
// script, in order, then nothing; wrapped says whether kubeapi retries.
func client(t *testing.T, wrapped bool, script ...faultproxy.Kind) (kubernetes.Interface, *faultproxy.Proxy) {
	t.Helper()
	if cluster == nil {
		t.Skip("needs the control plane")
	}
	p, err := faultproxy.Start(faultproxy.Options{Upstream: cluster.RESTConfig, Script: script})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	rc := p.RESTConfig()
	if wrapped {
		kubeapi.Wrap(rc)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return cs, p
}

func namespace(t *testing.T) string {
	t.Helper()
	if cluster == nil {
		t.Skip("needs the control plane")
	}
	return cluster.Namespace(t)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// Every fault kind on the first request of each verb: with kubeapi the
// call succeeds; without it, it fails (so the test can tell).
func TestEveryVerbSurvivesEveryFault(t *testing.T) {
	for _, kind := range []faultproxy.Kind{faultproxy.InternalError, faultproxy.TooManyRequests, faultproxy.ResetBeforeRequest, faultproxy.AnswerLost} {
		t.Run(string(kind), func(t *testing.T) {
			ns := namespace(t)
			c := ctx(t)
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns}, Data: map[string]string{"k": "v"}}
			calls := []struct {
				verb string
				do   func(kubernetes.Interface) error
			}{
				{"create", func(cs kubernetes.Interface) error {
					_, err := cs.CoreV1().ConfigMaps(ns).Create(c, cm, metav1.CreateOptions{})
					return err
				}},
				{"get", func(cs kubernetes.Interface) error {
					_, err := cs.CoreV1().ConfigMaps(ns).Get(c, "x", metav1.GetOptions{})
					return err
				}},
				{"update", func(cs kubernetes.Interface) error {
					cur, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(c, "x", metav1.GetOptions{})
					if err != nil {
						return err
					}
					cur.Data["k"] = cur.Data["k"] + "+"
					_, err = cs.CoreV1().ConfigMaps(ns).Update(c, cur, metav1.UpdateOptions{})
					return err
				}},
				{"list", func(cs kubernetes.Interface) error {
					_, err := cs.CoreV1().ConfigMaps(ns).List(c, metav1.ListOptions{})
					return err
				}},
				{"delete", func(cs kubernetes.Interface) error {
					return cs.CoreV1().ConfigMaps(ns).Delete(c, "x", metav1.DeleteOptions{})
				}},
			}
			// Without kubeapi the same fault fails a create (client-go
			// itself retries a 429 that carries Retry-After, nothing else
			// of these): the fault is real.
			if kind != faultproxy.TooManyRequests {
				raw, _ := client(t, false, kind)
				ctl := cm.DeepCopy()
				ctl.Name = "control"
				if _, err := raw.CoreV1().ConfigMaps(ns).Create(c, ctl, metav1.CreateOptions{}); err == nil {
					t.Fatalf("a create without kubeapi survived a %s: the fault was not injected", kind)
				}
			}
			for _, call := range calls {
				cs, p := client(t, true, kind)
				if err := call.do(cs); err != nil {
					t.Fatalf("%s through one %s: %v", call.verb, kind, err)
				}
				if p.Counts()[kind] != 1 {
					t.Fatalf("%s: the proxy injected %s", call.verb, p)
				}
			}
			if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(c, "x", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("after the wrapped delete the object is still there: %v", err)
			}
		})
	}
}

// A create whose answer was lost finds its own object and succeeds; a
// create that finds someone else's different object still gets
// AlreadyExists.
func TestLostCreateAnswer(t *testing.T) {
	ns := namespace(t)
	c := ctx(t)
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "lock", Namespace: ns, Labels: map[string]string{"a": "b"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("me pid 1"), LeaseDurationSeconds: ptr.To(int32(15)),
			AcquireTime: &metav1.MicroTime{Time: time.Now()}, RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
	cs, p := client(t, true, faultproxy.AnswerLost)
	got, err := cs.CoordinationV1().Leases(ns).Create(c, lease, metav1.CreateOptions{FieldManager: "kiln"})
	if err != nil {
		t.Fatalf("create whose answer was lost: %v (%s)", err, p)
	}
	if got.Spec.HolderIdentity == nil || *got.Spec.HolderIdentity != "me pid 1" || got.ResourceVersion == "" {
		t.Fatalf("create answered %+v", got)
	}

	// Someone else's lease under the same name: a lost answer must not
	// make ours look created.
	other := lease.DeepCopy()
	other.Name = "taken"
	if _, err := cluster.Client.CoordinationV1().Leases(ns).Create(c, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mine := lease.DeepCopy()
	mine.Name = "taken"
	mine.Spec.HolderIdentity = ptr.To("me pid 2")
	cs, p = client(t, true, faultproxy.ResetBeforeRequest)
	_, err = cs.CoordinationV1().Leases(ns).Create(c, mine, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create over someone else's lease: %v, want AlreadyExists (%s)", err, p)
	}
}

// An update whose answer was lost meets a conflict with itself on the
// retry; it succeeds. An update that lost a real race still conflicts.
func TestLostUpdateAnswer(t *testing.T) {
	ns := namespace(t)
	c := ctx(t)
	cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Create(c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Data: map[string]string{"n": "1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	upd := cm.DeepCopy()
	upd.Data["n"] = "2"
	cs, p := client(t, true, faultproxy.AnswerLost)
	got, err := cs.CoreV1().ConfigMaps(ns).Update(c, upd, metav1.UpdateOptions{})
	if err != nil || got.Data["n"] != "2" {
		t.Fatalf("update whose answer was lost: %v %v (%s)", got, err, p)
	}

	// A stale update (someone wrote in between) keeps its conflict.
	stale := cm.DeepCopy()
	stale.Data["n"] = "3"
	cs, _ = client(t, true, faultproxy.ResetBeforeRequest)
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(c, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: %v, want a conflict", err)
	}
}

// A forbidden request fails at once, naming verb, resource and namespace.
func TestForbiddenFailsFastNamingThePermission(t *testing.T) {
	if cluster == nil {
		t.Skip("needs the control plane")
	}
	rc := rest.CopyConfig(cluster.RESTConfig)
	rc.Impersonate = rest.ImpersonationConfig{UserName: "nobody"}
	var tries int
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) { tries++; return rt.RoundTrip(r) })
	})
	kubeapi.Wrap(rc)
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoreV1().ConfigMaps("kiln-system").Get(ctx(t), "kiln-config", metav1.GetOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("want Forbidden, got %v", err)
	}
	for _, want := range []string{"get", "configmaps", "kiln-system"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("forbidden error %q does not name %q", err, want)
		}
	}
	if tries != 1 {
		t.Errorf("a 403 was sent %d times, want once", tries)
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

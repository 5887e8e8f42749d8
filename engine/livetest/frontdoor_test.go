package livetest

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/provider/kube"
	"github.com/kilnctl/kiln/internal/cli/ndjson"
)

// events records what an engine emitted.
type events struct {
	mu  sync.Mutex
	all []engine.Event
}

func (r *events) Emit(e engine.Event) { r.mu.Lock(); r.all = append(r.all, e); r.mu.Unlock() }

func (r *events) last(typ event.Type) *engine.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.all) - 1; i >= 0; i-- {
		if r.all[i].Type() == typ {
			e := r.all[i]
			return &e
		}
	}
	return nil
}

func (r *events) reset() { r.mu.Lock(); r.all = nil; r.mu.Unlock() }

func writeConfig(t *testing.T, name, gateway string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kiln.yaml")
	data := "apiVersion: kiln.dev/v1alpha1\nkind: ClusterConfig\nmetadata: {name: " + name + "}\nspec:\n  domain: " + name + ".example.test\n  gateway: " + gateway + "\n"
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func gatewayService(ctx context.Context, t *testing.T) *corev1.Service {
	t.Helper()
	s, err := cluster.Client.CoreV1().Services(platform.Namespace).Get(ctx, platform.GatewayName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFrontDoor: on a cluster without an IngressClass, create records
// expose nodePort and the gateway Service is a NodePort whose address
// status shows; upgrade moves it to none (ClusterIP, node port released),
// loadBalancer (wait says what it waits for and exits 5 without a
// load-balancer controller; an address published on the Service status is
// then shown with its DNS record), and back to ClusterIP from
// LoadBalancer. Then the isolation status follows the DaemonSets of the
// network plugin.
func TestFrontDoor(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const name = "door1"
	rec := &events{}
	e := &engine.Engine{Sink: rec}
	target := engine.Target{Provider: kube.New(cluster.KubeconfigPath, cluster.ContextName), Name: name, TokenDir: filepath.Join(t.TempDir(), "tokens")}
	if err := e.Create(ctx, engine.CreateRequest{Target: target, ConfigPath: writeConfig(t, name, "{replicas: 1}"), Timeout: 2 * time.Minute}); err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		// The package's other tests install their own platform.
		dctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := e.Destroy(dctx, engine.DestroyRequest{Target: target, Yes: true, Timeout: 2 * time.Minute}); err != nil {
			t.Errorf("destroy: %v", err)
		}
	})
	st, err := platform.Read(ctx, cluster.Client)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Config.Spec.Gateway.Expose; got != config.ExposeNodePort {
		t.Fatalf("kiln-config records expose %q, want nodePort (no default IngressClass)", got)
	}
	svc := gatewayService(ctx, t)
	if svc.Spec.Type != corev1.ServiceTypeNodePort || svc.Spec.Ports[0].NodePort == 0 {
		t.Fatalf("gateway Service type %s, node port %d; want NodePort with a port", svc.Spec.Type, svc.Spec.Ports[0].NodePort)
	}
	// A file without expose continues the platform: it matches the
	// recorded value.
	if err := e.Create(ctx, engine.CreateRequest{Target: target, ConfigPath: writeConfig(t, name, "{replicas: 1}"), Continue: true, Timeout: 2 * time.Minute}); err != nil {
		t.Fatalf("create --continue with expose left out: %v", err)
	}

	status := func() *engine.ClusterStatus {
		t.Helper()
		rec.reset()
		s, err := e.Status(ctx, engine.StatusRequest{Target: target})
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		if s.FrontDoor == nil || s.Isolation == nil {
			t.Fatalf("status without front door or isolation: %+v", s)
		}
		ev := rec.last(engine.TypeFrontDoor)
		if ev == nil || *ev.Payload.(*engine.FrontDoor) != *s.FrontDoor {
			t.Fatalf("frontdoor event %+v does not match the status %+v", ev, s.FrontDoor)
		}
		return s
	}
	s := status()
	port := svc.Spec.Ports[0].NodePort
	if fd := s.FrontDoor; fd.Mode != config.ExposeNodePort || !fd.Ready || !strings.HasSuffix(fd.Address, ":"+itoa(port)) || !strings.HasPrefix(fd.DNS, "*."+name+".example.test A ") {
		t.Fatalf("front door %+v, want nodePort at NODE-IP:%d with an A record", fd, port)
	}
	b, err := ndjson.Marshal(*rec.last(engine.TypeFrontDoor))
	if err != nil || !strings.Contains(string(b), `"type":"frontdoor"`) || !strings.Contains(string(b), `"mode":"nodePort"`) || !strings.Contains(string(b), `"dns_record":"*.door1.example.test A `) {
		t.Fatalf("frontdoor event JSON %s (%v)", b, err)
	}

	upgrade := func(gateway string) {
		t.Helper()
		rec.reset()
		if err := e.Upgrade(ctx, engine.UpgradeRequest{Target: target, ConfigPath: writeConfig(t, name, gateway), Yes: true, Timeout: 2 * time.Minute}); err != nil {
			t.Fatalf("upgrade to %s: %v", gateway, err)
		}
		planned := false
		for _, ev := range rec.all {
			if p, ok := ev.Payload.(event.PlanEvent); ok && p.Kind == "Service" && p.Name == platform.GatewayName {
				planned = true
			}
		}
		if !planned {
			t.Fatalf("upgrade to %s planned no change of Service %s", gateway, platform.GatewayName)
		}
	}

	upgrade("{expose: none}")
	svc = gatewayService(ctx, t)
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.Ports[0].NodePort != 0 {
		t.Fatalf("after expose none: type %s, node port %d; want ClusterIP without a node port", svc.Spec.Type, svc.Spec.Ports[0].NodePort)
	}
	if fd := status().FrontDoor; fd.Ready || !strings.Contains(fd.Message, " port-forward -n kiln-system svc/kiln-gateway 8080:80`") {
		t.Fatalf("front door with none: %+v", fd)
	}

	upgrade("{expose: loadBalancer}")
	if svc = gatewayService(ctx, t); svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		t.Fatalf("after expose loadBalancer: type %s", svc.Spec.Type)
	}
	if fd := status().FrontDoor; fd.Ready || !strings.Contains(fd.Message, "no load-balancer address yet") {
		t.Fatalf("front door without a load-balancer controller: %+v", fd)
	}
	// Nothing publishes an address here: wait ends with exit 5 naming it.
	rec.reset()
	err = e.Wait(ctx, engine.WaitRequest{Target: target, Timeout: 5 * time.Second})
	if failure.Of(err) != failure.Timeout || !strings.Contains(err.Error(), "load-balancer address on Service kiln-system/kiln-gateway") {
		t.Fatalf("wait without a load balancer: kind %v, %v; want timeout naming the address", failure.Of(err), err)
	}
	if !hasLog(rec, "waiting for a load-balancer address") {
		t.Fatalf("wait did not say what it waits for")
	}
	// A load-balancer controller publishes a hostname: wait returns and
	// status shows it with a CNAME record.
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "lb-1.elb.example.test"}}
	if _, err := cluster.Client.CoreV1().Services(platform.Namespace).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.reset()
	if err := e.Wait(ctx, engine.WaitRequest{Target: target, Timeout: 2 * time.Minute}); err != nil {
		t.Fatalf("wait with an address: %v", err)
	}
	if ev := rec.last(engine.TypeFrontDoor); ev == nil || ev.Payload.(*engine.FrontDoor).Address != "lb-1.elb.example.test" {
		t.Fatalf("wait's frontdoor event %+v", ev)
	}
	if fd := status().FrontDoor; !fd.Ready || fd.DNS != "*."+name+".example.test CNAME lb-1.elb.example.test" {
		t.Fatalf("front door with an address: %+v", fd)
	}

	// Back from LoadBalancer to ClusterIP with an ingress front door and a
	// class no IngressClass has: the reason shows.
	upgrade("{expose: ingress, ingressClassName: nope}")
	if !hasLog(rec, "spec.gateway.ingressClassName nope: the cluster has no IngressClass of that name") {
		t.Errorf("upgrade did not warn about the missing IngressClass")
	}
	svc = gatewayService(ctx, t)
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.Ports[0].NodePort != 0 {
		t.Fatalf("after expose ingress: type %s, node port %d; want ClusterIP", svc.Spec.Type, svc.Spec.Ports[0].NodePort)
	}
	if fd := status().FrontDoor; fd.Ready || !strings.Contains(fd.Message, "no IngressClass nope in the cluster") {
		t.Fatalf("front door with a missing class: %+v", fd)
	}

	t.Run("isolation", func(t *testing.T) {
		if iso := status().Isolation; iso.State != engine.IsolationUnknown {
			t.Fatalf("isolation without a network plugin: %+v, want unknown", iso)
		}
		flannel := daemonSet(ctx, t, "kube-system", "kube-flannel-ds", "app", "flannel")
		if iso := status().Isolation; iso.State != engine.IsolationNotEnforced || !strings.Contains(iso.Plugin, "flannel") {
			t.Fatalf("isolation with flannel: %+v, want not enforced naming flannel", iso)
		}
		calico := daemonSet(ctx, t, "kube-system", "calico-node", "k8s-app", "calico-node")
		if iso := status().Isolation; iso.State != engine.IsolationEnforced || !strings.Contains(iso.Plugin, "calico (DaemonSet kube-system/calico-node)") {
			t.Fatalf("isolation with calico: %+v, want enforced naming calico", iso)
		}
		for _, n := range []string{flannel, calico} {
			if err := cluster.Client.AppsV1().DaemonSets("kube-system").Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
				t.Error(err)
			}
		}
	})
}

func hasLog(r *events, sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.all {
		if l, ok := e.Payload.(event.LogEvent); ok && strings.Contains(l.Message, sub) {
			return true
		}
	}
	return false
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }

// daemonSet creates a DaemonSet that looks like a network plugin's (kwok
// runs its pods) and waits, watching, until one pod is ready.
func daemonSet(ctx context.Context, t *testing.T, ns, name, labelKey, labelValue string) string {
	t.Helper()
	l := map[string]string{labelKey: labelValue}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: l},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: l},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: "example.test/" + name + ":1"}}},
			},
		},
	}
	created, err := cluster.Client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cluster.Client.AppsV1().DaemonSets(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: created.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if d, ok := ev.Object.(*appsv1.DaemonSet); ok && d.Status.NumberReady > 0 {
			return name
		}
	}
	t.Fatalf("DaemonSet %s/%s: watch ended before a pod was ready", ns, name)
	return name
}

// TestFrontDoorDefaultIngressClassAndTLS: with a default IngressClass,
// kube's default front door is ingress; the address comes from the route
// Ingresses' status. spec.gateway.tls mounts the Secret and makes the
// gateway serve HTTPS; create warns while the Secret is missing.
func TestFrontDoorDefaultIngressClassAndTLS(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cs := cluster.Client
	class := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "door-nginx", Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}},
		Spec:       networkingv1.IngressClassSpec{Controller: "example.test/ingress"},
	}
	if _, err := cs.NetworkingV1().IngressClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.NetworkingV1().IngressClasses().Delete(context.Background(), class.Name, metav1.DeleteOptions{})
	})
	const name = "door2"
	rec := &events{}
	e := &engine.Engine{Sink: rec}
	target := engine.Target{Provider: kube.New(cluster.KubeconfigPath, cluster.ContextName), Name: name, TokenDir: filepath.Join(t.TempDir(), "tokens")}
	if err := e.Create(ctx, engine.CreateRequest{Target: target, ConfigPath: writeConfig(t, name, "{tls: {secretName: door2-tls}}"), Timeout: 2 * time.Minute}); err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := e.Destroy(dctx, engine.DestroyRequest{Target: target, Yes: true, Timeout: 2 * time.Minute}); err != nil {
			t.Errorf("destroy: %v", err)
		}
	})
	if !hasLog(rec, "spec.gateway.tls.secretName door2-tls: no such Secret in kiln-system") {
		t.Errorf("create did not warn about the missing TLS Secret")
	}
	if !hasLog(rec, "front door: spec.gateway.expose ingress (IngressClass door-nginx is the cluster's default)") {
		t.Errorf("create did not say why it chose ingress")
	}
	st, err := platform.Read(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	if g := st.Config.Spec.Gateway; g.Expose != config.ExposeIngress || g.TLSSecret() != "door2-tls" {
		t.Fatalf("kiln-config gateway %+v, want expose ingress and the TLS Secret", g)
	}
	svc := gatewayService(ctx, t)
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.Ports[0].AppProtocol == nil || *svc.Spec.Ports[0].AppProtocol != "https" {
		t.Fatalf("gateway Service %+v, want ClusterIP with appProtocol https", svc.Spec)
	}
	dep, err := cs.AppsV1().Deployments(platform.Namespace).Get(ctx, platform.GatewayName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var secretVolume bool
	for _, v := range dep.Spec.Template.Spec.Volumes {
		secretVolume = secretVolume || (v.Secret != nil && v.Secret.SecretName == "door2-tls")
	}
	if args := strings.Join(dep.Spec.Template.Spec.Containers[0].Args, " "); !secretVolume || !strings.Contains(args, "--tls-cert=/etc/kiln/tls/tls.crt") {
		t.Fatalf("gateway Deployment: Secret volume %v, args %s", secretVolume, args)
	}

	s, err := e.Status(ctx, engine.StatusRequest{Target: target})
	if err != nil {
		t.Fatal(err)
	}
	if fd := s.FrontDoor; fd.Mode != config.ExposeIngress || fd.Ready || !strings.Contains(fd.Message, "no project route yet") || !strings.Contains(fd.TLS, "at the gateway, with Secret kiln-system/door2-tls") {
		t.Fatalf("front door before any route: %+v", fd)
	}
	// An ingress controller publishes its address on a route Ingress.
	pt := networkingv1.PathTypePrefix
	route := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "default.web", Namespace: platform.Namespace},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "web.default." + name + ".example.test", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pt, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: platform.GatewayName, Port: networkingv1.ServiceBackendPort{Number: 80}}}}},
		}}}}},
	}
	route, err = cs.NetworkingV1().Ingresses(platform.Namespace).Create(ctx, route, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	route.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{Hostname: "ingress.example.test"}}
	if _, err := cs.NetworkingV1().Ingresses(platform.Namespace).UpdateStatus(ctx, route, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if s, err = e.Status(ctx, engine.StatusRequest{Target: target}); err != nil {
		t.Fatal(err)
	}
	if fd := s.FrontDoor; !fd.Ready || fd.Address != "ingress.example.test" || fd.DNS != "*."+name+".example.test CNAME ingress.example.test" || !strings.Contains(fd.Message, "class door-nginx") {
		t.Fatalf("front door with a route address: %+v", fd)
	}
}

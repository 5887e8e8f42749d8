package main

// Destroy of an aws cluster against kumo, with the cluster's API on the
// kiln-b control plane: load balancers deleted through the Kubernetes API
// first, kills at the new checkpoints, and token dirs of another region or
// account moved aside by a fresh create.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	awsprovider "github.com/kilnctl/kiln/engine/provider/aws"
	"github.com/kilnctl/kiln/internal/testenv/testhooks"
)

const (
	lbFinalizer  = "service.kubernetes.io/load-balancer-cleanup"
	ingFinalizer = "ingress.k8s.aws/resources"
)

// infraOnly runs a create of name up to the end of its infrastructure
// (no platform): destroy then removes infrastructure only.
func infraOnly(t *testing.T, e *env, name, region string) {
	t.Helper()
	r := e.kilnWith([]string{testhooks.CrashEnv + "=after-infrastructure"}, "create", "aws", name, "--region", region,
		"--regions", strings.Join(awsRegions, ","), "--headless")
	if !r.killed {
		t.Fatalf("create did not reach the end of the infrastructure phase:\n%s", r)
	}
}

// plantLB creates, on kiln-b (the emulated EKS cluster's API), a Service
// of type LoadBalancer and an Ingress, each holding its controller's
// finalizer as a cloud controller / the AWS Load Balancer Controller does
// until the load balancer is deleted.
func plantLB(t *testing.T, svc, ing string) {
	t.Helper()
	ctx := context.Background()
	cs := clusterB.Client
	if _, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svc, Finalizers: []string{lbFinalizer}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": svc},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ing == "" {
		return
	}
	if _, err := cs.NetworkingV1().Ingresses("default").Create(ctx, &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: ing, Finalizers: []string{ingFinalizer}},
		Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
			Name: svc, Port: networkingv1.ServiceBackendPort{Number: 80}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// releaseLB removes the finalizers, as the controller does once the load
// balancer is gone.
func releaseLB(t *testing.T, svc, ing string) {
	t.Helper()
	ctx := context.Background()
	cs := clusterB.Client
	if s, err := cs.CoreV1().Services("default").Get(ctx, svc, metav1.GetOptions{}); err == nil {
		s.Finalizers = nil
		if _, err := cs.CoreV1().Services("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	}
	if ing == "" {
		return
	}
	if i, err := cs.NetworkingV1().Ingresses("default").Get(ctx, ing, metav1.GetOptions{}); err == nil {
		i.Finalizers = nil
		if _, err := cs.NetworkingV1().Ingresses("default").Update(ctx, i, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	}
}

// fakeLBController removes an object's finalizer delay after its deletion
// began, until stop is closed.
func fakeLBController(t *testing.T, svc, ing string, delay time.Duration, stop <-chan struct{}) <-chan time.Time {
	released := make(chan time.Time, 1)
	go func() {
		ctx := context.Background()
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			s, err1 := clusterB.Client.CoreV1().Services("default").Get(ctx, svc, metav1.GetOptions{})
			i, err2 := clusterB.Client.NetworkingV1().Ingresses("default").Get(ctx, ing, metav1.GetOptions{})
			if err1 != nil || err2 != nil || s.DeletionTimestamp == nil || i.DeletionTimestamp == nil {
				continue
			}
			if time.Since(s.DeletionTimestamp.Time) < delay {
				continue
			}
			releaseLB(t, svc, ing)
			released <- time.Now()
			return
		}
	}()
	return released
}

// TestAWSDestroyWaitsForLoadBalancers: destroy deletes the LoadBalancer
// Services and Ingresses through the cluster's API before the node group
// and the EKS cluster and waits until their controllers have removed the
// finalizers (the load balancers are gone); a finalizer that is never
// removed fails the run within the bound, naming the object, and a rerun
// once it is removed finishes.
func TestAWSDestroyWaitsForLoadBalancers(t *testing.T) {
	e, emu := awsEnv(t)
	const region = "eu-west-1"
	t.Run("released", func(t *testing.T) {
		const name = "awslb"
		infraOnly(t, e, name, region)
		plantLB(t, "web", "app")
		t.Cleanup(func() { releaseLB(t, "web", "app") })
		stop := make(chan struct{})
		defer close(stop)
		released := fakeLBController(t, "web", "app", 3*time.Second, stop)
		r := e.aws("destroy", "aws", name, "--region", region, "--yes", "--headless", "-o", "json")
		expect(t, r, 0)
		var at time.Time
		select {
		case at = <-released:
		default:
			t.Fatalf("destroy finished before the load balancers were released:\n%s", r)
		}
		for _, want := range []string{"Service", "default/web", "Ingress", "default/app", "waiting for its load balancer to be deleted", "deleted, with its load balancer"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("no %q in the events:\n%s", want, r.stdout)
			}
		}
		// The EKS cluster was deleted after the release, not before.
		if i := strings.Index(r.stdout, `"kind":"EKSCluster"`); i < 0 || !strings.Contains(r.stdout[:i], "deleted, with its load balancer") {
			t.Errorf("the EKS cluster was deleted before the load balancers were gone (released %s):\n%s", at.Format(time.RFC3339Nano), r.stdout)
		}
		expectDestroyed(t, inventory(t, emu, name, region))
	})
	t.Run("stuck", func(t *testing.T) {
		const name = "awslbstuck"
		infraOnly(t, e, name, region)
		plantLB(t, "stuck", "")
		t.Cleanup(func() { releaseLB(t, "stuck", "") })
		start := time.Now()
		r := e.kilnWith([]string{awsprovider.LBWaitEnv + "=4s"}, "destroy", "aws", name, "--region", region, "--yes", "--headless",
			"--regions", strings.Join(awsRegions, ","))
		took := time.Since(start)
		if r.code == 0 {
			t.Fatalf("destroy finished with a load balancer left:\n%s", r)
		}
		if !strings.Contains(r.stdout+r.stderr, "Service default/stuck (finalizers "+lbFinalizer+")") {
			t.Errorf("the stuck Service is not named:\n%s", r)
		}
		if took > 60*time.Second {
			t.Errorf("destroy took %s to fail with a 4s bound", took)
		}
		if inv := inventory(t, emu, name, region); len(inv[awsprovider.KindEKSCluster]) != 1 {
			t.Errorf("the EKS cluster was deleted with a load balancer left: %s", inv)
		}
		releaseLB(t, "stuck", "")
		expect(t, e.aws("destroy", "aws", name, "--region", region, "--yes", "--headless"), 0)
		expectDestroyed(t, inventory(t, emu, name, region))
	})
}

// TestAWSDestroyKilledConverges: a destroy killed at each checkpoint it
// gained (load balancers, Fargate profiles, the VPC sweep) is finished by
// running it again.
func TestAWSDestroyKilledConverges(t *testing.T) {
	e, emu := awsEnv(t)
	const name, region = "awsdkill", "us-east-1"
	infraOnly(t, e, name, region)
	for _, at := range []string{"before-aws-delete-loadbalancer", "before-aws-delete-fargateprofile", "before-aws-delete-networkinterface"} {
		r := e.kilnWith([]string{testhooks.CrashEnv + "=" + at}, "destroy", "aws", name, "--region", region, "--yes", "--headless",
			"--regions", strings.Join(awsRegions, ","))
		if !r.killed {
			t.Fatalf("destroy not killed at %s:\n%s", at, r)
		}
	}
	expect(t, e.aws("destroy", "aws", name, "--region", region, "--yes", "--headless"), 0)
	expectDestroyed(t, inventory(t, emu, name, region))
}

// TestAWSForeignTokenDirMovedAside: a token dir records the AWS account
// and region; one at the default path made for another region or another
// account is moved aside by a fresh create, with a message naming both,
// and never used.
func TestAWSForeignTokenDirMovedAside(t *testing.T) {
	e, emu := awsEnv(t)
	const name = "awsacct"
	t.Cleanup(func() {
		p := &awsprovider.Provider{LoadConfig: emu.Config}
		for _, region := range []string{"us-east-1", "eu-west-1"} {
			if _, err := p.DestroyInfrastructure(context.Background(), name, region, nil); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	dir := filepath.Join(e.state, "kiln", "aws", name, "tokens")
	manifest := func() map[string]any {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	create := func(region string) result {
		t.Helper()
		// Stopped once the claim is held: nothing else is created in AWS
		// (the claim is released by the cleanup's destroy).
		r := e.kilnWith([]string{testhooks.CrashEnv + "=after-aws-claim"}, "create", "aws", name, "--region", region,
			"--regions", strings.Join(awsRegions, ","), "--headless")
		if !r.killed {
			t.Fatalf("create not stopped at the start of its infrastructure:\n%s", r)
		}
		return r
	}
	asides := func() []string {
		m, _ := filepath.Glob(dir + ".foreign-*")
		return m
	}

	create("us-east-1")
	m := manifest()
	account, _ := m["account"].(string)
	if len(account) != 12 || m["location"] != "us-east-1" {
		t.Fatalf("manifest does not record account and region: %v", m)
	}
	key := m["key_id"]

	// Another region: moved aside, a new key.
	r := create("eu-west-1")
	if !strings.Contains(r.stdout+r.stderr, "made for region us-east-1, this create is in eu-west-1") {
		t.Errorf("no message naming both regions:\n%s", r)
	}
	if got := asides(); len(got) != 1 {
		t.Fatalf("moved-aside dirs: %v", got)
	} else if st, err := os.Stat(got[0]); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("moved-aside dir %s: %v %v", got[0], st, err)
	}
	if m := manifest(); m["location"] != "eu-west-1" || m["key_id"] == key {
		t.Errorf("the dir of us-east-1 was reused: %v", m)
	}

	// Another account (the emulator's is fixed: written by hand).
	m = manifest()
	m["account"] = "111122223333"
	data, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), append(data, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	key = m["key_id"]
	time.Sleep(1100 * time.Millisecond) // another timestamp suffix
	r = create("eu-west-1")
	if !strings.Contains(r.stdout+r.stderr, "made for account 111122223333, this create runs in account "+account) {
		t.Errorf("no message naming both accounts:\n%s", r)
	}
	if got := asides(); len(got) != 2 {
		t.Errorf("moved-aside dirs: %v", got)
	}
	if m := manifest(); m["account"] != account || m["key_id"] == key {
		t.Errorf("the other account's dir was reused: %v", m)
	}

	// The same account and region: kept (a rerun resumes with its key).
	key = manifest()["key_id"]
	r = create("eu-west-1")
	if got := asides(); len(got) != 2 || manifest()["key_id"] != key || strings.Contains(r.stdout+r.stderr, "moved it to") {
		t.Errorf("this cluster's own dir was not kept: %v %v\n%s", got, manifest(), r)
	}
}

// TestAWSDestroyWaitsForTheGatewayLoadBalancer: kiln's own gateway is a
// LoadBalancer Service on aws; the platform phase of destroy waits until
// its controller has removed the finalizer (the load balancer is gone)
// before the infrastructure phase begins.
func TestAWSDestroyWaitsForTheGatewayLoadBalancer(t *testing.T) {
	e, emu := awsEnv(t)
	const name, region = "awsgwlb", "eu-west-1"
	expect(t, e.aws("create", "aws", name, "--region", region, "--headless"), 0)
	ctx := context.Background()
	svcs := clusterB.Client.CoreV1().Services("kiln-system")
	s, err := svcs.Get(ctx, "kiln-gateway", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
		t.Fatalf("gateway Service is %s, not LoadBalancer", s.Spec.Type)
	}
	s.Finalizers = append(s.Finalizers, lbFinalizer)
	if _, err := svcs.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	released := make(chan time.Time, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			s, err := svcs.Get(ctx, "kiln-gateway", metav1.GetOptions{})
			if err != nil || s.DeletionTimestamp == nil || time.Since(s.DeletionTimestamp.Time) < 3*time.Second {
				continue
			}
			s.Finalizers = nil
			if _, err := svcs.Update(ctx, s, metav1.UpdateOptions{}); err == nil {
				released <- time.Now()
				return
			}
		}
	}()
	r := e.aws("destroy", "aws", name, "--region", region, "--yes", "--headless", "-o", "json")
	expect(t, r, 0)
	var at time.Time
	select {
	case at = <-released:
	default:
		t.Fatalf("destroy finished while the gateway's load balancer was held:\n%s", r)
	}
	for _, ev := range r.events(t) {
		if ev["type"] == "phase" && ev["phase"] == "infrastructure" && ev["state"] == "started" {
			ts, _ := time.Parse(time.RFC3339Nano, ev["time"].(string))
			if ts.Before(at) {
				t.Errorf("infrastructure began at %s, before the gateway's load balancer was released at %s", ts, at)
			}
		}
	}
	waitNamespaceGone(t, clusterB.Client, "kiln-system")
	expectDestroyed(t, inventory(t, emu, name, region))
}

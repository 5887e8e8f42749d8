package testcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

var shared *Cluster

func TestMain(m *testing.M) {
	if os.Getenv("KILN_TESTCLUSTER_ORPHAN") != "" {
		// Child mode for TestKilledParentLeavesNoProcess: start a cluster,
		// report its pids, then wait to be killed.
		orphanChild()
		return
	}
	if os.Getenv("KILN_TESTCLUSTER_ORPHAN_REAL") != "" {
		// Child mode for TestKilledRealNodeIsCleanedUpByTheNext.
		orphanRealChild()
		return
	}
	os.Exit(Main(m, Options{Nodes: 2}, &shared))
}

func TestDeploymentRollsOutAndServiceGetsEndpoints(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := shared.Namespace(t)
	cs := shared.Client
	labels := map[string]string{"app": "web"}
	replicas := int32(2)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: "nginx:1.27-alpine",
					Ports: []corev1.ContainerPort{{ContainerPort: 80}},
				}}},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}},
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.ReadyReplicas == 2 && d.Status.AvailableReplicas == 2, nil
	})
	if err != nil {
		t.Fatalf("deployment did not become ready: %v", err)
	}
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		return readyEndpoints(ctx, cs, ns, "web") == 2, nil
	})
	if err != nil {
		t.Fatalf("service web has %d ready endpoints, want 2: %v", readyEndpoints(ctx, cs, ns, "web"), err)
	}
}

func readyEndpoints(ctx context.Context, cs kubernetes.Interface, ns, svc string) int {
	slices, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		return 0
	}
	n := 0
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				n++
			}
		}
	}
	return n
}

func TestNodesAreReadyAndUntainted(t *testing.T) {
	nodes, err := shared.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 2 {
		t.Fatalf("got %d nodes, want 2", len(nodes.Items))
	}
	for _, n := range nodes.Items {
		if !nodeReady(&n) || len(n.Spec.Taints) != 0 {
			t.Errorf("node %s: ready=%v taints=%v", n.Name, nodeReady(&n), n.Spec.Taints)
		}
	}
}

func TestRBACIsEnforced(t *testing.T) {
	// An unknown bearer token must be rejected: the API server authenticates.
	rc := *shared.RESTConfig
	rc.BearerToken = "not-a-valid-token"
	cs, err := kubernetes.NewForConfig(&rc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Fatalf("list with a bad token: got %v, want Unauthorized", err)
	}
	// RBAC is on: a user without bindings is forbidden.
	rc = *shared.RESTConfig
	rc.Impersonate.UserName = "nobody"
	cs, err = kubernetes.NewForConfig(&rc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoreV1().Secrets("default").List(context.Background(), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("list secrets as nobody: got %v, want Forbidden", err)
	}
}

func TestTwoClustersAreIndependentAndStopLeavesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	other, err := Start(ctx, Options{ContextName: "kiln-other"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Stop() })
	if other.Server == shared.Server {
		t.Fatalf("both clusters serve %s", other.Server)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "only-in-other"}}
	if _, err := other.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := shared.Client.CoreV1().Namespaces().Get(ctx, "only-in-other", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace of the other cluster visible in the shared one: %v", err)
	}
	if !strings.Contains(string(other.Kubeconfig), "kiln-other") {
		t.Fatalf("kubeconfig lacks context name kiln-other")
	}

	pids := other.PIDs()
	if len(pids) != 5 {
		t.Fatalf("got %d processes, want 5", len(pids))
	}
	dir := other.Dir
	if err := other.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d still running after Stop", pid)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("state dir %s not removed: %v", dir, err)
	}
}

// TestKilledParentLeavesNoProcess starts a cluster in a child test binary,
// SIGKILLs that child, and checks every control-plane process goes with it.
func TestKilledParentLeavesNoProcess(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pidFile := t.TempDir() + "/pids"
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "KILN_TESTCLUSTER_ORPHAN="+pidFile)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var pids []int
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		data, err := os.ReadFile(pidFile)
		if err != nil || !strings.HasSuffix(string(data), "\n") {
			return false, nil
		}
		for _, f := range strings.Fields(string(data)) {
			pid, _ := strconv.Atoi(f)
			pids = append(pids, pid)
		}
		return true, nil
	})
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("child never reported its cluster: %v", err)
	}
	if len(pids) != 5 {
		t.Fatalf("child reported %d pids, want 5", len(pids))
	}
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("pid %d not running before the kill", pid)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	err = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		for _, pid := range pids {
			if alive(pid) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		for _, pid := range pids {
			if alive(pid) {
				t.Errorf("pid %d survived its parent", pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

func orphanChild() {
	// The state dir sits beside the pid file, inside the parent's t.TempDir,
	// so it is cleaned up although this process never runs Stop.
	dir := filepath.Join(filepath.Dir(os.Getenv("KILN_TESTCLUSTER_ORPHAN")), "cluster")
	c, err := Start(context.Background(), Options{ContextName: "kiln-orphan", Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var b strings.Builder
	for _, pid := range c.PIDs() {
		fmt.Fprintf(&b, "%d ", pid)
	}
	b.WriteString("\n")
	_ = os.WriteFile(os.Getenv("KILN_TESTCLUSTER_ORPHAN"), []byte(b.String()), 0o600)
	select {} // wait for SIGKILL
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Format: pid (comm) state ...; comm may contain spaces.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	return s[i+2] != 'Z' && s[i+2] != 'X'
}

// TestKwokCrashAtStartIsRestarted starts a control plane whose kwok dies
// once during start-up, as kwok v0.8.0 sometimes does ("concurrent map
// writes" in its CEL registry): Start must run it again and come up.
func TestKwokCrashAtStartIsRestarted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a second control plane")
	}
	real, err := binDir("")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-stages.yaml"} {
		if err := os.Symlink(filepath.Join(real, b), filepath.Join(bin, b)); err != nil {
			t.Fatal(err)
		}
	}
	marker := filepath.Join(bin, "crashed")
	// Dies after the start check (so the wait for nodes sees it), once.
	script := fmt.Sprintf("#!/bin/sh\nif [ ! -e %q ]; then touch %q; sleep 0.3; echo 'fatal error: concurrent map writes' >&2; exit 2; fi\nexec %q \"$@\"\n",
		marker, marker, filepath.Join(real, "kwok"))
	if err := os.WriteFile(filepath.Join(bin, "kwok"), []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{BinDir: bin})
	if err != nil {
		t.Fatalf("start with a kwok that crashes once: %v", err)
	}
	defer c.Stop()
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the fake kwok never crashed, so the restart was not exercised: %v", err)
	}
	log, err := os.ReadFile(c.path("kwok.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "concurrent map writes") {
		t.Fatalf("kwok.log lost the first run's output:\n%s", log)
	}
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 1 || !nodeReady(&nodes.Items[0]) {
		t.Fatalf("nodes after restart: %v, %v", nodes, err)
	}
}

func TestPodLogsAreServedAndFollowed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := shared.Namespace(t)
	cs := shared.Client
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "logger", Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "logger", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, err
	})
	if err != nil {
		t.Fatalf("pod not running: %v", err)
	}
	if err := shared.AppendPodLog("first line " + ns); err != nil {
		t.Fatal(err)
	}
	raw, err := cs.CoreV1().Pods(ns).GetLogs("logger", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("pods/log: %v", err)
	}
	if !strings.Contains(string(raw), "first line "+ns) {
		t.Fatalf("log %q lacks the appended line", raw)
	}
	stream, err := cs.CoreV1().Pods(ns).GetLogs("logger", &corev1.PodLogOptions{Follow: true}).Stream(ctx)
	if err != nil {
		t.Fatalf("follow pods/log: %v", err)
	}
	defer stream.Close()
	if err := shared.AppendPodLog("second line " + ns); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(got.String(), "second line "+ns) {
		n, err := stream.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("followed log ended (%v) without the second line: %q", err, got.String())
		}
	}
}

// TestFreePortsAreOutsideTheEphemeralRange: the control plane's ports come
// from [portsLow, portsHigh), where no outgoing connection can take one
// before its server binds it, are distinct, and are free: each can be
// bound at once.
func TestFreePortsAreOutsideTheEphemeralRange(t *testing.T) {
	if ephemeralLow() < portsHigh {
		t.Skipf("the ephemeral range starts at %d, inside [%d, %d)", ephemeralLow(), portsLow, portsHigh)
	}
	for range 20 {
		ports, err := freePorts(4)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for _, p := range ports {
			if p < portsLow || p >= portsHigh {
				t.Fatalf("port %d outside [%d, %d)", p, portsLow, portsHigh)
			}
			if seen[p] {
				t.Fatalf("port %d picked twice in %v", p, ports)
			}
			seen[p] = true
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				t.Fatalf("port %d is not free: %v", p, err)
			}
			_ = l.Close()
		}
	}
}

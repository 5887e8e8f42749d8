package testcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
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
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
)

const webImage = "docker.io/kiln/web:test"

// needRealNode skips a real-node test where the machine cannot run one; in
// CI (which installs everything) it fails instead, so a skip hides nothing.
func needRealNode(t *testing.T) {
	t.Helper()
	err := RealNodeAvailable()
	if err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("CI: %v", err)
	}
	t.Skip(err)
}

// TestRealNodeServesThroughClusterIP runs a real container on the real
// node: a Deployment of the web image pinned to it, a Service in front, the
// page fetched from the host through the ClusterIP (kube-proxy's iptables
// rules) and straight from the pod IP (the CNI bridge), the container's
// log read through the API (the API server proxying to the kubelet). Then
// Stop leaves no bridge, shim, mount or kube-proxy chain behind.
func TestRealNodeServesThroughClusterIP(t *testing.T) {
	needRealNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	sysctls := map[string]string{}
	for _, k := range hostSysctls {
		v, _ := os.ReadFile("/proc/sys/" + k)
		sysctls[k] = string(v)
	}
	start := time.Now()
	c, err := Start(ctx, Options{Nodes: 1, RealNode: true})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = c.Stop()
		}
	}()
	t.Logf("real-node cluster up in %s", time.Since(start).Round(time.Millisecond))

	// The kwok node is still there and still fake; the real node is apart.
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 2 {
		t.Fatalf("got %d nodes, want the kwok node and %s", len(nodes.Items), RealNodeName)
	}
	real, err := c.Client.CoreV1().Nodes().Get(ctx, RealNodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if real.Labels[RealNodeLabel] != "true" || real.Annotations["kwok.x-k8s.io/node"] != "" {
		t.Fatalf("real node labels %v annotations %v", real.Labels, real.Annotations)
	}

	t0 := time.Now()
	if err := c.ImportGoImage(ctx, webImage, "github.com/kilnctl/kiln/internal/testenv/testcluster/images/web"); err != nil {
		t.Fatal(err)
	}
	t.Logf("web image built and imported in %s", time.Since(t0).Round(time.Millisecond))

	ns := c.Namespace(t)
	cs := c.Client
	labels := map[string]string{"app": "web"}
	replicas := int32(1)
	spec := corev1.PodSpec{
		AutomountServiceAccountToken: new(bool),
		Containers: []corev1.Container{{
			Name: "web", Image: webImage, ImagePullPolicy: corev1.PullNever,
			Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8080)}},
				PeriodSeconds: 1,
			},
		}},
	}
	PinToRealNode(&spec)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	var pod corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil || len(pods.Items) != 1 {
			return false, nil
		}
		pod = pods.Items[0]
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("web pod not ready: %v\npod status: %+v\n%s", err, pod.Status, c.realLogs())
	}
	t.Logf("pod %s Ready on %s with IP %s in %s", pod.Name, pod.Spec.NodeName, pod.Status.PodIP, time.Since(t0).Round(time.Millisecond))
	if pod.Spec.NodeName != RealNodeName {
		t.Fatalf("pod on %s, want %s", pod.Spec.NodeName, RealNodeName)
	}
	ip, err := netip.ParseAddr(pod.Status.PodIP)
	if err != nil || !netip.MustParsePrefix(RealPodCIDR).Contains(ip) {
		t.Fatalf("pod IP %q not in %s", pod.Status.PodIP, RealPodCIDR)
	}

	// Straight to the pod over the bridge.
	if body := get(t, ctx, "http://"+net.JoinHostPort(pod.Status.PodIP, "8080")+"/direct"); !strings.Contains(body, "kiln-web "+pod.Name) {
		t.Fatalf("pod IP answered %q, want the pod's name", body)
	}
	// Through the ClusterIP: kube-proxy's DNAT.
	t0 = time.Now()
	body := get(t, ctx, "http://"+net.JoinHostPort(svc.Spec.ClusterIP, "80")+"/via-service")
	if !strings.Contains(body, "kiln-web "+pod.Name) {
		t.Fatalf("ClusterIP %s answered %q, want the pod's name", svc.Spec.ClusterIP, body)
	}
	t.Logf("ClusterIP %s answered in %s: %q", svc.Spec.ClusterIP, time.Since(t0).Round(time.Millisecond), strings.TrimSpace(body))

	// Cluster DNS: the pod's resolver asks CoreDNS (behind kube-dns's
	// ClusterIP), which answers from the API, by full name and through
	// the pod's search path.
	t0 = time.Now()
	for _, name := range []string{"web." + ns + ".svc." + ClusterDomain, "web"} {
		got := get(t, ctx, "http://"+net.JoinHostPort(pod.Status.PodIP, "8080")+"/lookup?name="+name)
		if strings.TrimSpace(got) != svc.Spec.ClusterIP {
			t.Fatalf("in the pod, %s resolves to %q, want %s", name, got, svc.Spec.ClusterIP)
		}
	}
	t.Logf("cluster DNS answered in the pod in %s", time.Since(t0).Round(time.Millisecond))

	// The container's own stdout, through the API server and the kubelet.
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		logs, err := cs.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "web"}).DoRaw(ctx)
		if err != nil {
			t.Logf("pods/log: %v", err)
			return false, nil
		}
		return strings.Contains(string(logs), "GET /via-service") && strings.Contains(string(logs), "kiln-web listening on :8080"), nil
	})
	if err != nil {
		t.Fatalf("pod log lacks the request: %v", err)
	}

	t.Run("NetworkPolicy", func(t *testing.T) { testNetworkPolicy(t, ctx, c, ns, pod) })

	// Stop leaves nothing on the host.
	sock := c.real.st.socket()
	dir := c.Dir
	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	// Check under the machine's real-node lock: another package's test may
	// start its real node the moment this one lets go.
	lock, err := lockRealNode(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := exec.Command("ip", "link", "show", realBridge).Run(); err == nil {
		t.Errorf("bridge %s still there after Stop", realBridge)
	}
	if out, _ := exec.Command("ipset", "list", "-n").Output(); len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("ipsets left after Stop: %s", out)
	}
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		if out, _ := exec.Command(save).Output(); strings.Contains(string(out), "KUBE-") {
			t.Errorf("%s: the kubelet's or kube-proxy's chains still there after Stop:\n%s", save, out)
		}
	}
	if _, err := os.Stat(filepath.Join(realNodeState, "state.json")); err == nil {
		t.Errorf("real-node record %s left after Stop", filepath.Join(realNodeState, "state.json"))
	}
	if out, _ := exec.Command("pgrep", "-f", sock).Output(); len(out) > 0 {
		t.Errorf("processes of %s still running after Stop: %s", sock, out)
	}
	if mi, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mi), dir) {
		t.Errorf("mounts under %s left after Stop", dir)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("cluster dir %s left after Stop", dir)
	}
	for k, was := range sysctls {
		if now, _ := os.ReadFile("/proc/sys/" + k); string(now) != was {
			t.Errorf("sysctl %s is %q after Stop, was %q", k, strings.TrimSpace(string(now)), strings.TrimSpace(was))
		}
	}
}

// get fetches url from the host, retrying for a little while (kube-proxy
// syncs its rules a moment after the endpoints appear). Only addresses on
// this machine's bridge are ever asked.
func get(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	var last error
	for i := 0; i < 60; i++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil && resp.StatusCode == http.StatusOK {
				return string(b)
			}
			err = fmt.Errorf("status %d, read %v", resp.StatusCode, rerr)
		}
		last = err
		select {
		case <-ctx.Done():
			t.Fatalf("GET %s: %v", url, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	t.Fatalf("GET %s: %v", url, last)
	return ""
}

// TestKilledRealNodeIsCleanedUpByTheNext kills (SIGKILL) a test process
// whose real node runs a pod: its containerd, kubelet and kube-proxy die
// with it, but the pod's shim and container, the bridge, the mounts and
// the iptables rules outlive it. The next real node's start tears all that
// down before it builds its own.
func TestKilledRealNodeIsCleanedUpByTheNext(t *testing.T) {
	needRealNode(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(t.TempDir(), "report")
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "KILN_TESTCLUSTER_ORPHAN_REAL="+report)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var sock string
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		select {
		case err := <-exited:
			return false, fmt.Errorf("child exited: %v", err)
		default:
		}
		data, err := os.ReadFile(report)
		if err != nil || !strings.HasSuffix(string(data), "\n") {
			return false, nil
		}
		sock = strings.TrimSpace(string(data))
		return true, nil
	})
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("child never reported its real node: %v", err)
	}
	if len(webPids(t)) == 0 || len(pidsOf(t, sock)) == 0 {
		_ = cmd.Process.Kill()
		t.Fatalf("child's pod not running: web %v, shims %v", webPids(t), pidsOf(t, sock))
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	time.Sleep(time.Second) // Pdeathsig reaches containerd, kubelet and kube-proxy
	// What the killed test left (unless another package's real node,
	// started in between, already cleaned it up: its start does the same).
	if len(webPids(t)) == 0 {
		t.Log("the killed node's container is already gone")
	}
	if err := exec.Command("ip", "link", "show", realBridge).Run(); err != nil {
		t.Log("the killed node's bridge is already gone")
	}

	c, err := Start(ctx, Options{RealNode: true})
	if err != nil {
		t.Fatal(err)
	}
	if p := webPids(t); len(p) > 0 {
		t.Errorf("the killed node's container still runs after the next start: pids %v", p)
	}
	if p := pidsOf(t, sock); len(p) > 0 {
		t.Errorf("the killed node's shims still run after the next start: pids %v", p)
	}
	if mi, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mi), filepath.Dir(report)) {
		t.Errorf("the killed node's mounts under %s are still there", filepath.Dir(report))
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	lock, err := lockRealNode(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := exec.Command("ip", "link", "show", realBridge).Run(); err == nil {
		t.Errorf("bridge %s still there after Stop", realBridge)
	}
}

// pidsOf returns the processes whose command line contains s.
// webPids are the processes of the test web image's container: its
// executable is /web. (Matching "/web" anywhere in a command line would
// also match a go test of the package .../testcluster/images/web.)
func webPids(t *testing.T) []int {
	t.Helper()
	return pidsWhere(t, func(args []string) bool { return args[0] == "/web" })
}

func pidsOf(t *testing.T, s string) []int {
	t.Helper()
	return pidsWhere(t, func(args []string) bool {
		return args[0] == s || strings.Contains(strings.Join(args[1:], " "), s)
	})
}

func pidsWhere(t *testing.T, match func(args []string) bool) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cl, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cl) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cl), "\x00"), "\x00")
		if match(args) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// orphanRealChild starts a real node with one web pod on it, reports the
// node's containerd socket, then waits to be killed.
func orphanRealChild() {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "orphan real child:", err)
		os.Exit(1)
	}
	dir := filepath.Join(filepath.Dir(os.Getenv("KILN_TESTCLUSTER_ORPHAN_REAL")), "cluster")
	ctx := context.Background()
	c, err := Start(ctx, Options{ContextName: "kiln-orphan-real", Dir: dir, RealNode: true})
	if err != nil {
		fail(err)
	}
	if err := c.ImportGoImage(ctx, webImage, "github.com/kilnctl/kiln/internal/testenv/testcluster/images/web"); err != nil {
		fail(err)
	}
	spec := corev1.PodSpec{
		AutomountServiceAccountToken: new(bool),
		Containers:                   []corev1.Container{{Name: "web", Image: webImage, ImagePullPolicy: corev1.PullNever}},
	}
	PinToRealNode(&spec)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: spec}
	if _, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		fail(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		fail(fmt.Errorf("pod not running: %w\n%s", err, c.realLogs()))
	}
	_ = os.WriteFile(os.Getenv("KILN_TESTCLUSTER_ORPHAN_REAL"), []byte(c.real.st.socket()+"\n"), 0o600)
	select {} // wait for SIGKILL
}

// testNetworkPolicy: a client pod reaches the web pod; a NetworkPolicy
// admitting only pods labelled role=allowed cuts it off (kube-router's
// firewall); the label lets it through again.
func testNetworkPolicy(t *testing.T, ctx context.Context, c *Cluster, ns string, web corev1.Pod) {
	cs := c.Client
	spec := corev1.PodSpec{
		AutomountServiceAccountToken: new(bool),
		Containers:                   []corev1.Container{{Name: "client", Image: webImage, ImagePullPolicy: corev1.PullNever}},
	}
	PinToRealNode(&spec)
	client, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client", Labels: map[string]string{"role": "client"}},
		Spec:       spec,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		client, err = cs.CoreV1().Pods(ns).Get(ctx, "client", metav1.GetOptions{})
		return err == nil && client.Status.Phase == corev1.PodRunning && client.Status.PodIP != "", nil
	})
	if err != nil {
		t.Fatalf("client pod not running: %v", err)
	}
	fetch := "http://" + net.JoinHostPort(client.Status.PodIP, "8080") + "/fetch?url=http://" + net.JoinHostPort(web.Status.PodIP, "8080") + "/from-client"
	// Running means the container started, not that its server listens
	// yet (the pod has no readiness probe): wait until it answers at all.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + net.JoinHostPort(client.Status.PodIP, "8080") + "/")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return true, nil
	})
	if err != nil {
		t.Fatalf("client pod's server never answered from the host: %v", err)
	}
	reaches := func() bool {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(fetch)
		if err != nil {
			t.Fatalf("client pod unreachable from the host: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(b), "kiln-web "+web.Name)
	}
	until := func(what string, want bool) {
		t.Helper()
		start := time.Now()
		for !errors.Is(ctx.Err(), context.DeadlineExceeded) && time.Since(start) < 30*time.Second {
			if reaches() == want {
				t.Logf("%s after %s", what, time.Since(start).Round(time.Millisecond))
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
		out, _ := exec.Command("iptables-save", "-t", "filter").Output()
		t.Fatalf("%s: not within 30 s\n%s\n%s", what, c.realLogs(), out)
	}
	until("client reaches web with no policy", true)
	port := intstr.FromInt32(8080)
	_, err = cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web-only-allowed"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "allowed"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &port}},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	until("the policy cuts the client off", false)
	client.Labels["role"] = "allowed"
	if _, err := cs.CoreV1().Pods(ns).Update(ctx, client, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	until("the client labelled role=allowed reaches web again", true)
}

// A real node held for good (the demo's: Options.RealNodeHolder) makes
// another real node's start fail at once, naming the holder, instead of
// waiting out its deadline; once released, the next taker clears the
// holder's words.
func TestRealNodeHeldByTheDemoFailsFast(t *testing.T) {
	needRealNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	const holder = "the local cluster of make demo (test)"
	held, err := lockRealNode(ctx, holder) // may wait for another package's real node
	if err != nil {
		t.Fatal(err)
	}
	// Had it waited, its deadline would end it with an error that does
	// not name the holder.
	waitCtx, cancelWait := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelWait()
	second, err := lockRealNode(waitCtx, "")
	if err == nil {
		second.Close()
		held.Close()
		t.Fatal("a second taker got the real-node lock while it was held")
	}
	if !strings.Contains(err.Error(), holder) {
		t.Errorf("the second taker's error %q does not name the holder", err)
	}
	held.Close()
	next, err := lockRealNode(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if _, err := os.Stat(filepath.Join(realNodeState, "holder")); !os.IsNotExist(err) {
		t.Errorf("the holder's words outlived its lock: %v", err)
	}
}

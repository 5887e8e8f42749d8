package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/project"
	"github.com/kilnctl/kiln/internal/testenv/testcluster"
)

// realWebImage is the real node's test web server (internal/testenv/testcluster/
// images/web), built here to run as a numeric non-root user so it passes
// the Pod Security restricted profile of kiln's tenant namespaces.
const realWebImage = "docker.io/kiln/web-nonroot:test"

// TestGatewayServesProjectsOnARealNode shows on one real-node cluster what
// kwok can only fake (issue #23):
//
//  1. A project's page through the gateway: kiln's platform objects (the
//     namespaces with Pod Security restricted, kiln-auth with a generated
//     key, the gateway from the release-shaped image, the NetworkPolicies)
//     and a project Deployment and Service shaped as kiln's, all pinned to
//     the real node; from the host through the gateway Service's ClusterIP,
//     Host web.a.DOMAIN with tenant a's token is 200 with the project's
//     page (also by the /t/a/p/web/ path), no token 401, tenant b's 403.
//  2. Isolation by packets: a pod in kiln-tenant-b reaches tenant a's
//     project pod (its IP and its Service) before kiln's policies are
//     applied and cannot open a connection once they are, while the
//     gateway still reaches it (the 200 above comes after the policies).
//  3. Key reload through kubelet's ConfigMap volume: kiln-auth replaced by
//     a key set without the old key (rotate-key's retire step) is picked
//     up by the running gateway pod — the old key's token 401, the new
//     key's 200 — with no restart.
//  4. The "svc" DNS trick, performed with a real resolver (CoreDNS and a
//     pod's search path): the gateway never dials the attacker's pod.
func TestGatewayServesProjectsOnARealNode(t *testing.T) {
	if err := testcluster.RealNodeAvailable(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI: %v", err)
		}
		t.Skip(err)
	}
	// One real node per machine: Start may wait for another package's to
	// stop, so its deadline is apart from the test's own.
	startCtx, cancelStart := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancelStart()
	t0 := time.Now()
	c, err := testcluster.Start(startCtx, testcluster.Options{RealNode: true})
	must(t, err)
	defer func() { _ = c.Stop() }()
	t.Logf("real-node cluster up in %s (lock wait included)", time.Since(t0).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	cs := c.Client

	// Images: kiln's gateway image as the release builds it, and the web
	// server as a non-root image.
	t0 = time.Now()
	bin, err := buildKiln()
	must(t, err)
	layoutDir := filepath.Join(t.TempDir(), "oci")
	buildImage(t, bin, layoutDir, platform.GatewayImage("v"+testVersion))
	must(t, c.ImportImageLayout(ctx, layoutDir))
	webBin, err := testcluster.BuildGoBinary(ctx, "github.com/kilnctl/kiln/internal/testenv/testcluster/images/web", t.TempDir())
	must(t, err)
	webImg, err := testcluster.BinaryImage(webBin, "/web", imageUser)
	must(t, err)
	must(t, c.ImportImage(ctx, realWebImage, webImg))
	t.Logf("images built and imported in %s", time.Since(t0).Round(time.Millisecond))

	// The platform, as kiln applies it (DESIGN.md §5 order), tenants a
	// and b; the NetworkPolicies come later, after the "before" check.
	const cluster = "dev1"
	cfg := config.Default(cluster)
	cfg.Spec.Tenants = []string{"a", "b"}
	domain := cfg.Spec.Domain
	oldKey := newKey(t)
	auth, err := platform.AuthObject(cluster, map[string]string{oldKey.id: oldKey.pem}, nil)
	must(t, err)
	conf, err := platform.ConfigObject(cluster, cfg)
	must(t, err)
	objs := []platform.Object{platform.NamespaceObject(cluster), auth, conf}
	objs = append(objs, platform.TenantObjects(cluster, cfg.Spec.Tenants)...)
	for _, o := range platform.GatewayObjects(cluster, cfg, "v"+testVersion) {
		if d, ok := o.Apply.(*appsv1ac.DeploymentApplyConfiguration); ok {
			pinToRealNode(d.Spec.Template.Spec) // the only change to the platform's objects
		}
		objs = append(objs, o)
	}
	for _, o := range objs {
		must(t, platform.Apply(ctx, cs, o))
	}

	// Project web of tenant a, shaped as engine/project's Deployment and
	// Service (labels, container "app" with port "http", restricted
	// security context, limits = requests; Service port 80 -> "http"),
	// without the project-token volume, which traffic does not use.
	nsA, nsB := platform.TenantNamespace("a"), platform.TenantNamespace("b")
	webLabels := map[string]string{
		platform.LabelManagedBy: "kiln", platform.LabelCluster: cluster,
		platform.LabelTenant: "a", project.LabelProject: "web",
	}
	webSpec := restrictedPodSpec("app")
	pinToRealNode(webSpec)
	_, err = cs.AppsV1().Deployments(nsA).Apply(ctx, appsv1ac.Deployment("web", nsA).WithLabels(webLabels).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(1).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{project.LabelProject: "web"})).
			WithTemplate(corev1ac.PodTemplateSpec().WithLabels(webLabels).WithSpec(webSpec))),
		metav1.ApplyOptions{FieldManager: platform.FieldManager, Force: true})
	must(t, err)
	webSvc, err := cs.CoreV1().Services(nsA).Apply(ctx, corev1ac.Service("web", nsA).WithLabels(webLabels).
		WithSpec(corev1ac.ServiceSpec().
			WithSelector(map[string]string{project.LabelProject: "web"}).
			WithPorts(corev1ac.ServicePort().WithName("http").WithPort(80).WithTargetPort(intstr.FromString("http")))),
		metav1.ApplyOptions{FieldManager: platform.FieldManager, Force: true})
	must(t, err)

	// A client pod of tenant b: the web image, whose /fetch asks from
	// inside the pod.
	clientSpec := restrictedPodSpec("client")
	pinToRealNode(clientSpec)
	_, err = cs.CoreV1().Pods(nsB).Apply(ctx, corev1ac.Pod("client", nsB).
		WithLabels(map[string]string{"role": "client"}).WithSpec(clientSpec),
		metav1.ApplyOptions{FieldManager: "kiln-test", Force: true})
	must(t, err)

	t0 = time.Now()
	gwPod := readyPod(t, ctx, cs, platform.Namespace, platform.LabelName+"="+platform.GatewayName)
	webPod := readyPod(t, ctx, cs, nsA, project.LabelProject+"=web")
	clientPod := readyPod(t, ctx, cs, nsB, "role=client")
	t.Logf("gateway %s, project %s (%s), client %s (%s) ready on %s in %s", gwPod.Name, webPod.Name, webPod.Status.PodIP,
		clientPod.Name, clientPod.Status.PodIP, testcluster.RealNodeName, time.Since(t0).Round(time.Millisecond))
	gwSvc, err := cs.CoreV1().Services(platform.Namespace).Get(ctx, platform.GatewayName, metav1.GetOptions{})
	must(t, err)
	gatewayURL := "http://" + net.JoinHostPort(gwSvc.Spec.ClusterIP, "80")
	wantPage := "kiln-web " + webPod.Name

	// 2, before: with no policy tenant b's pod reaches tenant a's project.
	targets := map[string]string{
		"project pod IP":          "http://" + net.JoinHostPort(webPod.Status.PodIP, "8080") + "/from-b",
		"project Service":         "http://" + net.JoinHostPort(webSvc.Spec.ClusterIP, "80") + "/from-b",
		"project Service by name": "http://web." + nsA + ".svc." + testcluster.ClusterDomain + "/from-b",
	}
	for what, target := range targets {
		waitFetch(t, ctx, clientPod, target, wantPage, true, "before kiln's policies, tenant b's pod reaches the "+what)
	}

	// kiln's NetworkPolicies.
	for _, o := range platform.PolicyObjects(cluster, cfg) {
		must(t, platform.Apply(ctx, cs, o))
	}
	for what, target := range targets {
		waitFetch(t, ctx, clientPod, target, wantPage, false, "with kiln's policies, tenant b's pod cannot connect to the "+what)
	}

	// 1: the page through the gateway, after the policies: the gateway's
	// own connection to the project is allowed.
	tokA, tokB := oldKey.token(t, cluster, "a"), oldKey.token(t, cluster, "b")
	host := "web.a." + domain
	waitStatus(t, ctx, gatewayURL+"/", host, tokA, http.StatusOK, wantPage, "the page through the gateway with tenant a's token")
	waitStatus(t, ctx, gatewayURL+"/t/a/p/web/", "", tokA, http.StatusOK, wantPage, "the page by path through the gateway with tenant a's token")
	for _, tc := range []struct {
		what, token string
		code        int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"tenant b's token", tokB, http.StatusForbidden},
	} {
		code, body := gatewayAnswer(ctx, gatewayURL+"/", host, tc.token)
		if code != tc.code {
			t.Errorf("GET / Host %s with %s: %d %q, want %d", host, tc.what, code, body, tc.code)
		}
		if strings.Contains(body, "kiln-web") {
			t.Errorf("GET / Host %s with %s answered with the project's page %q", host, tc.what, body)
		}
	}

	// 4: the "svc" DNS trick, performed: whoever can create a namespace
	// named svc, with a headless Service kiln-tenant-a and a pod of
	// hostname ghost behind it, owns the name
	// ghost.kiln-tenant-a.svc.svc.cluster.local — which the pod resolver's
	// search path (ndots 5) reaches from the relative name
	// ghost.kiln-tenant-a.svc. Control: a pod looking up that relative
	// name gets the attacker's address. The gateway dials
	// ghost.kiln-tenant-a.svc.cluster.local. (fully qualified, never
	// searched), so tenant a's request for project ghost never reaches
	// the attacker.
	_, err = cs.CoreV1().Namespaces().Apply(ctx, corev1ac.Namespace("svc"), metav1.ApplyOptions{FieldManager: "kiln-test", Force: true})
	must(t, err)
	_, err = cs.CoreV1().Services("svc").Apply(ctx, corev1ac.Service("kiln-tenant-a", "svc").WithSpec(corev1ac.ServiceSpec().
		WithClusterIP(corev1.ClusterIPNone).WithSelector(map[string]string{"role": "attacker"}).
		WithPorts(corev1ac.ServicePort().WithName("http").WithPort(80).WithTargetPort(intstr.FromInt32(8080)))),
		metav1.ApplyOptions{FieldManager: "kiln-test", Force: true})
	must(t, err)
	attackerSpec := restrictedPodSpec("attacker").WithHostname("ghost").WithSubdomain("kiln-tenant-a")
	pinToRealNode(attackerSpec)
	_, err = cs.CoreV1().Pods("svc").Apply(ctx, corev1ac.Pod("attacker", "svc").
		WithLabels(map[string]string{"role": "attacker"}).WithSpec(attackerSpec),
		metav1.ApplyOptions{FieldManager: "kiln-test", Force: true})
	must(t, err)
	attacker := readyPod(t, ctx, cs, "svc", "role=attacker")
	var lookup string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, lookup = fetchFrom(ctx, clientPod, "http://127.0.0.1:8080/lookup?name=ghost.kiln-tenant-a.svc", "")
		return strings.Contains(lookup, attacker.Status.PodIP), nil
	})
	if err != nil {
		t.Fatalf("control: the relative name ghost.kiln-tenant-a.svc from a pod does not resolve to the attacker's pod %s (last %q): the attack is not set up, so the check below proves nothing", attacker.Status.PodIP, lookup)
	}
	ghost := "ghost.a." + domain
	for i := 0; i < 3; i++ {
		if code, body := gatewayAnswer(ctx, gatewayURL+"/", ghost, tokA); code == http.StatusOK || strings.Contains(body, "kiln-web ghost") {
			t.Fatalf("GET / Host %s with tenant a's token reached the attacker's pod in namespace svc: %d %q", ghost, code, body)
		}
	}

	// 3: rotate-key's retire step: kiln-auth holds the new key only.
	newK := newKey(t)
	auth, err = platform.AuthObject(cluster, map[string]string{newK.id: newK.pem}, nil)
	must(t, err)
	must(t, platform.Apply(ctx, cs, auth))
	t0 = time.Now()
	newTokA := newK.token(t, cluster, "a")
	var oldCode, newCode int
	var oldBody, newBody string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		oldCode, oldBody = gatewayGet(ctx, gatewayURL+"/", host, tokA)
		newCode, newBody = gatewayGet(ctx, gatewayURL+"/", host, newTokA)
		return oldCode == http.StatusUnauthorized && newCode == http.StatusOK && strings.Contains(newBody, wantPage), nil
	})
	if err != nil {
		t.Fatalf("after kiln-auth dropped the old key: old key's token %d %q, new key's %d %q (want 401 and 200): %v",
			oldCode, oldBody, newCode, newBody, err)
	}
	t.Logf("the gateway pod took the new key set from its ConfigMap volume %s after the update", time.Since(t0).Round(time.Millisecond))
	if code, body := gatewayAnswer(ctx, gatewayURL+"/", host, newK.token(t, cluster, "b")); code != http.StatusForbidden {
		t.Errorf("tenant b's token of the new key for tenant a's project: %d %q, want 403", code, body)
	}
	// The same pod, never restarted: the reload is the gateway's own.
	pods, err := cs.CoreV1().Pods(platform.Namespace).List(ctx, metav1.ListOptions{LabelSelector: platform.LabelName + "=" + platform.GatewayName})
	must(t, err)
	if len(pods.Items) != 1 || pods.Items[0].UID != gwPod.UID || restarts(pods.Items[0]) != 0 {
		t.Errorf("gateway pods after the key update: %d, want %s with no restart", len(pods.Items), gwPod.Name)
	}

	// Isolation still holds at the end.
	for what, target := range targets {
		var ok bool
		var got string
		// Asked again only when the client pod gave no answer at all.
		_ = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			ok, got = fetchFrom(ctx, clientPod, target, wantPage)
			return ok || got != "", nil
		})
		if ok || got == "" {
			t.Errorf("at the end, tenant b's pod and the %s: reached %v, client answered %q; want a refused fetch", what, ok, got)
		}
	}
}

// pinToRealNode adds PinToRealNode's selector and toleration to a pod
// spec apply configuration.
func pinToRealNode(a *corev1ac.PodSpecApplyConfiguration) {
	var spec corev1.PodSpec
	testcluster.PinToRealNode(&spec)
	a.WithNodeSelector(spec.NodeSelector)
	for _, tol := range spec.Tolerations {
		a.WithTolerations(corev1ac.Toleration().
			WithKey(tol.Key).WithOperator(tol.Operator).WithValue(tol.Value).WithEffect(tol.Effect))
	}
}

// restrictedPodSpec runs the non-root web image as one container named
// name, port "http" 8080, passing Pod Security restricted as a kiln
// project's pod does.
func restrictedPodSpec(name string) *corev1ac.PodSpecApplyConfiguration {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(config.DefaultCPU), corev1.ResourceMemory: resource.MustParse("64Mi")}
	return corev1ac.PodSpec().
		WithAutomountServiceAccountToken(false).
		WithSecurityContext(corev1ac.PodSecurityContext().
			WithRunAsNonRoot(true).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
		WithContainers(corev1ac.Container().
			WithName(name).
			WithImage(realWebImage).
			WithImagePullPolicy(corev1.PullNever).
			WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(8080)).
			WithResources(corev1ac.ResourceRequirements().WithRequests(res).WithLimits(res)).
			WithSecurityContext(corev1ac.SecurityContext().
				WithRunAsNonRoot(true).
				WithAllowPrivilegeEscalation(false).
				WithReadOnlyRootFilesystem(true).
				WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")).
				WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))))
}

func restarts(p corev1.Pod) int32 {
	var n int32
	for _, st := range p.Status.ContainerStatuses {
		n += st.RestartCount
	}
	return n
}

// readyPod waits for the one pod matching selector in ns to be Ready on
// the real node.
func readyPod(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, selector string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(pods.Items) != 1 {
			return false, nil
		}
		pod = pods.Items[0]
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return pod.Status.PodIP != "", nil
			}
		}
		return false, nil
	})
	if err != nil {
		var why []string
		for _, st := range pod.Status.ContainerStatuses {
			why = append(why, fmt.Sprintf("container %s ready=%v restarts=%d state=%+v last=%+v", st.Name, st.Ready, st.RestartCount, st.State, st.LastTerminationState))
		}
		evs, _ := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		for _, e := range evs.Items {
			why = append(why, fmt.Sprintf("event %s %s: %s", e.InvolvedObject.Name, e.Reason, e.Message))
		}
		t.Fatalf("pod %s in %s not ready: %v\nconditions %v\n%s", selector, ns, err, pod.Status.Conditions, strings.Join(why, "\n"))
	}
	if pod.Spec.NodeName != testcluster.RealNodeName {
		t.Fatalf("pod %s/%s on %q, want %s", ns, pod.Name, pod.Spec.NodeName, testcluster.RealNodeName)
	}
	return pod
}

// hostClient talks only to addresses on this machine's real-node bridge
// and service range: never through a proxy, a new connection each time.
var hostClient = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
}

// fetchFrom asks the client pod to fetch target from inside its network
// namespace. reached: the pod got want's page; answer: what the client
// pod said ("" when the host could not ask it, which proves nothing
// either way).
func fetchFrom(ctx context.Context, client corev1.Pod, target, want string) (reached bool, answer string) {
	u := "http://" + net.JoinHostPort(client.Status.PodIP, "8080") + "/fetch?url=" + url.QueryEscape(target)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, ""
	}
	resp, err := hostClient.Do(req)
	if err != nil {
		return false, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	switch {
	case resp.StatusCode == http.StatusOK && strings.Contains(string(b), want):
		return true, string(b)
	case resp.StatusCode == http.StatusBadGateway && !strings.Contains(string(b), "no such host"):
		// The client's own fetch failed to connect: refused, dropped or
		// timed out (a name that did not resolve proves nothing).
		return false, fmt.Sprintf("%d %s", resp.StatusCode, b)
	}
	return false, ""
}

// waitFetch polls until the client pod reaches target (reach) or its
// fetch fails (!reach), with a generous deadline: kube-router and
// kube-proxy apply what the API says within seconds.
func waitFetch(t *testing.T, ctx context.Context, client corev1.Pod, target, want string, reach bool, what string) {
	t.Helper()
	start := time.Now()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		ok, answer := fetchFrom(ctx, client, target, want)
		last = answer
		return answer != "" && ok == reach, nil
	})
	if err != nil {
		t.Fatalf("%s: not within 2 min (%s): last answer %q", what, target, last)
	}
	t.Logf("%s after %s: %q", what, time.Since(start).Round(time.Millisecond), strings.TrimSpace(last))
}

// gatewayGet sends GET url to the gateway with Host host (when set) and
// the bearer token (when set); 0 when no answer came.
func gatewayGet(ctx context.Context, u, host, token string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err.Error()
	}
	if host != "" {
		req.Host = host
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hostClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// gatewayAnswer is gatewayGet asked again, for up to a minute, only while
// no answer comes (a probe missed under load can take the gateway out of
// its Service for a moment); any answer is final.
func gatewayAnswer(ctx context.Context, u, host, token string) (code int, body string) {
	_ = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		code, body = gatewayGet(ctx, u, host, token)
		return code != 0, nil
	})
	return code, body
}

// waitStatus polls the gateway until it answers code with a body holding
// want (the Service's rules and the gateway's first dial may lag a moment
// behind Ready).
func waitStatus(t *testing.T, ctx context.Context, u, host, token string, code int, want, what string) {
	t.Helper()
	start := time.Now()
	var got int
	var body string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, body = gatewayGet(ctx, u, host, token)
		return got == code && strings.Contains(body, want), nil
	})
	if err != nil {
		t.Fatalf("%s: GET %s (Host %q): last %d %q, want %d with %q", what, u, host, got, body, code, want)
	}
	t.Logf("%s: %d %q after %s", what, got, strings.TrimSpace(body), time.Since(start).Round(time.Millisecond))
}

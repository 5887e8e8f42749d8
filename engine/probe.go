package engine

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/input"
	"github.com/kilnctl/kiln/engine/platform"
)

// PhaseProbe is wait --probe's data-plane probe (DESIGN.md §2.7): layered
// on the API readiness, never instead of it.
const PhaseProbe = "probe"

// Fake nodes: kwok manages the nodes that carry this annotation; no
// container ever runs on them, so nothing can answer a request.
const (
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	kwokNodeFake       = "fake"
)

// probeProject is the project the probe asks for. The gateway checks the
// token before it looks the project up, so whether such a project exists
// does not matter: 401 or 403 means the token was refused, anything the
// backend side produces (404 for no such project, or the project's own
// answer) means it was accepted.
const probeProject = "kiln-probe"

// probeTimeout bounds each probe request.
const probeTimeout = 10 * time.Second

// probe sends one authenticated request per tenant through the gateway,
// over a port-forward to a ready gateway pod, and reports for each tenant
// whether the gateway accepted its token. It is skipped, saying so, when
// the gateway pods are not real (kwok's fake nodes).
func (e *Engine) probe(ctx context.Context, loc Location, cluster string, td *creds.TokenDir, tenants []string) error {
	pod, err := gatewayPod(ctx, loc.Client, cluster)
	if err != nil {
		return err
	}
	node, err := loc.Client.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("probe: get node %s of gateway pod %s/%s: %w", pod.Spec.NodeName, pod.Namespace, pod.Name, err)
	}
	if node.Annotations[kwokNodeAnnotation] == kwokNodeFake {
		return skip("gateway pod %s runs on node %s, a kwok fake node: no container runs there to answer (API readiness above still holds)", pod.Name, node.Name)
	}
	if loc.REST == nil {
		return errors.New("probe: no REST config for the port-forward to the gateway")
	}
	base, stop, err := portForward(ctx, loc.REST, loc.Client, pod)
	if err != nil {
		return err
	}
	defer stop()
	e.logf(LevelInfo, "probe: port-forward to gateway pod %s/%s", pod.Namespace, pod.Name)
	client := &http.Client{Timeout: probeTimeout}
	if servesTLS(pod) {
		// spec.gateway.tls: the gateway speaks HTTPS on its port. The
		// channel is the API server's port-forward, and the probe judges
		// tokens, not the certificate's names (which do not include
		// 127.0.0.1), so the certificate is not verified here.
		base = "https://" + strings.TrimPrefix(base, "http://")
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // see above
	}
	results := probeTenants(ctx, client, base, td, tenants, e.probeAgain())
	var bad []string
	for _, r := range results {
		if r.Accepted {
			e.logf(LevelInfo, "probe: tenant %s: %s", r.Tenant, r.Detail)
		} else {
			e.logf(LevelError, "probe: tenant %s: %s", r.Tenant, r.Detail)
			bad = append(bad, "tenant "+r.Tenant+": "+r.Detail)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("the gateway did not accept every tenant's token: %s", strings.Join(bad, "; "))
	}
	return nil
}

// probeAgain is the advice to probe again, in the frontend's words: "run
// wait --probe again" in the CLI, its own action in the wizard (Actions).
func (e *Engine) probeAgain() string {
	args := []string{FlagName(input.Probe)}
	if e.Actions != nil {
		return "run " + e.Actions([]string{"wait"}, args) + " again"
	}
	return "run " + strings.Join(append([]string{"wait"}, args...), " ") + " again"
}

// ProbeResult is the probe's verdict for one tenant.
type ProbeResult struct {
	Tenant   string
	Accepted bool
	// Detail says what the gateway answered, or why nothing was asked.
	Detail string
}

// probeTenants asks the gateway at base once without a token (it must
// refuse: otherwise it authenticates nothing and an accepted token proves
// nothing) and once per tenant with the tenant's token, on the path form
// /t/TENANT/p/kiln-probe/.
func probeTenants(ctx context.Context, client *http.Client, base string, td *creds.TokenDir, tenants []string, again string) []ProbeResult {
	tenants = append([]string(nil), tenants...)
	sort.Strings(tenants)
	get := func(tenant, token string) (int, error) {
		u := base + "/t/" + url.PathEscape(tenant) + "/p/" + probeProject + "/"
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return 0, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			// Client errors name the URL, which holds no token.
			return 0, err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	out := make([]ProbeResult, 0, len(tenants))
	if len(tenants) > 0 {
		code, err := get(tenants[0], "")
		if err == nil && code != http.StatusUnauthorized {
			for _, t := range tenants {
				out = append(out, ProbeResult{Tenant: t, Detail: fmt.Sprintf(
					"not asked: the gateway answered a request without a token with HTTP %d, not 401, so it authenticates nothing (is spec.gateway.image kiln's gateway?)", code)})
			}
			return out
		}
	}
	for _, t := range tenants {
		tok, ok := td.Tokens[t]
		if !ok {
			out = append(out, ProbeResult{Tenant: t, Detail: "not asked: no token for this tenant in " + td.Path})
			continue
		}
		code, err := get(t, tok)
		switch {
		case err != nil:
			out = append(out, ProbeResult{Tenant: t, Detail: fmt.Sprintf("no answer from the gateway: %v", err)})
		case code == http.StatusUnauthorized:
			out = append(out, ProbeResult{Tenant: t, Detail: fmt.Sprintf(
				"refused (HTTP 401): the gateway does not trust key %s; its kiln-auth volume may not be updated yet (kubelet syncs ConfigMap volumes within about a minute) — %s", td.Manifest.KeyID, again)})
		case code == http.StatusForbidden:
			out = append(out, ProbeResult{Tenant: t, Detail: "refused (HTTP 403): the gateway took the token for another tenant's"})
		case code == http.StatusServiceUnavailable:
			// The gateway answers 503 before checking a token when it has
			// no keys loaded: the token's fate is unknown.
			out = append(out, ProbeResult{Tenant: t, Detail: "not judged (HTTP 503): the gateway has no keys loaded yet — " + again})
		default:
			out = append(out, ProbeResult{Tenant: t, Accepted: true, Detail: fmt.Sprintf("accepted (HTTP %d from the probe route)", code)})
		}
	}
	return out
}

// gatewayPod is a ready pod of the gateway Deployment.
func gatewayPod(ctx context.Context, cs kubernetes.Interface, cluster string) (*corev1.Pod, error) {
	sel := labels.SelectorFromSet(map[string]string{platform.LabelName: platform.GatewayName, platform.LabelCluster: cluster})
	pods, err := cs.CoreV1().Pods(platform.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("probe: list gateway pods in %s: %w", platform.Namespace, err)
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "" {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return p, nil
			}
		}
	}
	return nil, fmt.Errorf("probe: no ready gateway pod in %s (selector %s)", platform.Namespace, sel)
}

// servesTLS says whether the gateway pod runs with a certificate
// (GatewayArgs with TLS).
func servesTLS(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.Containers {
		for _, a := range c.Args {
			if strings.HasPrefix(a, "--tls-cert=") {
				return true
			}
		}
	}
	return false
}

// portForward forwards a free local port to the gateway container's http
// port, as `kubectl port-forward` does, and returns its base URL.
func portForward(ctx context.Context, rc *rest.Config, cs kubernetes.Interface, pod *corev1.Pod) (string, func(), error) {
	transport, upgrader, err := spdy.RoundTripperFor(rc)
	if err != nil {
		return "", nil, fmt.Errorf("probe: port-forward to pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	u := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	port := int32(8080)
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == "http" {
				port = p.ContainerPort
			}
		}
	}
	stopCh, readyCh := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, stopCh, readyCh, io.Discard, io.Discard)
	if err != nil {
		return "", nil, fmt.Errorf("probe: port-forward to pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	errc := make(chan error, 1)
	go func() { errc <- fw.ForwardPorts() }()
	stop := func() { close(stopCh) }
	select {
	case <-readyCh:
	case err := <-errc:
		return "", nil, fmt.Errorf("probe: port-forward to pod %s/%s: %w", pod.Namespace, pod.Name, err)
	case <-ctx.Done():
		stop()
		return "", nil, ctx.Err()
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) == 0 {
		stop()
		return "", nil, fmt.Errorf("probe: port-forward to pod %s/%s: no local port: %v", pod.Namespace, pod.Name, err)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", ports[0].Local), stop, nil
}

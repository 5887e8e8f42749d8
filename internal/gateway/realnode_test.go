package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kilnctl/kiln/engine/config"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/internal/testenv/testcluster"
)

// TestGatewayImageRunsOnARealNode runs the gateway as the platform deploys
// it — GatewayObjects' ServiceAccount, Deployment and Service, the
// kiln-auth ConfigMap mounted, Pod Security restricted — from the image
// built as the release builds it, as a real container on the real node:
// its readiness probe passes (the kubelet reaches /readyz on the metrics
// port) and the Service's ClusterIP answers from the host.
func TestGatewayImageRunsOnARealNode(t *testing.T) {
	if err := testcluster.RealNodeAvailable(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI: %v", err)
		}
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c, err := testcluster.Start(ctx, testcluster.Options{RealNode: true})
	must(t, err)
	defer func() { _ = c.Stop() }()

	bin, err := buildKiln()
	must(t, err)
	ref := platform.GatewayImage("v" + testVersion)
	dir := filepath.Join(t.TempDir(), "oci")
	buildImage(t, bin, dir, ref)
	must(t, c.ImportImageLayout(ctx, dir))

	cs := c.Client
	apply := metav1.ApplyOptions{FieldManager: "kiln-test", Force: true}
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   platform.Namespace,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}}, metav1.CreateOptions{})
	must(t, err)
	key := newKey(t)
	keys, err := json.Marshal(map[string]string{key.id: key.pem})
	must(t, err)
	_, err = cs.CoreV1().ConfigMaps(platform.Namespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: platform.AuthName},
		Data:       map[string]string{platform.AuthKey: string(keys)},
	}, metav1.CreateOptions{})
	must(t, err)

	var svcName string
	for _, o := range platform.GatewayObjects("dev1", config.Default("dev1"), "v"+testVersion) {
		switch a := o.Apply.(type) {
		case *corev1ac.ServiceAccountApplyConfiguration:
			_, err = cs.CoreV1().ServiceAccounts(platform.Namespace).Apply(ctx, a, apply)
		case *appsv1ac.DeploymentApplyConfiguration:
			// Pinned to the real node, the only change to the platform's
			// Deployment.
			var spec corev1.PodSpec
			testcluster.PinToRealNode(&spec)
			a.Spec.Template.Spec.WithNodeSelector(spec.NodeSelector)
			for _, tol := range spec.Tolerations {
				a.Spec.Template.Spec.WithTolerations(corev1ac.Toleration().
					WithKey(tol.Key).WithOperator(tol.Operator).WithValue(tol.Value).WithEffect(tol.Effect))
			}
			_, err = cs.AppsV1().Deployments(platform.Namespace).Apply(ctx, a, apply)
		case *corev1ac.ServiceApplyConfiguration:
			svcName = *a.Name
			_, err = cs.CoreV1().Services(platform.Namespace).Apply(ctx, a, apply)
		default:
			t.Fatalf("GatewayObjects returned a %T: teach this test to apply it", o.Apply)
		}
		must(t, err)
	}

	var dep *appsv1.Deployment
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		dep, err = cs.AppsV1().Deployments(platform.Namespace).Get(ctx, platform.GatewayName, metav1.GetOptions{})
		return err == nil && dep.Status.AvailableReplicas >= 1, nil
	})
	if err != nil {
		var why []string
		pods, _ := cs.CoreV1().Pods(platform.Namespace).List(context.Background(), metav1.ListOptions{})
		for _, p := range pods.Items {
			why = append(why, fmt.Sprintf("pod %s on %q phase %s conditions %v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions))
			for _, st := range p.Status.ContainerStatuses {
				why = append(why, fmt.Sprintf("  container %s ready=%v restarts=%d state=%+v last=%+v", st.Name, st.Ready, st.RestartCount, st.State, st.LastTerminationState))
			}
		}
		evs, _ := cs.CoreV1().Events(platform.Namespace).List(context.Background(), metav1.ListOptions{})
		for _, e := range evs.Items {
			why = append(why, fmt.Sprintf("event %s %s: %s", e.InvolvedObject.Name, e.Reason, e.Message))
		}
		t.Fatalf("gateway not available on the real node: %v\n%s", err, strings.Join(why, "\n"))
	}
	pods, err := cs.CoreV1().Pods(platform.Namespace).List(ctx, metav1.ListOptions{})
	must(t, err)
	for _, p := range pods.Items {
		if p.Spec.NodeName != testcluster.RealNodeName {
			t.Errorf("gateway pod %s on %s, want %s", p.Name, p.Spec.NodeName, testcluster.RealNodeName)
		}
	}

	svc, err := cs.CoreV1().Services(platform.Namespace).Get(ctx, svcName, metav1.GetOptions{})
	must(t, err)
	// Any HTTP answer through the ClusterIP is the gateway's own: a request
	// for no project without a token is answered 4xx (404), not proxied.
	client := &http.Client{Timeout: 2 * time.Second}
	url := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "80") + "/"
	var resp *http.Response
	for i := 0; i < 40; i++ {
		resp, err = client.Get(url)
		if err == nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	must(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Logf("gateway through ClusterIP %s: %d %q", svc.Spec.ClusterIP, resp.StatusCode, body)
	if resp.StatusCode < 400 || resp.StatusCode >= 500 {
		t.Errorf("gateway answered a request without a token with %d, want a 4xx", resp.StatusCode)
	}
}

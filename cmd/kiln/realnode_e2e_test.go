package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/engine/project"
	"github.com/kilnctl/kiln/internal/testenv/testcluster"
)

// realWebImage is the stack image of TestKilnOnARealNode: the real node's
// test web server (internal/testenv/testcluster/images/web) as a numeric non-root
// user, so the Pod Security restricted profile of kiln's tenant namespaces
// admits it.
const realWebImage = "docker.io/kiln/e2e-web:1"

// TestKilnOnARealNode runs the kiln binary, unchanged, against a cluster
// whose only node is real (testcluster Options.RealNodeOnly), as `make
// demo` does (issue #23): every pod kiln makes runs as a container on this
// machine under Pod Security restricted, and each claim is checked by
// traffic, not by reading objects:
//
//   - create: the gateway from kiln's image (the binary itself, laid out as
//     the release's ko build) becomes ready on a real kubelet;
//   - project create reports `reachable: yes`, and `wait --probe` accepts
//     the tenant's token through a port-forward to the gateway pod and
//     finds the project reachable;
//   - the front door kiln reports (nodePort: NODE-IP:PORT) serves the
//     project's page with the tenant's token (200) and refuses it without
//     (401) or with a token of a key it does not trust (401);
//   - the project's token file, mounted at /var/run/kiln/project-token, is
//     read by the app's non-root user and has the hash kiln's pod template
//     claims, before and after `project rotate-token`; its mode is 0440 —
//     kiln asks 0400 and the kubelet adds group read for the pod's fsGroup
//     (65532), which is what lets the non-root user read a root-owned file;
//     no other bit is set;
//   - `project logs` shows the container's own lines;
//   - a suspended project is no longer served, and a destroyed platform
//     leaves no pod.
func TestKilnOnARealNode(t *testing.T) {
	skipShort(t)
	if err := testcluster.RealNodeAvailable(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI: %v", err)
		}
		t.Skip(err)
	}
	// One real node per machine: Start may wait for another package's to
	// stop, so its deadline is apart from the test's own.
	startCtx, cancelStart := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancelStart()
	const kctx, name = "kiln-real", "real1"
	c, err := testcluster.Start(startCtx, testcluster.Options{RealNodeOnly: true, ContextName: kctx})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// kiln as the release builds it (static), at a version whose gateway
	// image is the same binary, imported into the node: nothing is pulled.
	const version = "v0.0.0-realnode"
	dir := t.TempDir()
	bin := filepath.Join(dir, "kiln")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-X main.version="+version, "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kiln: %v\n%s", err, out)
	}
	img, err := testcluster.BinaryImage(bin, "/ko-app/kiln", "65532:65532")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ImportImage(ctx, platform.GatewayImage(version), img); err != nil {
		t.Fatal(err)
	}
	web, err := testcluster.BuildGoBinary(ctx, "github.com/kilnctl/kiln/internal/testenv/testcluster/images/web", dir)
	if err != nil {
		t.Fatal(err)
	}
	if img, err = testcluster.BinaryImage(web, "/web", "65532:65532"); err != nil {
		t.Fatal(err)
	}
	if err := c.ImportImage(ctx, realWebImage, img); err != nil {
		t.Fatal(err)
	}

	e := newEnv(t)
	e.exe, e.kubeconfig = bin, c.KubeconfigPath
	cfg := writeConfig(t, `apiVersion: kiln.dev/v1alpha1
kind: ClusterConfig
spec:
  tenants: [default]
  stacks:
    - {name: web, image: "`+realWebImage+`", port: 8080}
`)
	r := e.kiln("create", "kube", name, "--context", kctx, "-c", cfg, "--headless")
	expect(t, r, 0)

	r = e.kiln("project", "create", "kube", name, "default/web", "--headless")
	expect(t, r, 0)
	if !strings.Contains(r.stdout+r.stderr, "reachable: yes") {
		t.Errorf("project create on a real node did not find the project reachable:\n%s", r)
	}
	r = e.kiln("wait", "kube", name, "--probe", "--timeout", "3m", "--headless")
	expect(t, r, 0)
	for _, want := range []string{"tenant default: accepted", "project default/web: reachable: yes"} {
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("wait --probe on a real node does not say %q:\n%s", want, r)
		}
	}

	// The front door, as status reports it.
	r = e.kiln("status", "kube", name, "-o", "json")
	expect(t, r, 0)
	fd := r.last(t, "frontdoor")
	addr, _ := fd["address"].(string)
	if fd["mode"] != "nodePort" || addr == "" {
		t.Fatalf("front door %v: want nodePort with an address", fd)
	}
	tokens := readTokens(t, e.tokenDir(name))
	token := string(tokens["default"])
	host := "web.default." + name + ".kiln.test"
	get := func(path, tok string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return resp.StatusCode, string(b)
	}
	if code, body := get("/", token); code != http.StatusOK || !strings.HasPrefix(body, "kiln-web web-") {
		t.Errorf("GET / at %s (Host %s) with the tenant's token: %d %q, want 200 with the project's page", addr, host, code, body)
	}
	if code, body := get("/", ""); code != http.StatusUnauthorized || strings.Contains(body, "kiln-web") {
		t.Errorf("GET / at %s without a token: %d %q, want 401", addr, code, body)
	}
	forged := forgeToken(t, name, "default")
	if code, body := get("/", forged); code != http.StatusUnauthorized || strings.Contains(body, "kiln-web") {
		t.Errorf("GET / at %s with a token of an untrusted key: %d %q, want 401", addr, code, body)
	}

	// The project token file, as the app reads it.
	tokenFileMatches := func(when string) {
		t.Helper()
		var last string
		err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			d, err := c.Client.AppsV1().Deployments(platform.TenantNamespace("default")).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			want := d.Spec.Template.Annotations[project.AnnotationToken] + " 0440\n"
			code, body := get("/sha256?path="+project.TokenPath, token)
			last = body
			return code == http.StatusOK && body == want && want != " 0440\n", nil
		})
		if err != nil {
			t.Errorf("%s: the token file in the pod does not have the hash of the pod template's %s annotation with mode 0440 (last answer %q): %v", when, project.AnnotationToken, last, err)
		}
	}
	tokenFileMatches("after create")
	r = e.kiln("project", "rotate-token", "kube", name, "default/web", "--headless")
	expect(t, r, 0)
	tokenFileMatches("after rotate-token")

	r = e.kiln("project", "logs", "kube", name, "default/web", "--headless")
	expect(t, r, 0)
	if !strings.Contains(r.stdout, "kiln-web listening on :8080") || !strings.Contains(r.stdout, "kiln-web GET /sha256") {
		t.Errorf("project logs do not show the container's own lines:\n%s", r)
	}

	r = e.kiln("project", "suspend", "kube", name, "default/web", "--headless")
	expect(t, r, 0)
	if code, body := get("/", token); code == http.StatusOK || strings.Contains(body, "kiln-web") {
		t.Errorf("after suspend, GET / with the tenant's token: %d %q, want the project not served", code, body)
	}

	r = e.kiln("destroy", "kube", name, "--yes", "--headless")
	expect(t, r, 0)
	pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: platform.LabelManagedBy + "=kiln"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 {
		t.Errorf("after destroy, %d pods of kiln remain (first %s/%s)", len(pods.Items), pods.Items[0].Namespace, pods.Items[0].Name)
	}
}

// forgeToken is a well-formed tenant token of cluster for tenant, signed by
// a key no cluster trusts.
func forgeToken(t *testing.T, cluster, tenant string) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	id, err := creds.KeyID(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := creds.SignToken(key, id, cluster, tenant, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Package testcluster starts a real, local Kubernetes control plane for tests
// and for the demo: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok (which simulates nodes and the pods on them), and
// with Options.RealNode a real node beside the fake ones (realnode.go).
//
// The binaries come from hack/testbin (built by `make testbin` into
// .cache/testbin). Every cluster lives on free loopback ports with its state
// in its own directory, so several can run at once. Child processes run in
// their own process group and get SIGKILL when the process that started them
// dies, so a killed test binary leaves nothing behind.
package testcluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
)

// Options configure a cluster.
type Options struct {
	// Nodes is the number of fake kwok nodes (default 1).
	Nodes int
	// ContextName names the kubeconfig context, cluster and user (default "kiln-test").
	ContextName string
	// Dir holds the cluster's state. Default: a new temp dir, removed by Stop.
	// A given Dir is kept by Stop (the caller owns it).
	Dir string
	// BinDir holds the control-plane binaries. Default: $KILN_TESTBIN_DIR,
	// else .cache/testbin at the root of the kiln checkout.
	BinDir string
	// ExtraStages is kwok Stage YAML appended to the default stages, e.g. a
	// stage that keeps pods of a marked image from ever becoming ready.
	ExtraStages string
	// StartTimeout bounds the whole start (default 2 minutes).
	StartTimeout time.Duration
	// RealNode adds a real node beside the kwok nodes: containerd, a
	// kubelet and kube-proxy on this machine (see realnode.go, and
	// RealNodePrereqs for what it needs: root, Debian's containerd, runc,
	// containernetworking-plugins, iptables; `make testbin-realnode`).
	// Only pods pinned to it (PinToRealNode) run there, from images
	// imported with ImportImage. One real node per machine at a time: a
	// second waits for the first to stop.
	RealNode bool
	// RealNodeOnly makes the real node the cluster's only node (it implies
	// RealNode): no kwok node, and the real node has no taint, so every
	// pod — kiln's own, unchanged — is scheduled there and really runs.
	// Its images must be imported before the pods that use them start
	// (nothing is pulled). The demo runs this way (hack/cluster).
	RealNodeOnly bool
	// RealNodeHolder, for a real node that runs until someone stops it
	// (the demo's), says who holds it and how to stop it: another Start
	// that wants a real node then fails at once with these words instead
	// of waiting for it.
	RealNodeHolder string
	// ControllerQPS, if set, is the controller-manager's request rate to
	// the API server (--kube-api-qps, burst twice that; its default is
	// 20): at 10,000 Deployments the default needs most of an hour to
	// create their ReplicaSets and pods, so a benchmark at that scale
	// would measure against an API server still busy with them.
	ControllerQPS int
}

// Cluster is a running control plane.
type Cluster struct {
	// Dir is the state directory (logs, certs, etcd data, kubeconfig).
	Dir string
	// Kubeconfig is the admin kubeconfig, also written to KubeconfigPath.
	Kubeconfig     []byte
	KubeconfigPath string
	ContextName    string
	RESTConfig     *rest.Config
	Client         kubernetes.Interface
	// Server is the API server URL.
	Server string
	// PodLogPath is the log of every container of every pod, as kwok
	// serves it to pods/log (CRI log format: see AppendPodLog).
	PodLogPath string

	ownDir   bool
	procs    []*proc
	stopOnce sync.Once
	stopErr  error
	real     *realNode
}

// Start brings up a control plane and returns once the API server is ready
// and every fake node is Ready and untainted.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if opts.RealNodeOnly {
		opts.RealNode, opts.Nodes = true, 0
	} else if opts.Nodes <= 0 {
		opts.Nodes = 1
	}
	if opts.ContextName == "" {
		opts.ContextName = "kiln-test"
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 2 * time.Minute
		if opts.RealNode {
			// Builds the pause image, starts containerd, waits for the
			// kubelet to register.
			opts.StartTimeout = 5 * time.Minute
		}
	}
	bin, err := binDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: opts.Dir, ContextName: opts.ContextName}
	if c.Dir == "" {
		c.Dir, err = os.MkdirTemp("", "kiln-testcluster-")
		if err != nil {
			return nil, err
		}
		c.ownDir = true
	} else if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	// One real node per machine (the kube-proxy rules, the bridge and the
	// pod network are the host's): its lock is taken first, with the
	// caller's deadline, not StartTimeout, which bounds the start once the
	// machine is free.
	var realLock *os.File
	if opts.RealNode {
		if err := realNodeAvailable(bin); err != nil {
			return nil, err
		}
		if realLock, err = lockRealNode(ctx, opts.RealNodeHolder); err != nil {
			return nil, err
		}
		defer func() {
			if c.real == nil {
				realLock.Close()
			}
		}()
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	etcdPort, etcdPeer, apiPort, kwokPort := ports[0], ports[1], ports[2], ports[3]
	c.Server = "https://127.0.0.1:" + strconv.Itoa(apiPort)

	token := randomHex(24)
	if err := c.writeSecrets(token); err != nil {
		return nil, err
	}

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	if err := c.run(ctx, bin, "etcd",
		"--name=kiln",
		"--data-dir="+c.path("etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls=http://127.0.0.1:"+strconv.Itoa(etcdPeer),
		"--initial-advertise-peer-urls=http://127.0.0.1:"+strconv.Itoa(etcdPeer),
		"--initial-cluster=kiln=http://127.0.0.1:"+strconv.Itoa(etcdPeer),
		"--unsafe-no-fsync", // test data: durability is not worth the latency
		"--log-level=warn",
	); err != nil {
		return nil, err
	}

	if err := c.run(ctx, bin, "kube-apiserver",
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none", // loopback cannot be a kubernetes Service endpoint
		"--secure-port="+strconv.Itoa(apiPort),
		"--cert-dir="+c.path("certs"),
		"--token-auth-file="+c.path("tokens.csv"),
		"--authorization-mode=Node,RBAC",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+c.path("sa.key"),
		"--service-account-signing-key-file="+c.path("sa.key"),
		"--allow-privileged=true",
		// Pod Security admission (on by default; named so a test relies on it
		// knowingly): kiln labels its namespaces restricted.
		"--enable-admission-plugins=PodSecurity",
		"--enable-priority-and-fairness=false",
		// pods/log and exec reach a kubelet (kwok's, or the real node's on
		// its bridge address) at its node's InternalIP.
		"--kubelet-preferred-address-types=InternalIP",
		"--profiling=false",
		"--v=0",
	); err != nil {
		return nil, err
	}

	// The API server generates a self-signed serving certificate for
	// 127.0.0.1/localhost in --cert-dir; it is its own CA.
	ca, err := waitFile(ctx, c.path("certs", "apiserver.crt"), c.procs[len(c.procs)-1])
	if err != nil {
		return nil, err
	}
	if err := c.writeKubeconfig(ca, token); err != nil {
		return nil, err
	}
	if err := c.waitReady(ctx); err != nil {
		return nil, err
	}

	kc := "--kubeconfig=" + c.KubeconfigPath
	kcm := []string{kc,
		"--controllers=*,-nodeipam,-nodelifecycle,-serviceaccount-token",
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
		"--concurrent-deployment-syncs=10",
		"--concurrent-replicaset-syncs=10",
		"--v=0",
	}
	if opts.ControllerQPS > 0 {
		kcm = append(kcm, "--kube-api-qps="+strconv.Itoa(opts.ControllerQPS), "--kube-api-burst="+strconv.Itoa(2*opts.ControllerQPS))
	}
	if err := c.run(ctx, bin, "kube-controller-manager", kcm...); err != nil {
		return nil, err
	}
	if err := c.run(ctx, bin, "kube-scheduler", kc,
		"--leader-elect=false",
		"--secure-port=0",
		"--v=0",
	); err != nil {
		return nil, err
	}
	stages, err := os.ReadFile(filepath.Join(bin, "kwok-stages.yaml"))
	if err != nil {
		return nil, fmt.Errorf("read kwok stages (run `make testbin`): %w", err)
	}
	if opts.ExtraStages != "" {
		stages = append(stages, []byte("\n---\n"+opts.ExtraStages)...)
	}
	// Every container's log is PodLogPath (CRI log format), followed: the
	// API server proxies pods/log to kwok's kubelet-like server at the
	// node's InternalIP and daemonEndpoints port (--node-port), over TLS
	// (it does not verify the kubelet's certificate without
	// --kubelet-certificate-authority).
	c.PodLogPath = c.path("pod.log")
	if err := os.WriteFile(c.PodLogPath, nil, 0o600); err != nil {
		return nil, err
	}
	stages = append(stages, []byte(fmt.Sprintf(`
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: every-pod
spec:
  selector: {}
  logs:
  - logsFile: %q
    previousLogsFile: %q
    follow: true
`, c.PodLogPath, c.PodLogPath))...)
	if err := os.WriteFile(c.path("kwok.yaml"), stages, 0o600); err != nil {
		return nil, err
	}
	kwokArgs := []string{kc,
		"--config=" + c.path("kwok.yaml"),
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--server-address=127.0.0.1:" + strconv.Itoa(kwokPort),
		"--cidr=10.244.0.0/16",
		"--node-ip=127.0.0.1",
		"--node-port=" + strconv.Itoa(kwokPort),
		"--tls-cert-file=" + c.path("certs", "apiserver.crt"),
		"--tls-private-key-file=" + c.path("certs", "apiserver.key"),
	}
	if err := c.createNodes(ctx, opts.Nodes); err != nil {
		return nil, err
	}
	// kwok v0.8.0 sometimes dies at start-up with "fatal error: concurrent
	// map writes" (a race in its CEL registry, github.com/wzshiming/easycel):
	// a kwok that exits before the nodes are ready is started again, a few
	// times, its earlier log kept in kwok.log.
	const kwokStarts = 3
	for attempt := 1; ; attempt++ {
		err := c.run(ctx, bin, "kwok", kwokArgs...)
		if err == nil {
			err = c.waitNodes(ctx, opts.Nodes)
		}
		if err == nil {
			break
		}
		kwok := c.procs[len(c.procs)-1]
		if kwok.name != "kwok" || kwok.exited() == nil || attempt == kwokStarts || ctx.Err() != nil {
			return nil, err
		}
		c.procs = c.procs[:len(c.procs)-1]
	}
	if opts.RealNode {
		if err := c.startRealNode(ctx, bin, !opts.RealNodeOnly, realLock); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Cluster) path(elem ...string) string {
	return filepath.Join(append([]string{c.Dir}, elem...)...)
}

// writeSecrets writes the static admin token file and the service-account
// signing key the API server needs.
func (c *Cluster) writeSecrets(token string) error {
	csv := fmt.Sprintf("%s,kiln-admin,kiln-admin,\"system:masters\"\n", token)
	if err := os.WriteFile(c.path("tokens.csv"), []byte(csv), 0o600); err != nil {
		return err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(c.path("sa.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

func (c *Cluster) writeKubeconfig(ca []byte, token string) error {
	name := c.ContextName
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: c.Server, CertificateAuthorityData: ca}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	c.Kubeconfig = data
	c.KubeconfigPath = c.path("kubeconfig")
	if err := os.WriteFile(c.KubeconfigPath, data, 0o600); err != nil {
		return err
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = 200, 400
	c.RESTConfig = rc
	c.Client, err = kubernetes.NewForConfig(rc)
	return err
}

// waitReady polls /readyz: the API server is a process we just started, there
// is nothing to watch yet.
func (c *Cluster) waitReady(ctx context.Context) error {
	api := c.procs[len(c.procs)-1]
	var last error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := api.exited(); err != nil {
			return false, err
		}
		body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			last = fmt.Errorf("%w: %s", err, bytes.TrimSpace(body))
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("kube-apiserver not ready (last: %v): %w\n%s", last, err, api.logTail())
	}
	return nil
}

// createNodes creates the fake nodes kwok manages.
func (c *Cluster) createNodes(ctx context.Context, n int) error {
	for i := 0; i < n; i++ {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        fmt.Sprintf("kwok-node-%d", i),
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{
				"type":                   "kwok",
				"kubernetes.io/hostname": fmt.Sprintf("kwok-node-%d", i),
				"kubernetes.io/os":       "linux",
			},
		}}
		if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", node.Name, err)
		}
	}
	return nil
}

// waitNodes waits until kwok reports the n fake nodes ready and removes the
// not-ready taint the API server adds at creation (the node lifecycle
// controller that would remove it is disabled: kwok nodes have no kubelet).
func (c *Cluster) waitNodes(ctx context.Context, n int) error {
	kwok := c.procs[len(c.procs)-1]
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := kwok.exited(); err != nil {
			return false, err
		}
		nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := 0
		for i := range nodes.Items {
			nd := &nodes.Items[i]
			if !nodeReady(nd) {
				continue
			}
			if len(nd.Spec.Taints) > 0 {
				if err := untaint(ctx, c.Client, nd.Name); err != nil {
					return false, err
				}
			}
			ready++
		}
		return ready == n, nil
	})
	if err != nil {
		return fmt.Errorf("fake nodes not ready: %w\n%s", err, kwok.logTail())
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func untaint(ctx context.Context, cs kubernetes.Interface, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Taints = nil
		_, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// Stop ends every child process (SIGTERM to its process group, SIGKILL after
// a grace period) and removes the state dir when Start created it.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		var errs []error
		// The real node first (its pods, mounts and host network state),
		// while the API server still answers the kubelet.
		errs = append(errs, c.stopRealNode())
		// Reverse start order: kwok and controllers before the API server,
		// the API server before etcd.
		for i := len(c.procs) - 1; i >= 0; i-- {
			if err := c.procs[i].stop(10 * time.Second); err != nil {
				errs = append(errs, err)
			}
		}
		if c.ownDir {
			errs = append(errs, os.RemoveAll(c.Dir))
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// PIDs returns the process ids of the control-plane processes.
func (c *Cluster) PIDs() []int {
	var pids []int
	for _, p := range c.procs {
		pids = append(pids, p.cmd.Process.Pid)
	}
	return pids
}

// freePorts returns n ports nothing listens on, for servers started next.
// They are picked at random in [portsLow, portsHigh), not by the kernel:
// a port of the kernel's ephemeral range (ip_local_port_range, 32768 and
// up here), free when picked, can be taken by any outgoing connection of
// the suites running beside this one before the server binds it (a CI run
// failed with kube-apiserver's "bind: address already in use"). The range
// stays below the NodePorts (30000-32767, which the real node's
// kube-proxy acts on) and above the components' default ports (10250,
// 10256, 10257, 10259). The kernel's pick is the fallback when the
// ephemeral range reaches into it or no port there was free.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	hi := min(portsHigh, ephemeralLow())
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		addr := "127.0.0.1:0"
		random := tries < 200 && hi > portsLow
		if random {
			addr = "127.0.0.1:" + strconv.Itoa(portsLow+mrand.IntN(hi-portsLow))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if random {
				continue // taken: pick again
			}
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

const portsLow, portsHigh = 20000, 30000

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// where it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return lo
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// binDir finds the control-plane binaries.
func binDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("KILN_TESTBIN_DIR")
	}
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, ".cache", "testbin")
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kwok-stages.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("control-plane binary %s missing in %s: run `make testbin` first", b, dir)
		}
	}
	return dir, nil
}

// RepoRoot finds the root of the kiln checkout by walking up from the
// working directory to the go.mod of module github.com/kilnctl/kiln.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(data, []byte("module github.com/kilnctl/kiln\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the kiln checkout (go.mod of github.com/kilnctl/kiln) above the working directory; set KILN_TESTBIN_DIR")
		}
		dir = parent
	}
}

// AppendPodLog appends lines to every container's log (PodLogPath) in the
// CRI log format kwok reads; followers of pods/log see them.
func (c *Cluster) AppendPodLog(lines ...string) error {
	f, err := os.OpenFile(c.PodLogPath, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	for _, l := range lines {
		if _, err := fmt.Fprintf(f, "%s stdout F %s\n", time.Now().UTC().Format(time.RFC3339Nano), l); err != nil {
			_ = f.Close()
			return err
		}
	}
	return f.Close()
}

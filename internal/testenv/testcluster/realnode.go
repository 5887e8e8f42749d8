package testcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// The real node (Options.RealNode): a kubelet from the pinned module against
// Debian's containerd and runc, the CNI bridge, host-local and portmap
// plugins, and kube-proxy in iptables mode, all on this machine. Its pods
// are real processes with real network namespaces; the kwok nodes beside it
// stay fake.
const (
	// RealNodeName is the real node's name.
	RealNodeName = "kiln-real-0"
	// RealNodeLabel (value "true") marks the real node, for a nodeSelector.
	RealNodeLabel = "kiln.dev/real-node"
	// RealNodeTaint (value "true", NoSchedule) keeps every pod that does not
	// tolerate it off the real node: a pod meant for kwok (an image no
	// registry here serves) must not land on a node that really pulls it.
	// PinToRealNode adds both the selector and the toleration.
	RealNodeTaint = "kiln.dev/real-node"
	// RealPodCIDR is the real node's pod network. kwok's fake pod IPs come
	// from 10.244.0.0/16; this range is apart from it, and exists only on
	// the node's bridge on this machine.
	RealPodCIDR = "10.245.0.0/24"
	// RealNodeIP is the address of the node's bridge (the pods' gateway),
	// which the kubelet serves on and reports as the node's InternalIP (a
	// kubelet refuses a loopback node IP).
	RealNodeIP = "10.245.0.1"
	// PauseImage is the sandbox image the real node's containerd runs for
	// every pod, built and imported at start.
	PauseImage = "docker.io/kiln/pause:test"

	// ClusterDNSIP is the kube-system/kube-dns Service's ClusterIP, the
	// nameserver of every real pod: CoreDNS (its kubernetes plugin) on
	// the node's address behind it.
	ClusterDNSIP = "10.96.0.10"
	// ClusterDomain is the real pods' cluster domain.
	ClusterDomain = "cluster.local"

	serviceCIDR   = "10.96.0.0/16"
	kwokPodCIDR   = "10.244.0.0/16"
	realBridge    = "kilnreal0"
	realNodeState = "/run/kiln-realnode"
	cniBinDir     = "/usr/lib/cni"
)

// PinToRealNode makes a pod spec run on the real node: its selector and the
// toleration of its taint.
func PinToRealNode(spec *corev1.PodSpec) {
	if spec.NodeSelector == nil {
		spec.NodeSelector = map[string]string{}
	}
	spec.NodeSelector[RealNodeLabel] = "true"
	spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
		Key: RealNodeTaint, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule,
	})
}

// realNodeBins are the testbin binaries a real node needs beyond the
// control plane (`make testbin-realnode`).
var realNodeBins = []string{"kubelet", "kube-proxy", "kiln-cri-clean", "coredns", "kube-router"}

// RealNodePrereqs reports what this machine lacks to run a real node: root,
// and the Debian packages (named in the error) with containerd, runc, the
// CNI plugins, iptables and ip. nil means a real node can start.
func RealNodePrereqs() error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (the kubelet, containerd and CNI plugins need it)")
	}
	pkgs := map[string][]string{
		"containerd":                  {"containerd", "containerd-shim-runc-v2", "ctr"},
		"runc":                        {"runc"},
		"iptables":                    {"iptables", "iptables-save", "iptables-restore"},
		"iproute2":                    {"ip"},
		"ipset":                       {"ipset"},
		"containernetworking-plugins": nil,
	}
	var need []string
	for pkg, cmds := range pkgs {
		for _, c := range cmds {
			if _, err := exec.LookPath(c); err != nil {
				need = append(need, pkg)
				break
			}
		}
	}
	for _, p := range []string{"bridge", "host-local", "portmap", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			need = append(need, "containernetworking-plugins")
			break
		}
	}
	if len(need) > 0 {
		sort.Strings(need)
		missing = append(missing, "the Debian packages "+strings.Join(need, " ")+" (apt-get install "+strings.Join(need, " ")+")")
	}
	if len(missing) > 0 {
		return fmt.Errorf("a real node needs %s", strings.Join(missing, " and "))
	}
	return nil
}

// RealNodeAvailable is RealNodePrereqs and the real node's testbin
// binaries (in $KILN_TESTBIN_DIR or .cache/testbin): nil means Start with
// RealNode can run here.
func RealNodeAvailable() error {
	dir, err := binDir("")
	if err != nil {
		return err
	}
	return realNodeAvailable(dir)
}

func realNodeAvailable(dir string) error {
	if err := RealNodePrereqs(); err != nil {
		return err
	}
	for _, b := range realNodeBins {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return fmt.Errorf("real-node binary %s missing in %s: run `make testbin-realnode`", b, dir)
		}
	}
	return nil
}

// realNode is the running real node.
type realNode struct {
	st realNodeRecord
	// tainted: the node registers with RealNodeTaint (false with
	// Options.RealNodeOnly, where it is the only node).
	tainted bool
	lock    *os.File
	procs   []*proc // containerd, kubelet, kube-proxy in start order
}

// realNodeRecord is what teardown needs, written to /run/kiln-realnode so
// that the next real node can tear down what a killed test left.
type realNodeRecord struct {
	Dir    string `json:"dir"`
	BinDir string `json:"binDir"`
	// Sysctls are the host's values of those the kubelet and the CNI
	// bridge plugin set (path under /proc/sys -> value), put back on
	// teardown.
	Sysctls map[string]string `json:"sysctls"`
}

// hostSysctls are set by the kubelet (vm.overcommit_memory, kernel.panic,
// kernel.panic_on_oops) and the bridge plugin (ip_forward).
var hostSysctls = []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops", "net/ipv4/ip_forward"}

func (r realNodeRecord) path(elem ...string) string {
	return filepath.Join(append([]string{r.Dir, "realnode"}, elem...)...)
}

// socket is containerd's: under /run, not the cluster dir, which can be too
// deep for a unix socket path (108 bytes); one real node runs at a time.
func (r realNodeRecord) socket() string { return filepath.Join(realNodeState, "containerd.sock") }
func (r realNodeRecord) endpoint() string {
	return "unix://" + r.socket()
}

// startRealNode starts containerd, the kubelet and kube-proxy, after the
// control plane, and waits for the node to be Ready.
// It owns lock, the machine's real-node lock (lockRealNode), from here on.
func (c *Cluster) startRealNode(ctx context.Context, bin string, tainted bool, lock *os.File) error {
	rn := &realNode{st: realNodeRecord{Dir: c.Dir, BinDir: bin}, tainted: tainted, lock: lock}
	c.real = rn
	if err := recoverRealNode(); err != nil {
		return fmt.Errorf("tear down the real node a killed test left: %w", err)
	}
	rn.st.Sysctls = map[string]string{}
	for _, k := range hostSysctls {
		if v, err := os.ReadFile("/proc/sys/" + k); err == nil {
			rn.st.Sysctls[k] = strings.TrimSpace(string(v))
		}
	}
	rec, _ := json.Marshal(rn.st)
	if err := os.WriteFile(filepath.Join(realNodeState, "state.json"), rec, 0o600); err != nil {
		return err
	}
	st := rn.st
	for _, d := range []string{"containerd/root", "containerd/state", "cni/net.d", "cni/ipam", "kubelet", "pods"} {
		if err := os.MkdirAll(st.path(d), 0o700); err != nil {
			return err
		}
	}
	// The bridge first, with the node's address: the kubelet serves on it,
	// and the service and kwok pod ranges are routed onto it, so a packet to
	// a ClusterIP that kube-proxy has not (yet) translated, or to a fake
	// kwok pod, stays on this machine instead of taking the default route.
	for _, args := range [][]string{
		{"link", "add", realBridge, "type", "bridge"},
		{"addr", "add", RealNodeIP + "/24", "dev", realBridge},
		{"link", "set", realBridge, "up"},
		{"route", "add", serviceCIDR, "dev", realBridge},
		{"route", "add", kwokPodCIDR, "dev", realBridge},
	} {
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	if err := rn.writeConfigs(); err != nil {
		return err
	}
	_ = os.Remove(st.socket())
	p, err := c.runReal(ctx, "containerd", "containerd", "--config", st.path("containerd.toml"))
	if err != nil {
		return err
	}
	if err := waitSocket(ctx, st.socket(), p); err != nil {
		return err
	}
	if err := c.importPause(ctx); err != nil {
		return err
	}

	ports, err := freePorts(4)
	if err != nil {
		return err
	}
	if err := rn.writeKubeletConfig(ports[0], ports[1]); err != nil {
		return err
	}
	if _, err := c.runReal(ctx, "kubelet", filepath.Join(bin, "kubelet"),
		"--config="+st.path("kubelet.yaml"),
		"--kubeconfig="+c.KubeconfigPath,
		"--root-dir="+st.path("kubelet"),
		"--cert-dir="+st.path("kubelet", "pki"),
		"--hostname-override="+RealNodeName,
		"--node-ip="+RealNodeIP,
		"--node-labels="+RealNodeLabel+"=true",
		"--v=1",
	); err != nil {
		return err
	}
	if _, err := c.runReal(ctx, "kube-proxy", filepath.Join(bin, "kube-proxy"),
		"--kubeconfig="+c.KubeconfigPath,
		"--proxy-mode=iptables",
		"--hostname-override="+RealNodeName,
		"--cluster-cidr="+RealPodCIDR,
		"--healthz-bind-address=127.0.0.1:"+strconv.Itoa(ports[2]),
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(ports[3]),
		// Leave the host's conntrack sysctls and route_localnet alone.
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
		"--iptables-localhost-nodeports=false",
		"--v=1",
	); err != nil {
		return err
	}
	if err := c.startDNS(ctx, bin); err != nil {
		return err
	}
	// The node must exist before kube-router starts (it looks itself up).
	if err := c.waitRealNode(ctx); err != nil {
		return err
	}
	// NetworkPolicy: kube-router with only its firewall (iptables and
	// ipset rules for the node's pods); kube-proxy and the CNI bridge do
	// the rest. v2.1.0 has reported security flaws; it runs here only for
	// the local test cluster.
	if _, err := c.runReal(ctx, "kube-router", filepath.Join(bin, "kube-router"),
		"--kubeconfig="+c.KubeconfigPath,
		"--hostname-override="+RealNodeName,
		"--run-firewall=true",
		"--run-router=false",
		"--run-service-proxy=false",
		"--run-loadbalancer=false",
		"--enable-cni=false",
		"--enable-ipv6=false",
		"--service-cluster-ip-range="+serviceCIDR,
		"--health-port=0",
		"--metrics-port=0",
		"--iptables-sync-period=5s",
		"--v=1",
	); err != nil {
		return err
	}
	return nil
}

// runReal starts a real-node process (its log beside the control plane's).
func (c *Cluster) runReal(ctx context.Context, name, path string, args ...string) (*proc, error) {
	n := len(c.procs)
	if !strings.Contains(path, "/") {
		if lp, err := exec.LookPath(path); err == nil {
			path = lp
		}
	}
	err := c.runExe(ctx, name, path, args...)
	// Keep real-node processes apart: they stop before the control plane,
	// with a teardown in between.
	if len(c.procs) > n {
		p := c.procs[len(c.procs)-1]
		c.procs = c.procs[:n]
		c.real.procs = append(c.real.procs, p)
		return p, err
	}
	return nil, err
}

func (rn *realNode) writeConfigs() error {
	st := rn.st
	ctd := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # runc cannot lower oom_score_adj from inside this machine's sandbox
  # ("failed to update /proc/self/oom_score_adj: Permission denied").
  restrict_oom_score_adj = true
  # Pod network namespaces under the node's own state dir (not /run/netns),
  # so a teardown after a crash finds and unmounts every one of them.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
    max_conf_num = 1
`, st.path("containerd", "root"), st.path("containerd", "state"), st.socket(), st.socket()+".ttrpc",
		PauseImage, cniBinDir, st.path("cni", "net.d"))
	if err := os.WriteFile(st.path("containerd.toml"), []byte(ctd), 0o600); err != nil {
		return err
	}
	cni := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "kiln-real",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": realBridge, "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": RealPodCIDR, "gateway": RealNodeIP}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": st.path("cni", "ipam"),
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	data, err := json.MarshalIndent(cni, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(st.path("cni", "net.d", "10-kiln-real.conflist"), data, 0o600)
}

func (rn *realNode) writeKubeletConfig(port, healthz int) error {
	st := rn.st
	taints := "registerWithTaints: []\n"
	if rn.tainted {
		taints = fmt.Sprintf("registerWithTaints:\n- key: %s\n  value: \"true\"\n  effect: NoSchedule\n", RealNodeTaint)
	}
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
containerRuntimeEndpoint: %s
# This machine: cgroup v1, no systemd, a sandbox that cannot set up the
# QoS cgroup tree or node allocatable enforcement.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
localStorageCapacityIsolation: false
%s# The images are imported, not pulled: never collect them, never evict for
# a disk the other tests fill.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "50Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
serializeImagePulls: false
podPidsLimit: -1
resolvConf: /etc/resolv.conf
podLogsDir: %s
clusterDNS:
- %s
clusterDomain: %s
nodeStatusUpdateFrequency: 2s
syncFrequency: 5s
fileCheckFrequency: 5s
shutdownGracePeriod: 0s
`, RealNodeIP, port, healthz, st.endpoint(), taints, st.path("pods"), ClusterDNSIP, ClusterDomain)
	return os.WriteFile(st.path("kubelet.yaml"), []byte(cfg), 0o600)
}

// importPause builds the sandbox image and imports it before the kubelet
// creates any pod (containerd would try to pull it).
func (c *Cluster) importPause(ctx context.Context) error {
	return c.ImportGoImage(ctx, PauseImage, "github.com/kilnctl/kiln/internal/testenv/testcluster/images/pause")
}

// waitRealNode waits for the kubelet to register a Ready node and removes
// the taints the API server adds at registration (the node lifecycle
// controller that would is disabled), keeping RealNodeTaint if the node
// is tainted.
func (c *Cluster) waitRealNode(ctx context.Context) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, p := range c.real.procs {
			if err := p.exited(); err != nil {
				return false, err
			}
		}
		n, err := c.Client.CoreV1().Nodes().Get(ctx, RealNodeName, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if !nodeReady(n) {
			last = "not Ready: " + readyMessage(n)
			return false, nil
		}
		for _, t := range n.Spec.Taints {
			if t.Key != RealNodeTaint || !c.real.tainted {
				return false, keepTaint(ctx, c, RealNodeTaint, c.real.tainted)
			}
		}
		return true, nil
	})
	if err != nil {
		var tails []string
		for _, p := range c.real.procs {
			tails = append(tails, p.logTail())
		}
		return fmt.Errorf("real node %s not ready (last: %s): %w\n%s", RealNodeName, last, err, strings.Join(tails, "\n"))
	}
	return nil
}

func readyMessage(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Reason + ": " + c.Message
		}
	}
	return "no Ready condition yet"
}

// keepTaint removes every taint of the real node but key (that one too
// unless keep).
func keepTaint(ctx context.Context, c *Cluster, key string, keep bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, RealNodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var kept []corev1.Taint
		for _, t := range n.Spec.Taints {
			if t.Key == key && keep {
				kept = append(kept, t)
			}
		}
		n.Spec.Taints = kept
		_, err = c.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// stopRealNode tears the real node down: kube-proxy and the kubelet first,
// then every pod through the CRI (CNI DEL, netns unmounted), containerd,
// any shim left, the mounts under the node's dir, kube-proxy's and the
// kubelet's iptables chains, the bridge and its routes.
func (c *Cluster) stopRealNode() error {
	rn := c.real
	if rn == nil {
		return nil
	}
	var errs []error
	var ctd *proc
	for i := len(rn.procs) - 1; i >= 0; i-- {
		if rn.procs[i].name == "containerd" {
			ctd = rn.procs[i]
			continue
		}
		if err := rn.procs[i].stop(10 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if ctd != nil && ctd.exited() == nil {
		errs = append(errs, criClean(rn.st))
		errs = append(errs, ctd.stop(10*time.Second))
	}
	errs = append(errs, teardownHost(rn.st))
	if rn.lock != nil {
		_ = os.Remove(filepath.Join(realNodeState, "state.json"))
		_ = os.Remove(filepath.Join(realNodeState, "holder")) // ours, if any: a holder's words never outlive its lock
		_ = rn.lock.Close()
	}
	c.real = nil
	return errors.Join(errs...)
}

// criClean stops and removes every pod of the node's containerd.
//
// containerd creates its socket before its CRI plugin is initialized (it
// answers "server is not initialized yet" meanwhile, seen on a loaded
// machine right after a restart): that answer is waited out.
func criClean(st realNodeRecord) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		out, err := exec.CommandContext(ctx, filepath.Join(st.BinDir, "kiln-cri-clean"), st.endpoint()).CombinedOutput()
		if err == nil {
			return nil
		}
		if !strings.Contains(string(out), "server is not initialized yet") || ctx.Err() != nil {
			return fmt.Errorf("kiln-cri-clean: %v: %s", err, out)
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// teardownHost removes what the real node left on the host once its
// processes are gone.
func teardownHost(st realNodeRecord) error {
	var errs []error
	// A shim (containerd-shim-runc-v2 -address <our socket>) outlives
	// containerd by design; with no pod left it has nothing to keep.
	errs = append(errs, killShims(st.socket()))
	errs = append(errs, unmountUnder(st.Dir))
	// kube-proxy's own clean-up removes its chains; the kubelet's chains
	// are not shared with anything else on this machine.
	if _, err := os.Stat(filepath.Join(st.BinDir, "kube-proxy")); err == nil {
		_ = exec.Command(filepath.Join(st.BinDir, "kube-proxy"), "--cleanup", "--proxy-mode=iptables").Run()
	}
	if _, err := os.Stat(filepath.Join(st.BinDir, "kube-router")); err == nil {
		_ = exec.Command(filepath.Join(st.BinDir, "kube-router"), "--cleanup-config").Run()
	}
	for _, ipt := range []string{"iptables", "ip6tables"} {
		errs = append(errs, dropKubeChains(ipt))
	}
	errs = append(errs, destroyKubeIPSets())
	// Deleting the bridge takes its address and the routes onto it.
	if err := exec.Command("ip", "link", "show", realBridge).Run(); err == nil {
		if out, err := exec.Command("ip", "link", "del", realBridge).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip link del %s: %v: %s", realBridge, err, out))
		}
	}
	for k, v := range st.Sysctls {
		_ = os.WriteFile("/proc/sys/"+k, []byte(v+"\n"), 0o644)
	}
	_ = os.Remove(st.socket() + ".ttrpc")
	return errors.Join(errs...)
}

// dropKubeChains removes every KUBE-* chain (the kubelet's canaries and
// firewall, what kube-proxy's clean-up leaves) and CNI-HOSTPORT-* chain
// (the portmap plugin's), with the rules that jump to them, table by table
// through iptables-save and iptables-restore. Nothing else on this machine
// makes chains of those names: one real node runs at a time.
func dropKubeChains(ipt string) error {
	if _, err := exec.LookPath(ipt + "-save"); err != nil {
		return nil
	}
	out, err := exec.Command(ipt + "-save").Output()
	if err != nil {
		return fmt.Errorf("%s-save: %w", ipt, err)
	}
	ours := func(chain string) bool {
		return strings.HasPrefix(chain, "KUBE-") || strings.HasPrefix(chain, "CNI-HOSTPORT-")
	}
	var restore, table []string
	changed := false
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "*"):
			table, changed = []string{line}, false
			continue
		case line == "COMMIT":
			if changed {
				restore = append(restore, table...)
				restore = append(restore, "COMMIT")
			}
			table = nil
			continue
		case table == nil:
			continue
		case strings.HasPrefix(line, ":") && ours(strings.TrimPrefix(f[0], ":")):
			changed = true
			continue
		case strings.HasPrefix(line, "-A ") && len(f) > 1 && ours(f[1]):
			changed = true
			continue
		case strings.HasPrefix(line, "-A "):
			drop := false
			for i := 0; i+1 < len(f); i++ {
				if (f[i] == "-j" || f[i] == "-g") && ours(f[i+1]) {
					drop = true
				}
			}
			if drop {
				changed = true
				continue
			}
		}
		table = append(table, line)
	}
	if len(restore) == 0 {
		return nil
	}
	cmd := exec.Command(ipt + "-restore")
	cmd.Stdin = strings.NewReader(strings.Join(restore, "\n") + "\n")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s-restore: %v: %s", ipt, err, b)
	}
	return nil
}

// destroyKubeIPSets destroys kube-router's ipsets (KUBE-*, kube-router-*),
// once no iptables rule refers to them.
func destroyKubeIPSets() error {
	if _, err := exec.LookPath("ipset"); err != nil {
		return nil
	}
	out, err := exec.Command("ipset", "list", "-n").Output()
	if err != nil {
		return nil
	}
	var errs []error
	for _, name := range strings.Fields(string(out)) {
		if strings.HasPrefix(name, "KUBE-") || strings.HasPrefix(name, "kube-router-") {
			if b, err := exec.Command("ipset", "destroy", name).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("ipset destroy %s: %v: %s", name, err, b))
			}
		}
	}
	return errors.Join(errs...)
}

// killShims kills the containerd shims started for socket.
func killShims(socket string) error {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := bytes.Split(bytes.TrimRight(cmdline, "\x00"), []byte{0})
		if len(args) == 0 || filepath.Base(string(args[0])) != "containerd-shim-runc-v2" {
			continue
		}
		for i := 0; i+1 < len(args); i++ {
			if string(args[i]) == "-address" && string(args[i+1]) == socket {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				break
			}
		}
	}
	return nil
}

// unmountUnder lazily unmounts every mount point under dir, deepest first
// (pod volumes, container rootfs, sandbox shm).
func unmountUnder(dir string) error {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			points = append(points, mp)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, mp := range points {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
		}
	}
	return errors.Join(errs...)
}

func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// lockRealNode takes the machine's real-node lock, waiting for another
// test's real node to stop. holder, when not empty, says who holds it for
// good (the demo's cluster, which runs until `make cluster-down`): it is
// written beside the lock, and a waiter that finds it fails at once,
// naming it, instead of waiting out its deadline.
func lockRealNode(ctx context.Context, holder string) (*os.File, error) {
	if err := os.MkdirAll(realNodeState, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(realNodeState, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	holderPath := filepath.Join(realNodeState, "holder")
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			if holder == "" {
				err = os.Remove(holderPath)
				if errors.Is(err, os.ErrNotExist) {
					err = nil
				}
			} else {
				err = os.WriteFile(holderPath, []byte(holder), 0o600)
			}
			if err != nil {
				f.Close()
				return nil, err
			}
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, err
		}
		if who, err := os.ReadFile(holderPath); err == nil && len(who) > 0 {
			f.Close()
			return nil, fmt.Errorf("this machine's real node is held by %s", who)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("another real node runs on this machine (lock %s): %w", f.Name(), ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// recoverRealNode tears down the real node a killed test left (its record
// is still there although nobody holds the lock): it starts that node's
// containerd again to remove its pods the CRI way, then cleans the host.
func recoverRealNode() error {
	data, err := os.ReadFile(filepath.Join(realNodeState, "state.json"))
	if errors.Is(err, os.ErrNotExist) {
		// Nothing recorded; a bridge left by a crash before the record
		// existed still goes.
		return teardownHost(realNodeRecord{Dir: "/nonexistent-kiln-realnode"})
	}
	if err != nil {
		return err
	}
	var st realNodeRecord
	if err := json.Unmarshal(data, &st); err != nil {
		return err
	}
	var errs []error
	if _, err := os.Stat(st.path("containerd.toml")); err == nil {
		// Its shims still run: the new containerd reconnects to them, and
		// the CRI stops their pods.
		_ = os.Remove(st.socket()) // the dead containerd's: wait for the new one's
		cmd := exec.Command("containerd", "--config", st.path("containerd.toml"))
		cmd.SysProcAttr = sysProcAttr()
		if err := cmd.Start(); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if waitSocket(ctx, st.socket(), nil) == nil {
				errs = append(errs, criClean(st))
			}
			cancel()
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		}
	}
	errs = append(errs, teardownHost(st))
	if strings.HasPrefix(filepath.Base(st.Dir), "kiln-testcluster-") {
		_ = os.RemoveAll(st.Dir)
	}
	_ = os.Remove(filepath.Join(realNodeState, "state.json"))
	return errors.Join(errs...)
}

// waitSocket waits for a unix socket to appear.
func waitSocket(ctx context.Context, path string, p *proc) error {
	for {
		if fi, err := os.Stat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return nil
		}
		if p != nil {
			if err := p.exited(); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			tail := ""
			if p != nil {
				tail = p.logTail()
			}
			return fmt.Errorf("waiting for %s: %w\n%s", path, ctx.Err(), tail)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// startDNS runs CoreDNS on the node's address (port 53, the kubernetes
// plugin reading the API with the admin kubeconfig, nothing forwarded) and
// puts it behind the kube-system/kube-dns Service at ClusterDNSIP: a
// selector-less Service whose EndpointSlice names the node's address.
func (c *Cluster) startDNS(ctx context.Context, bin string) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	corefile := fmt.Sprintf(`.:53 {
    bind %s
    errors
    health 127.0.0.1:%d
    ready 127.0.0.1:%d
    kubernetes %s in-addr.arpa ip6.arpa {
        kubeconfig %s %s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 5
}
`, RealNodeIP, ports[0], ports[1], ClusterDomain, c.KubeconfigPath, c.ContextName)
	path := c.real.st.path("Corefile")
	if err := os.WriteFile(path, []byte(corefile), 0o600); err != nil {
		return err
	}
	dns, err := c.runReal(ctx, "coredns", filepath.Join(bin, "coredns"), "-conf", path)
	if err != nil {
		return err
	}
	// Ready once its kubernetes plugin has synced with the API.
	readyURL := "http://127.0.0.1:" + strconv.Itoa(ports[1]) + "/ready"
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := dns.exited(); err != nil {
			return false, err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, readyURL, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("coredns not ready: %w\n%s", err, dns.logTail())
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system", Labels: map[string]string{"k8s-app": "kube-dns"}},
		Spec: corev1.ServiceSpec{ClusterIP: ClusterDNSIP, Ports: []corev1.ServicePort{
			{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53},
			{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53},
		}},
	}
	if _, err := c.Client.CoreV1().Services("kube-system").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create kube-system/kube-dns: %w", err)
	}
	ready, udp, tcp, port := true, corev1.ProtocolUDP, corev1.ProtocolTCP, int32(53)
	names := []string{"dns", "dns-tcp"}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns-real-node", Namespace: "kube-system", Labels: map[string]string{
			discoveryv1.LabelServiceName: "kube-dns",
			discoveryv1.LabelManagedBy:   "testcluster.kiln.dev",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{RealNodeIP},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			NodeName:   ptrTo(RealNodeName),
		}},
		Ports: []discoveryv1.EndpointPort{
			{Name: &names[0], Protocol: &udp, Port: &port},
			{Name: &names[1], Protocol: &tcp, Port: &port},
		},
	}
	if _, err := c.Client.DiscoveryV1().EndpointSlices("kube-system").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the kube-dns EndpointSlice: %w", err)
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }

// realLogs returns the tails of the real node's process logs, for a test
// that reports a pod that did not come up.
func (c *Cluster) realLogs() string {
	if c.real == nil {
		return ""
	}
	var tails []string
	for _, p := range c.real.procs {
		tails = append(tails, p.logTail())
	}
	return strings.Join(tails, "\n")
}

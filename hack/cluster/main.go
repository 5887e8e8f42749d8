// Command cluster runs the local control plane for the demo and for people
// trying kiln:
//
//	go run ./hack/cluster up      # start (idempotent), write .cache/cluster/kubeconfig
//	go run ./hack/cluster images  # build and import the demo's images into the real node
//	go run ./hack/cluster env     # print `export KUBECONFIG=...`
//	go run ./hack/cluster down    # stop and remove its state
//
// `up` starts a background server process that owns the control plane; the
// control-plane processes die with it, so `down` (or killing it) leaves
// nothing behind.
//
// The node: when this machine can run one (root, containerd, runc, the CNI
// plugins, iptables, ipset, ip and `make testbin-realnode`: see
// testcluster.RealNodePrereqs), the cluster's only node is a real one, so
// kiln's gateway and projects really run and answer; otherwise two kwok
// nodes, whose pods only pretend. KILN_DEMO_NODE=kwok or =real chooses
// (real fails if the machine cannot). .cache/cluster/node says which, and
// why.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/internal/testenv/testcluster"
)

const contextName = "kiln-local"

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: cluster up|down|env")
		os.Exit(2)
	}
	root, err := testcluster.RepoRoot()
	if err != nil {
		fail(err)
	}
	dir := filepath.Join(root, ".cache", "cluster")
	switch os.Args[1] {
	case "up":
		err = up(dir)
	case "down":
		err = down(dir)
	case "images":
		err = images(root, dir)
	case "env":
		fmt.Printf("export KUBECONFIG=%s\n", filepath.Join(dir, "kubeconfig"))
	case "serve":
		err = serve(dir)
	default:
		fmt.Fprintln(os.Stderr, "usage: cluster up|down|env|images")
		os.Exit(2)
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "cluster: %v\n", err)
	os.Exit(1)
}

func pidOf(dir string) (int, bool) {
	data, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || syscall.Kill(pid, 0) != nil {
		return 0, false
	}
	return pid, true
}

func up(dir string) error {
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if pid, ok := pidOf(dir); ok {
		if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
			fmt.Printf("cluster: already running (pid %d); KUBECONFIG=%s context %s\n", pid, kubeconfig, contextName)
			node, _ := os.ReadFile(filepath.Join(dir, "node"))
			fmt.Printf("cluster: node: %s", node)
			return nil
		}
	}
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logPath := filepath.Join(dir, "cluster.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(self, "serve")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlive this command and its terminal
	if err := cmd.Start(); err != nil {
		return err
	}
	fmt.Printf("cluster: starting control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok) and %s ...\n", nodeWord(nodeMode()))
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(3 * time.Minute)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("control plane failed to start (%v):\n%s", err, log)
		case <-deadline:
			return fmt.Errorf("control plane not ready after 3 minutes; see %s", logPath)
		case <-tick.C:
			if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
				fmt.Printf("cluster: ready; KUBECONFIG=%s context %s\n", kubeconfig, contextName)
				node, _ := os.ReadFile(filepath.Join(dir, "node"))
				fmt.Printf("cluster: node: %s", node)
				return nil
			}
		}
	}
}

func serve(dir string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := os.WriteFile(filepath.Join(dir, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return err
	}
	state := filepath.Join(dir, "state")
	opts := testcluster.Options{Nodes: 2, ContextName: contextName, Dir: state}
	node := "kwok: two fake nodes (pods are scheduled but never run; KILN_DEMO_NODE=kwok)\n"
	switch mode := nodeMode(); mode {
	case "real":
		opts.RealNodeOnly = true
	case "auto":
		if why := testcluster.RealNodeAvailable(); why != nil {
			node = fmt.Sprintf("kwok: two fake nodes (pods are scheduled but never run): %v\n", why)
		} else {
			opts.RealNodeOnly = true
		}
	}
	if opts.RealNodeOnly {
		node = "real: " + testcluster.RealNodeName + ", the only node (containerd, kubelet, kube-proxy, CoreDNS and kube-router's NetworkPolicy firewall on this machine)\n"
		opts.StartTimeout = 5 * time.Minute // builds the pause image
		opts.RealNodeHolder = fmt.Sprintf("the local cluster of `make demo` / `make cluster-up` (hack/cluster, pid %d): `make cluster-down` stops it", os.Getpid())
	}
	c, err := testcluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "node"), []byte(node), 0o600); err != nil {
		return err
	}
	defer func() {
		_ = c.Stop()
		_ = os.RemoveAll(state)
	}()
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), c.Kubeconfig, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "ready"), nil, 0o600); err != nil {
		return err
	}
	fmt.Printf("control plane ready at %s (pids %v)\n", c.Server, c.PIDs())
	<-ctx.Done()
	fmt.Println("stopping control plane")
	return nil
}

// nodeMode is KILN_DEMO_NODE: "real", "kwok" or "auto" (unset).
func nodeMode() string {
	switch m := os.Getenv("KILN_DEMO_NODE"); m {
	case "real", "kwok":
		return m
	default:
		return "auto"
	}
}

func nodeWord(mode string) string {
	switch mode {
	case "real":
		return "a real node"
	case "kwok":
		return "two kwok nodes"
	}
	return "a real node if this machine can run one, else two kwok nodes"
}

// The demo's images, built here: nothing is pulled (there is no registry).
const (
	// DemoWebImage is the demo stack's image (hack/demo-config.yaml): the
	// real node's test web server, run as a numeric non-root user so the
	// Pod Security restricted profile of kiln's namespaces admits it.
	DemoWebImage = "docker.io/kiln/demo-web:1"
	imageUser    = "65532:65532"
)

// images builds and imports, into the running real node, kiln's gateway
// image at the version of bin/kiln (the ref kiln installs: the binary as
// the image's entrypoint, as the release's ko build lays it out) and the
// demo stack's web server. With kwok nodes there is nothing to do.
func images(root, dir string) error {
	node, err := os.ReadFile(filepath.Join(dir, "node"))
	if err != nil {
		return fmt.Errorf("the cluster is not up (run `go run ./hack/cluster up`): %w", err)
	}
	if !strings.HasPrefix(string(node), "real:") {
		fmt.Println("images: kwok nodes run no container: nothing to import")
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	kiln := filepath.Join(root, "bin", "kiln")
	out, err := exec.CommandContext(ctx, kiln, "version", "-o", "json").Output()
	if err != nil {
		return fmt.Errorf("%s version (run `make build`): %w", kiln, err)
	}
	var v struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return fmt.Errorf("%s version -o json: %w", kiln, err)
	}
	scratch := filepath.Join(dir, "images")
	gw := platform.GatewayImage(v.Version)
	img, err := testcluster.BinaryImage(kiln, "/ko-app/kiln", imageUser)
	if err != nil {
		return err
	}
	if err := testcluster.ImportIntoRealNode(ctx, scratch, gw, img); err != nil {
		return err
	}
	fmt.Printf("images: %s (kiln's gateway: bin/kiln)\n", gw)
	web, err := testcluster.BuildGoBinary(ctx, "github.com/kilnctl/kiln/internal/testenv/testcluster/images/web", scratch)
	if err != nil {
		return err
	}
	img, err = testcluster.BinaryImage(web, "/web", imageUser)
	if err != nil {
		return err
	}
	if err := testcluster.ImportIntoRealNode(ctx, scratch, DemoWebImage, img); err != nil {
		return err
	}
	fmt.Printf("images: %s (the demo stack's web server)\n", DemoWebImage)
	return nil
}

func down(dir string) error {
	pid, ok := pidOf(dir)
	if !ok {
		_ = os.RemoveAll(dir)
		fmt.Println("cluster: not running")
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return errors.New("control plane did not stop within 30s; killed it")
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = os.RemoveAll(dir)
	fmt.Println("cluster: stopped")
	return nil
}

// Command cluster runs the local control plane for the demo and for people
// trying kiln:
//
//	go run ./hack/cluster up     # start (idempotent), write .cache/cluster/kubeconfig
//	go run ./hack/cluster env    # print `export KUBECONFIG=...`
//	go run ./hack/cluster down   # stop and remove its state
//
// `up` starts a background server process that owns the control plane; the
// control-plane processes die with it, so `down` (or killing it) leaves
// nothing behind.
package main

import (
	"context"
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

	"github.com/kilnctl/kiln/internal/testcluster"
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
	case "env":
		fmt.Printf("export KUBECONFIG=%s\n", filepath.Join(dir, "kubeconfig"))
	case "serve":
		err = serve(dir)
	default:
		fmt.Fprintln(os.Stderr, "usage: cluster up|down|env")
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
	fmt.Printf("cluster: starting control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok) ...\n")
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
	c, err := testcluster.Start(ctx, testcluster.Options{Nodes: 2, ContextName: contextName, Dir: state})
	if err != nil {
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

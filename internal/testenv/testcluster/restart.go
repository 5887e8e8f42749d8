package testcluster

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// apiServer is the running kube-apiserver's process and its index in procs.
func (c *Cluster) apiServer() (int, *proc, error) {
	for i, p := range c.procs {
		if p.name == "kube-apiserver" {
			return i, p, nil
		}
	}
	return 0, nil, fmt.Errorf("testcluster: no kube-apiserver process")
}

// KillAPIServer kills the API server with SIGKILL, as a crashed or
// failed-over control plane disappears (every connection and watch cut at
// once), and returns once it has exited. etcd, the controllers and kwok
// keep running; StartAPIServer brings it back.
func (c *Cluster) KillAPIServer() error {
	_, p, err := c.apiServer()
	if err != nil {
		return err
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("kube-apiserver (pid %d) did not exit after SIGKILL", p.cmd.Process.Pid)
	}
}

// StartAPIServer starts the API server again, with the flags and on the
// address it had, and returns once it answers /readyz.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	i, p, err := c.apiServer()
	if err != nil {
		return err
	}
	if p.exited() == nil {
		return fmt.Errorf("testcluster: kube-apiserver is still running")
	}
	if err := c.run(ctx, filepath.Dir(p.cmd.Path), p.name, p.cmd.Args[1:]...); err != nil {
		return err
	}
	// The new process takes the old one's place, so Stop keeps its order.
	last := len(c.procs) - 1
	c.procs[i], c.procs = c.procs[last], c.procs[:last]
	api := c.procs[i]
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := api.exited(); err != nil {
			return false, err
		}
		_, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil, nil
	})
}

// StallEtcd stops etcd (SIGSTOP) for d and then lets it go on (SIGCONT):
// a stalled etcd, as a slow disk or a lost quorum makes one, while the API
// server stays up and answers its clients with timeouts and 5xx. It
// returns once etcd runs again.
func (c *Cluster) StallEtcd(ctx context.Context, d time.Duration) error {
	var etcd *proc
	for _, p := range c.procs {
		if p.name == "etcd" {
			etcd = p
		}
	}
	if etcd == nil {
		return fmt.Errorf("testcluster: no etcd process")
	}
	pid := etcd.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return err
	}
	defer func() { _ = syscall.Kill(pid, syscall.SIGCONT) }()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
	}
	return nil
}

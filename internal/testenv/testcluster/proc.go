package testcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// proc is one control-plane child process with its log file.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error // set before done is closed
}

func (c *Cluster) run(ctx context.Context, bin, name string, args ...string) error {
	return c.runExe(ctx, name, filepath.Join(bin, name), args...)
}

// runExe starts exe as the process called name (its log is name.log).
func (c *Cluster) runExe(ctx context.Context, name, exe string, args ...string) error {
	logPath := c.path(name + ".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = c.Dir
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	c.procs = append(c.procs, p)
	// A process that dies at once (bad flag, port taken) is reported here,
	// with its log, rather than as a vague readiness timeout later.
	select {
	case <-p.done:
		return fmt.Errorf("%s exited at start: %v\n%s", name, p.err, p.logTail())
	case <-time.After(50 * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// exited returns an error if the process has ended.
func (p *proc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v\n%s", p.name, p.err, p.logTail())
	default:
		return nil
	}
}

func (p *proc) stop(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, pgid)
	}
}

// logTail returns the last lines of the process log for error messages.
func (p *proc) logTail() string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	const max = 4000
	if len(data) > max {
		data = data[len(data)-max:]
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return fmt.Sprintf("--- %s log (%s) ---\n%s", p.name, p.logPath, data)
}

// waitFile waits for a file the process writes at start-up.
func waitFile(ctx context.Context, path string, p *proc) ([]byte, error) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		data, err := os.ReadFile(path)
		if err == nil && len(data) > 0 {
			return data, nil
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		if err := p.exited(); err != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s: %w\n%s", path, ctx.Err(), p.logTail())
		case <-t.C:
		}
	}
}

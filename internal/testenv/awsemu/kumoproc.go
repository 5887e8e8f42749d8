package awsemu

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Timeouts for stopping a kumo child: first it is asked to exit (stdin
// closed, SIGTERM to its process group), then it is killed.
const (
	stopGrace   = 5 * time.Second
	killTimeout = 5 * time.Second
)

// kumoProc is one running kumoregion child process.
type kumoProc struct {
	region string
	url    *url.URL
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tailBuffer

	done    chan struct{} // closed once cmd.Wait has returned
	waitErr error

	stopOnce sync.Once
	stopErr  error
}

// pid returns the child's process id.
func (p *kumoProc) pid() int { return p.cmd.Process.Pid }

// readyLine is what kumoregion prints once it is listening.
type readyLine struct {
	URL    string `json:"url"`
	Region string `json:"region"`
	PID    int    `json:"pid"`
}

// startKumo starts one kumoregion child for region and waits until it
// reports its URL. ctx bounds only the wait for start-up.
func startKumo(ctx context.Context, bin, region string) (*kumoProc, error) {
	cmd := exec.Command(bin)
	cmd.Env = childEnv(region)
	cmd.SysProcAttr = sysProcAttr()

	p := &kumoProc{
		region: region,
		cmd:    cmd,
		stderr: &tailBuffer{max: 16 << 10},
		done:   make(chan struct{}),
	}
	cmd.Stderr = p.stderr

	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("awsemu: kumo %s: %w", region, err)
	}

	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("awsemu: kumo %s: %w", region, err)
	}

	p.stdin = stdin

	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("awsemu: starting kumo for %s (%s): %w", region, bin, err)
	}

	ready := make(chan readyLine, 1)

	go func() {
		br := bufio.NewReader(stdout)
		if line, err := br.ReadBytes('\n'); err == nil {
			var rl readyLine
			_ = json.Unmarshal(line, &rl) // a bad line fails the URL check
			ready <- rl
		}

		// Keep draining so the child never blocks on a full pipe; Wait may
		// only be called once reading has finished.
		_, _ = io.Copy(io.Discard, br)
		p.waitErr = cmd.Wait()
		close(p.done)
	}()

	select {
	case rl := <-ready:
		u, err := url.Parse(rl.URL)

		switch {
		case err != nil || u.Host == "":
			err = fmt.Errorf("awsemu: kumo for %s reported a bad URL %q", region, rl.URL)
		case rl.Region != region:
			err = fmt.Errorf("awsemu: kumo started for %s reports region %q", region, rl.Region)
		}

		if err != nil {
			_ = p.stop()

			return nil, err
		}

		p.url = u

		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("awsemu: kumo for %s exited during start-up (%v): %s", region, p.waitErr, p.stderr.String())
	case <-ctx.Done():
		_ = p.stop()

		return nil, fmt.Errorf("awsemu: waiting for kumo for %s: %w", region, ctx.Err())
	}
}

// stop asks the child to exit, kills its process group if it does not, and
// waits for it. Safe to call more than once.
func (p *kumoProc) stop() error {
	p.stopOnce.Do(func() {
		_ = p.stdin.Close()
		_ = signalGroup(p.cmd.Process, false)

		select {
		case <-p.done:
			return
		case <-time.After(stopGrace):
		}

		_ = signalGroup(p.cmd.Process, true)

		select {
		case <-p.done:
		case <-time.After(killTimeout):
			p.stopErr = fmt.Errorf("awsemu: kumo for %s (pid %d) did not exit after being killed", p.region, p.pid())
		}
	})

	return p.stopErr
}

// childEnv is the parent's environment without AWS_* and KUMO_* settings
// (credentials, profiles, KUMO_DATA_DIR persistence, ports), plus the
// region kumo reads when its services initialise.
func childEnv(region string) []string {
	env := make([]string, 0, len(os.Environ())+2)

	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AWS_") || strings.HasPrefix(kv, "KUMO_") {
			continue
		}

		env = append(env, kv)
	}

	return append(env, "AWS_DEFAULT_REGION="+region, "AWS_REGION="+region)
}

var (
	buildMu  sync.Mutex
	builtBin string
)

// kumoBinary returns the kumoregion binary to run: explicit, from
// $KILN_AWSEMU_KUMO_BIN, or built once per process with go build into the
// user cache directory. go build leaves an up-to-date binary alone, so after
// the first build this costs a second or two; a file lock serialises builds
// across concurrently running test binaries.
func kumoBinary(ctx context.Context, explicit string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}

	if env := os.Getenv(EnvKumoBinary); env != "" {
		return env, nil
	}

	buildMu.Lock()
	defer buildMu.Unlock()

	if builtBin != "" {
		return builtBin, nil
	}

	src, err := helperSourceDir()
	if err != nil {
		return "", err
	}

	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}

	dir := filepath.Join(cache, "kiln", "awsemu")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("awsemu: creating cache dir: %w", err)
	}

	// One binary per source checkout, so worktrees with different kumo
	// versions never overwrite each other's (possibly running) binary.
	sum := sha256.Sum256([]byte(src))
	name := "kumoregion-" + hex.EncodeToString(sum[:6])
	out := filepath.Join(dir, name+exeSuffix())

	unlock, err := lockFile(filepath.Join(dir, name+".lock"))
	if err != nil {
		return "", fmt.Errorf("awsemu: locking kumo build: %w", err)
	}
	defer unlock()

	// go test puts $GOROOT/bin first on PATH, so this is the toolchain
	// that is building the tests.
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, ".")
	cmd.Dir = src

	var output bytes.Buffer
	cmd.Stdout = &output
	cmd.Stderr = &output

	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("awsemu: building kumo (go build in %s): %w\n%s\n(set %s to a prebuilt binary to skip the build)",
			src, err, output.String(), EnvKumoBinary)
	}

	builtBin = out

	return out, nil
}

// helperSourceDir locates ./kumoregion next to this file.
func helperSourceDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("awsemu: cannot locate package source")
	}

	dir := filepath.Join(filepath.Dir(file), "kumoregion")
	if _, err := os.Stat(filepath.Join(dir, "main.go")); err != nil {
		return "", fmt.Errorf("awsemu: kumoregion source not found (%w); set %s to a prebuilt binary", err, EnvKumoBinary)
	}

	return dir, nil
}

func exeSuffix() string {
	if runtime.GOOS == "windows" {
		return ".exe"
	}

	return ""
}

// tailBuffer keeps the last max bytes written to it (child stderr, for
// start-up error messages).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()

	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}

	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()

	return strings.TrimSpace(string(t.buf))
}

package main

// End-to-end tests of the kiln binary against real control planes. The test
// binary doubles as kiln: with KILN_E2E_AS_KILN=1 it runs kiln's main, so
// every test drives a real process that can be killed, interrupted and
// raced, exactly like a user's.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kilnctl/kiln/internal/testenv/testcluster"
	"github.com/kilnctl/kiln/internal/testenv/testhooks"
)

var (
	clusterA, clusterB *testcluster.Cluster
	kubeconfigPath     string

	// outputs collects everything any kiln process printed, and secrets
	// every token and key any test produced: TestMain checks that none of
	// the latter appears in the former.
	outputsMu sync.Mutex
	outputs   []string
	secrets   = map[string]bool{}
)

func TestMain(m *testing.M) {
	if os.Getenv("KILN_E2E_AS_KILN") == "1" {
		os.Exit(run(testhooks.FromEnv()))
	}
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	os.Exit(e2eMain(m))
}

func e2eMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var err error
	var wg sync.WaitGroup
	var errA, errB error
	wg.Go(func() { clusterA, errA = testcluster.Start(ctx, testcluster.Options{ContextName: "kiln-a"}) })
	wg.Go(func() { clusterB, errB = testcluster.Start(ctx, testcluster.Options{ContextName: "kiln-b"}) })
	wg.Wait()
	defer func() {
		if clusterA != nil {
			_ = clusterA.Stop()
		}
		if clusterB != nil {
			_ = clusterB.Stop()
		}
	}()
	if errA != nil || errB != nil {
		fmt.Fprintln(os.Stderr, "start clusters:", errA, errB)
		return 1
	}
	dir, err := os.MkdirTemp("", "kiln-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	kubeconfigPath = filepath.Join(dir, "kubeconfig")
	if err := writeMergedKubeconfig(kubeconfigPath); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if leaks := secretLeaks(); len(leaks) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: secret material appeared in kiln output:\n%s\n", strings.Join(leaks, "\n"))
			return 1
		}
		fmt.Fprintf(os.Stderr, "secret scan: %d outputs checked against %d secrets: clean\n", len(outputs), len(secrets))
	}
	return code
}

// writeMergedKubeconfig writes one kubeconfig with contexts kiln-a, kiln-b
// and kiln-dead (a context whose server refuses connections).
func writeMergedKubeconfig(path string) error {
	merged := clientcmdapi.NewConfig()
	for _, c := range []*testcluster.Cluster{clusterA, clusterB} {
		cfg, err := clientcmd.Load(c.Kubeconfig)
		if err != nil {
			return err
		}
		for k, v := range cfg.Clusters {
			merged.Clusters[k] = v
		}
		for k, v := range cfg.AuthInfos {
			merged.AuthInfos[k] = v
		}
		for k, v := range cfg.Contexts {
			merged.Contexts[k] = v
		}
	}
	merged.Clusters["kiln-dead"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	merged.AuthInfos["kiln-dead"] = &clientcmdapi.AuthInfo{Token: "unused"}
	merged.Contexts["kiln-dead"] = &clientcmdapi.Context{Cluster: "kiln-dead", AuthInfo: "kiln-dead"}
	merged.CurrentContext = "kiln-a"
	return clientcmd.WriteToFile(*merged, path)
}

// env is one user's machine: its own state, data and keyring dirs.
type env struct {
	t     *testing.T
	state string
	data  string
	vars  []string
	// kubeconfig, if set, replaces the merged kubeconfig (the fault tests
	// reach a cluster only through their proxy).
	kubeconfig string
	// exe, if set, is the kiln binary to run instead of this test binary
	// (the release-build test runs kiln as `make build` builds it).
	exe string
	// dir, if set, is the working directory kiln runs in (where a reader
	// of the README stands: its kiln.yaml, its support bundle).
	dir string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	d := t.TempDir()
	return &env{t: t, state: filepath.Join(d, "state"), data: filepath.Join(d, "data")}
}

// tokenDir is the default token dir of kube/NAME in this env.
func (e *env) tokenDir(name string) string {
	return filepath.Join(e.state, "kiln", "kube", name, "tokens")
}

type result struct {
	code           int
	stdout, stderr string
	killed         bool
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// events parses NDJSON stdout.
func (r result) events(t *testing.T) []map[string]any {
	t.Helper()
	var evs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("stdout line is not JSON: %q: %v", sc.Text(), err)
		}
		evs = append(evs, m)
	}
	return evs
}

func (r result) last(t *testing.T, typ string) map[string]any {
	t.Helper()
	evs := r.events(t)
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i]["type"] == typ {
			return evs[i]
		}
	}
	t.Fatalf("no %s event in:\n%s", typ, r)
	return nil
}

func (e *env) command(ctx context.Context, extra []string, args ...string) *exec.Cmd {
	exe := e.exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			e.t.Fatal(err)
		}
	}
	kc := kubeconfigPath
	if e.kubeconfig != "" {
		kc = e.kubeconfig
	}
	base := []string{"--kubeconfig", kc}
	if !hasFlag(args, "--keyring-backend") {
		base = append(base, "--keyring-backend", "file")
	}
	cmd := exec.CommandContext(ctx, exe, append(args, base...)...)
	cmd.Env = append(os.Environ(),
		"KILN_E2E_AS_KILN=1",
		"XDG_STATE_HOME="+e.state,
		"XDG_DATA_HOME="+e.data,
		"KILN_KEYRING_PASSPHRASE=e2e-passphrase",
	)
	cmd.Env = append(cmd.Env, e.vars...)
	cmd.Env = append(cmd.Env, extra...)
	cmd.Stdin = nil
	cmd.Dir = e.dir
	return cmd
}

func hasFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}

// kiln runs the binary to completion.
func (e *env) kiln(args ...string) result { return e.kilnWith(nil, args...) }

func (e *env) kilnWith(extra []string, args ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := e.command(ctx, extra, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return e.finish(cmd, err, &stdout, &stderr)
}

func (e *env) finish(cmd *exec.Cmd, err error, stdout, stderr *bytes.Buffer) result {
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				r.killed = true
			}
		} else {
			e.t.Fatalf("run kiln: %v", err)
		}
	}
	outputsMu.Lock()
	outputs = append(outputs, r.stdout, r.stderr)
	outputsMu.Unlock()
	e.collectSecrets()
	return r
}

// collectSecrets records every token and private key in this env's state.
func (e *env) collectSecrets() {
	_ = filepath.Walk(e.state, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		base := filepath.Base(path)
		if base == "signing-key.pem" || filepath.Base(filepath.Dir(path)) == "tokens" {
			data, err := os.ReadFile(path)
			if err == nil && len(data) > 0 {
				outputsMu.Lock()
				secrets[strings.TrimSpace(string(data))] = true
				// Also the key's base64 body lines: a leak of part of it counts.
				for _, line := range strings.Split(string(data), "\n") {
					if len(line) >= 40 && !strings.HasPrefix(line, "-----") {
						secrets[line] = true
					}
				}
				outputsMu.Unlock()
			}
		}
		return nil
	})
}

var jwtPattern = regexp.MustCompile(`eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{20,}`)

func secretLeaks() []string {
	outputsMu.Lock()
	defer outputsMu.Unlock()
	var leaks []string
	for i, out := range outputs {
		if strings.Contains(out, "PRIVATE KEY") {
			leaks = append(leaks, fmt.Sprintf("output %d contains a PEM private key header", i))
		}
		if m := jwtPattern.FindString(out); m != "" {
			leaks = append(leaks, fmt.Sprintf("output %d contains a JWT", i))
		}
		for s := range secrets {
			if strings.Contains(out, s) {
				leaks = append(leaks, fmt.Sprintf("output %d contains a token or key line", i))
				break
			}
		}
	}
	return leaks
}

// expect fails the test unless r exited with code.
func expect(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d, got:\n%s", code, r)
	}
}

// cleanup destroys whatever platform a test left on a cluster.
func cleanup(t *testing.T, e *env, name, context string) {
	t.Cleanup(func() {
		r := e.kiln("destroy", "kube", name, "--context", context, "--yes", "--headless")
		if r.code != 0 && r.code != 2 {
			t.Errorf("cleanup destroy %s: %s", name, r)
		}
		waitNamespaceGone(t, clientFor(context), "kiln-system")
	})
}

func clientFor(context string) kubernetes.Interface {
	if context == "kiln-b" {
		return clusterB.Client
	}
	return clusterA.Client
}

func waitNamespaceGone(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("namespace %s not gone: %v", ns, err)
	}
}

// paused is a kiln process held at a checkpoint by the pause hook.
type paused struct {
	e              *env
	cmd            *exec.Cmd
	cancel         context.CancelFunc
	release        string
	stdout, stderr bytes.Buffer
}

// startPaused starts kiln and returns once it has reached checkpoint point
// and is waiting there.
func (e *env) startPaused(point string, args ...string) *paused {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	p := &paused{e: e, cancel: cancel, release: filepath.Join(e.t.TempDir(), "release")}
	p.cmd = e.command(ctx, []string{testhooks.PauseEnv + "=" + point, testhooks.PauseFileEnv + "=" + p.release}, args...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		cancel()
		e.t.Fatal(err)
	}
	e.t.Cleanup(cancel)
	waitFile(e.t, p.release+".reached")
	return p
}

// resume lets the process go on and waits for it to end.
func (p *paused) resume() result {
	p.e.t.Helper()
	if err := os.WriteFile(p.release, nil, 0o600); err != nil {
		p.e.t.Fatal(err)
	}
	err := p.cmd.Wait()
	p.cancel()
	return p.e.finish(p.cmd, err, &p.stdout, &p.stderr)
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		_, err := os.Stat(path)
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("%s never appeared: %v", path, err)
	}
}

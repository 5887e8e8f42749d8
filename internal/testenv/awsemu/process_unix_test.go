//go:build unix

package awsemu

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// processExists reports whether pid is still a process (including a zombie
// nobody reaped).
func processExists(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}

	if _, err := os.Stat("/proc/self"); err == nil {
		_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid)))

		return err == nil
	}

	return true
}

// TestChildrenDieWithParent SIGKILLs a process that runs an emulator (this
// test binary, re-executed) and checks that its kumo children go too: no
// Close runs, only PR_SET_PDEATHSIG and the stdin pipe closing.
func TestChildrenDieWithParent(t *testing.T) {
	if os.Getenv(parentEnv) != "" {
		t.Skip("running as the parent helper")
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperParent$", "-test.v")
	cmd.Env = append(os.Environ(), parentEnv+"=1")
	cmd.Stderr = os.Stderr

	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}

	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	var pids []int

	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "KUMO_PIDS "); ok {
			for f := range strings.FieldsSeq(rest) {
				pid, err := strconv.Atoi(f)
				if err != nil {
					t.Fatalf("bad pid line %q", sc.Text())
				}

				pids = append(pids, pid)
			}

			break
		}
	}

	if len(pids) == 0 {
		t.Fatal("helper parent did not report its kumo pids")
	}

	for _, pid := range pids {
		if !processExists(pid) {
			t.Fatalf("kumo pid %d not running before the parent is killed", pid)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	_ = cmd.Wait()

	// Orphaned children are reparented and reaped by init (or a subreaper);
	// give that a moment. This waits for an event, it bounds nothing.
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range pids {
		for processExists(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}

		if processExists(pid) {
			t.Errorf("kumo pid %d survived its parent being SIGKILLed", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

const parentEnv = "AWSEMU_TEST_HELPER_PARENT"

// TestHelperParent is the process TestChildrenDieWithParent kills.
func TestHelperParent(t *testing.T) {
	if os.Getenv(parentEnv) == "" {
		t.Skip("only run by TestChildrenDieWithParent")
	}

	e, err := Start(t.Context(), Options{})
	if err != nil {
		t.Fatal(err)
	}

	var pids []string
	for _, b := range e.backends {
		pids = append(pids, strconv.Itoa(b.proc.pid()))
	}

	fmt.Println("KUMO_PIDS " + strings.Join(pids, " "))
	time.Sleep(time.Minute) // until killed
}

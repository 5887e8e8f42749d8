// Package testhooks is the engine.Hooks that kiln's tests drive through
// the environment: crash (SIGKILL) or pause at a named checkpoint.
//
// Only _test.go files import this package, so it is compiled into test
// binaries (which the e2e tests run as kiln) and never into the kiln
// binary that `make build` and goreleaser produce; there, checkpoints are
// no-ops and these variables are ignored. cmd/kiln's
// TestReleaseBuildHasNoTestHooks holds that line.
package testhooks

import (
	"context"
	"os"
	"time"

	"github.com/kilnctl/kiln/engine"
)

// CrashEnv names the crash hook: when it equals a checkpoint's name, the
// process SIGKILLs itself there. Tests use it to prove that a run killed
// at any point converges when run again.
const CrashEnv = "KILN_TEST_CRASH_AT"

// PauseEnv and PauseFileEnv name the pause hook: at the checkpoint named by
// PauseEnv, the process creates PAUSEFILE.reached and waits until
// PAUSEFILE exists. Tests use it to hold an operation at a known point
// (the lock held, say).
const (
	PauseEnv     = "KILN_TEST_PAUSE_AT"
	PauseFileEnv = "KILN_TEST_PAUSE_FILE"
)

// HostEnv names the host hook: the aws provider names this host so in
// its claim's holder identity, so tests on one machine can play two hosts.
const HostEnv = "KILN_TEST_HOST"

// pollEvery is how often a paused process looks for its release file.
const pollEvery = 20 * time.Millisecond

// Env is the crash and pause hook configured from the environment.
type Env struct {
	CrashAt   string
	PauseAt   string
	PauseFile string
	HostName  string
}

// Host implements engine.HostHook.
func (h *Env) Host() string { return h.HostName }

// FromEnv reads CrashEnv, PauseEnv, PauseFileEnv and HostEnv once. It returns nil
// (no hooks) when none of them names a checkpoint.
func FromEnv() engine.Hooks {
	h := &Env{CrashAt: os.Getenv(CrashEnv), PauseAt: os.Getenv(PauseEnv), PauseFile: os.Getenv(PauseFileEnv), HostName: os.Getenv(HostEnv)}
	if h.CrashAt == "" && (h.PauseAt == "" || h.PauseFile == "") && h.HostName == "" {
		return nil
	}
	return h
}

// At pauses and then crashes at point, as configured. The pause does not
// watch ctx: the operation stays at point, even when interrupted, until
// the test creates the release file.
func (h *Env) At(_ context.Context, point string) {
	if h.PauseAt != "" && h.PauseAt == point && h.PauseFile != "" {
		_ = os.WriteFile(h.PauseFile+".reached", nil, 0o600)
		for {
			if _, err := os.Stat(h.PauseFile); err == nil {
				break
			}
			time.Sleep(pollEvery)
		}
	}
	if h.CrashAt != "" && h.CrashAt == point {
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			_ = p.Kill() // SIGKILL on Unix: no deferred cleanup runs
		}
		select {} // the signal is delivered asynchronously
	}
}

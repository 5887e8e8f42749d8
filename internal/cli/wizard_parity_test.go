package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/platform"
	"github.com/kilnctl/kiln/tui"
)

// memProvider is an in-memory engine.Provider: three locations: one hosting
// kiln cluster "other" (platform absent), one unreachable, one empty. It creates no
// infrastructure. Pure logic: every phase it takes part in is the real
// engine's.
type memProvider struct{ target string }

func (p *memProvider) Name() string   { return "kube" }
func (p *memProvider) Target() string { return p.target }
func (p *memProvider) Nouns() engine.Nouns {
	return engine.Nouns{Location: "context", Scope: "kubeconfig", Target: engine.InputContext}
}
func (p *memProvider) Discover(ctx context.Context, name string) ([]engine.Location, error) {
	return []engine.Location{
		{Name: "mem-a", Cluster: "other", Infra: engine.InfraPresent, State: &platform.State{NamespaceExists: true}},
		{Name: "mem-b", Err: errors.New("connection refused")},
		{Name: "mem-c", Infra: engine.InfraPresent},
	}, nil
}
func (p *memProvider) EnsureInfrastructure(ctx context.Context, name, location string, sink *event.Reporter) (engine.Location, bool, error) {
	return engine.Location{}, false, errors.New("memory provider: no infrastructure at " + location)
}
func (p *memProvider) DestroyInfrastructure(ctx context.Context, name, location string, sink *event.Reporter) (bool, error) {
	return true, nil
}

// TestWizardAndHeadlessDriveTheEngineAlike runs the real engine with an
// in-memory provider through the headless NDJSON frontend and through the
// wizard's Ops and bridge, and compares the event sequences (times and
// elapsed milliseconds normalized, the state dir and generated key ids
// replaced).
func TestWizardAndHeadlessDriveTheEngineAlike(t *testing.T) {
	for _, tc := range []struct {
		name     string
		headless func(context.Context, *engine.Engine, engine.Target) error
		wizard   func(context.Context, *wizardOps, *tui.Bridge) error
	}{
		{
			name: "destroy-not-found",
			headless: func(ctx context.Context, e *engine.Engine, t engine.Target) error {
				return e.Destroy(ctx, engine.DestroyRequest{Target: t, Yes: true, Timeout: time.Minute})
			},
			wizard: func(ctx context.Context, b *wizardOps, br *tui.Bridge) error {
				return b.Destroy(engine.ClusterRef{Provider: "kube", Name: "demo", Location: "mem-a"}, engine.DestroyRequest{})(ctx, br, br)
			},
		},
		{
			name: "create-infrastructure-fails",
			headless: func(ctx context.Context, e *engine.Engine, t engine.Target) error {
				return e.Create(ctx, engine.CreateRequest{Target: t, Timeout: time.Minute})
			},
			wizard: func(ctx context.Context, b *wizardOps, br *tui.Bridge) error {
				return b.Create(engine.ClusterRef{Provider: "kube", Name: "demo", Location: "mem-c"}, engine.Infra{}, engine.CreateRequest{})(ctx, br, br)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()

			headlessState := t.TempDir()
			t.Setenv("XDG_STATE_HOME", headlessState)
			var out bytes.Buffer
			e := &engine.Engine{Sink: newJSONPrinter(&out), Confirm: headlessConfirmer{yes: true}}
			loc := "mem-a"
			if strings.HasPrefix(tc.name, "create") {
				loc = "mem-c"
			}
			herr := tc.headless(ctx, e, engine.Target{Provider: &memProvider{target: loc}, Name: "demo"})
			var want []string
			for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				want = append(want, normalize(t, []byte(line), headlessState))
			}

			wizardState := t.TempDir()
			t.Setenv("XDG_STATE_HOME", wizardState)
			b := &wizardOps{g: &globals{timeout: time.Minute}, newProvider: func(name, location string) (engine.Provider, error) {
				return &memProvider{target: location}, nil
			}}
			var mu sync.Mutex
			var got []string
			br := tui.NewBridge()
			br.Start(func(m tea.Msg) {
				evs, ok := m.(interface{ Events() []engine.Event })
				if !ok {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, ev := range evs.Events() {
					// Printed as the headless run's are: the CLI's
					// printer gives a result its exit code.
					var line bytes.Buffer
					newJSONPrinter(&line).Emit(ev)
					got = append(got, normalize(t, bytes.TrimSpace(line.Bytes()), wizardState))
				}
			})
			werr := tc.wizard(ctx, b, br)
			br.Stop()

			if (herr == nil) != (werr == nil) || herr != nil && herr.Error() != strings.ReplaceAll(werr.Error(), wizardState, headlessState) {
				t.Errorf("errors differ: headless %v, wizard %v", herr, werr)
			}
			if len(want) < 3 {
				t.Fatalf("headless run emitted only %d events: %q", len(want), want)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != len(want) {
				t.Errorf("wizard received %d events, headless %d:\nwizard   %s\nheadless %s", len(got), len(want), strings.Join(got, "\n         "), strings.Join(want, "\n         "))
				return
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("event %d:\nwizard   %s\nheadless %s", i, got[i], want[i])
				}
			}
		})
	}
}

// normalize zeroes an NDJSON event's time and elapsed fields (also inside
// the discovery event's clusters) and replaces the state dir.
func normalize(t *testing.T, line []byte, stateDir string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("event %s: %v", line, err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, vv := range x {
				if k == "time" || k == "elapsed_ms" {
					x[k] = 0
					continue
				}
				walk(vv)
			}
		case []any:
			for _, vv := range x {
				walk(vv)
			}
		}
	}
	walk(m)
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return keyID.ReplaceAllString(strings.ReplaceAll(string(data), stateDir, "$STATE"), "sha256:KEY")
}

// keyID matches a generated key's id: each run generates its own key.
var keyID = regexp.MustCompile(`sha256:[0-9a-f]{64}`)

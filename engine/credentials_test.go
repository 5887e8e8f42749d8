package engine

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/failure"
)

// notActiveProvider is an aws-like provider whose cluster exists but is
// not ACTIVE (EKS CREATING): discovery finds infrastructure and no
// platform state, and the infrastructure phase never gets a client. It
// stands in for AWS only to drive the credentials decision, which is pure
// logic over what discovery found.
type notActiveProvider struct {
	mu     sync.Mutex
	ensure int
}

func (p *notActiveProvider) Name() string { return "aws" }
func (p *notActiveProvider) Nouns() Nouns {
	return Nouns{Location: "region", Scope: "account", Target: InputRegion}
}
func (p *notActiveProvider) Target() string { return "eu-west-1" }
func (p *notActiveProvider) Discover(_ context.Context, name string) ([]Location, error) {
	return []Location{{Name: "eu-west-1", Cluster: name, Infra: InfraPartial}}, nil
}

func (p *notActiveProvider) EnsureInfrastructure(context.Context, string, string, *event.Reporter) (Location, bool, error) {
	p.mu.Lock()
	p.ensure++
	p.mu.Unlock()
	return Location{}, false, errors.New("EKS cluster dev1 is CREATING")
}

func (p *notActiveProvider) DestroyInfrastructure(context.Context, string, string, *event.Reporter) (bool, error) {
	return false, errors.New("not used")
}

// writeDir writes a token dir for aws/dev1 at the default path.
func writeDir(t *testing.T, state creds.State) (string, *creds.TokenDir) {
	t.Helper()
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	dir, err := creds.DefaultDir("aws", "dev1")
	if err != nil {
		t.Fatal(err)
	}
	key, err := creds.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	td, err := creds.NewTokenDir("dev1", "aws", "eu-west-1", key, []string{"default"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	td.Manifest.State = state
	if err := creds.Write(dir, td); err != nil {
		t.Fatal(err)
	}
	return dir, td
}

// TestTokenDirKeptWhileTrustIsUnknown: a crash between kiln-config and
// commit leaves a pending dir whose key the cluster trusts. A rerun while
// the cluster cannot be read (EKS not ACTIVE) must neither replace nor
// move that dir, pending or committed.
func TestTokenDirKeptWhileTrustIsUnknown(t *testing.T) {
	for _, state := range []creds.State{creds.StatePending, creds.StateCommitted} {
		t.Run(string(state), func(t *testing.T) {
			dir, td := writeDir(t, state)
			keyBefore, err := os.ReadFile(filepath.Join(dir, creds.SigningKeyFile))
			if err != nil {
				t.Fatal(err)
			}
			var logs strings.Builder
			e := &Engine{Sink: SinkFunc(func(ev Event) { logs.WriteString(event.MessageOf(ev.Payload) + "\n") })}
			p := &notActiveProvider{}
			err = e.Create(context.Background(), CreateRequest{Target: Target{Provider: p, Name: "dev1"}, Timeout: time.Minute})
			if err == nil || !strings.Contains(err.Error(), "CREATING") {
				t.Fatalf("want the infrastructure error, got %v", err)
			}
			got, err := creds.Load(dir)
			if err != nil {
				t.Fatalf("token dir gone or broken: %v\n%s", err, logs.String())
			}
			keyAfter, _ := os.ReadFile(filepath.Join(dir, creds.SigningKeyFile))
			if got.Manifest.KeyID != td.Manifest.KeyID || !bytes.Equal(keyBefore, keyAfter) || got.Manifest.State != state {
				t.Fatalf("token dir changed: key %s -> %s, state %s -> %s\n%s", td.Manifest.KeyID, got.Manifest.KeyID, state, got.Manifest.State, logs.String())
			}
			matches, _ := filepath.Glob(dir + ".destroyed-*")
			if len(matches) > 0 {
				t.Fatalf("token dir moved aside: %v", matches)
			}
			if !strings.Contains(logs.String(), "unknown") {
				t.Errorf("no log says why the dir was kept:\n%s", logs.String())
			}
		})
	}
}

// TestCreateStopsAtAHeldTokenDir: while another process holds the token
// dir's lock, create exits 4 naming it and creates nothing.
func TestCreateStopsAtAHeldTokenDir(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	dir, err := creds.DefaultDir("aws", "dev1")
	if err != nil {
		t.Fatal(err)
	}
	held, err := creds.LockDir(dir, "kiln create dev1 by someone@elsewhere pid 4242")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock()
	p := &notActiveProvider{}
	err = (&Engine{}).Create(context.Background(), CreateRequest{Target: Target{Provider: p, Name: "dev1"}, Timeout: time.Minute})
	if failure.Of(err) != failure.Locked || !strings.Contains(err.Error(), "pid 4242") {
		t.Fatalf("want locked naming the holder, got %v: %v", failure.Of(err), err)
	}
	if p.ensure != 0 {
		t.Errorf("the infrastructure phase ran %d times", p.ensure)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a token dir was written: %v", err)
	}
}

package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/engine/platform"
)

// writeTokenDir writes a valid token dir for kube/name at its default path
// and returns its key id and kiln-auth's view of the key (id -> PEM).
func writeTokenDir(t *testing.T, name string) (string, map[string]string) {
	t.Helper()
	key, err := creds.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	td, err := creds.NewTokenDir(name, "kube", "ctx-"+name, key, []string{"default"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dir, err := creds.DefaultDir("kube", name)
	if err != nil {
		t.Fatal(err)
	}
	if err := creds.Write(dir, td); err != nil {
		t.Fatal(err)
	}
	pem, err := creds.PublicKeyPEM(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return td.Manifest.KeyID, map[string]string{td.Manifest.KeyID: string(pem)}
}

// TestDiscoverClustersTrustsOnlyWhatCreateWould: a token dir counts as
// trusted only when it loads (creds.Load) and holds a key kiln-auth
// trusts; a dir whose manifest names a trusted key but is broken is not.
func TestDiscoverClustersTrustsOnlyWhatCreateWould(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	good, goodKeys := writeTokenDir(t, "dev1")
	_, brokenKeys := writeTokenDir(t, "dev2")
	dir2, _ := creds.DefaultDir("kube", "dev2")
	if err := os.Remove(filepath.Join(dir2, creds.SigningKeyFile)); err != nil {
		t.Fatal(err)
	}
	_, _ = writeTokenDir(t, "dev3") // a key kiln-auth does not trust

	p := &scopedProvider{locs: []Location{
		{Name: "a", Cluster: "dev1", Infra: InfraPresent, State: &platform.State{Installed: true, Keys: goodKeys}},
		{Name: "b", Cluster: "dev2", Infra: InfraPresent, State: &platform.State{Installed: true, Keys: brokenKeys}},
		{Name: "c", Cluster: "dev3", Infra: InfraPresent, State: &platform.State{Installed: true, Keys: goodKeys}},
		{Name: "d", Infra: InfraUnreachable, Err: errors.New("connection refused")},
		{Name: "e", Infra: InfraPresent},
		{Name: "f", Skipped: true},
	}}
	var evs []Event
	e := &Engine{Sink: SinkFunc(func(ev Event) { evs = append(evs, ev) })}
	got, err := e.DiscoverClusters(context.Background(), p, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("clusters %+v, want dev1, dev2, dev3 and the unreachable d", got)
	}
	dir1, _ := creds.DefaultDir("kube", "dev1")
	if got[0].Name != "dev1" || got[0].TokenDir != dir1 || got[0].Platform != PlatformInstalled || len(got[0].KeyIDs) != 1 || got[0].KeyIDs[0] != good {
		t.Errorf("dev1: %+v, want trusted token dir %s", got[0], dir1)
	}
	if got[1].Name != "dev2" || got[1].TokenDir != "" {
		t.Errorf("dev2 (broken token dir): %+v, want no trusted token dir", got[1])
	}
	if got[2].Name != "dev3" || got[2].TokenDir != "" {
		t.Errorf("dev3 (untrusted key): %+v, want no trusted token dir", got[2])
	}
	if got[3].Location != "d" || got[3].Err == "" || got[3].Platform != "?" {
		t.Errorf("unreachable: %+v", got[3])
	}
	var disc []event.DiscoveryEvent
	for _, ev := range evs {
		if d, ok := ev.Payload.(event.DiscoveryEvent); ok {
			disc = append(disc, d)
		}
	}
	if len(disc) != 1 || disc[0].Source != SourceDiscovery || len(disc[0].Clusters) != 5 || len(disc[0].Skipped) != 1 {
		t.Fatalf("discovery events: %+v, want one over the 5 searched locations", disc)
	}
}

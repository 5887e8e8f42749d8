package engine

import (
	"crypto/rsa"
	"testing"
	"time"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/platform"
)

// TestRotationSteps: what a rotate-key run does is decided from what is
// recorded (kiln-auth, the token dir, a staged dir), so a rerun after a
// kill at any step goes on with that step.
func TestRotationSteps(t *testing.T) {
	now := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	dir := func(key string, previous bool) *creds.TokenDir {
		td := &creds.TokenDir{Path: "/t/tokens", Manifest: creds.Manifest{KeyID: key}}
		if previous {
			td.Previous = new(rsa.PrivateKey) // only its presence matters here
		}
		return td
	}
	staged := &creds.TokenDir{Manifest: creds.Manifest{KeyID: "k2"}}
	cases := []struct {
		name    string
		keys    []string
		oldKey  string
		expires time.Time
		td      *creds.TokenDir
		staged  *creds.TokenDir
		req     RotateKeyRequest
		step    string // "" for no question
		act     bool
		start   bool
	}{
		{name: "nothing under way: start", keys: []string{"k1"}, td: dir("k1", false), step: RotateStart, act: true, start: true},
		{name: "nothing under way, --finish: nothing to do", keys: []string{"k1"}, td: dir("k1", false), req: RotateKeyRequest{Finish: true}},
		{name: "killed after staging", keys: []string{"k1"}, td: dir("k1", false), staged: staged, step: RotateResume, act: true},
		{name: "killed after trusting both", keys: []string{"k1", "k2"}, oldKey: "k1", td: dir("k1", false), staged: staged, step: RotateResume, act: true},
		{name: "killed after the swap, staged dir left", keys: []string{"k1", "k2"}, oldKey: "k1", td: dir("k2", true), staged: staged, step: RotateRetire, act: true},
		{name: "killed before retiring", keys: []string{"k1", "k2"}, oldKey: "k1", td: dir("k2", true), step: RotateRetire, act: true},
		{name: "--keep-old: the deadline recorded", keys: []string{"k1", "k2"}, oldKey: "k1", td: dir("k2", true), req: RotateKeyRequest{KeepOld: time.Hour}, step: RotateRetire, act: true},
		{name: "within the kept window: nothing", keys: []string{"k1", "k2"}, oldKey: "k1", expires: now.Add(time.Minute), td: dir("k2", true)},
		{name: "within the kept window, --finish", keys: []string{"k1", "k2"}, oldKey: "k1", expires: now.Add(time.Minute), td: dir("k2", true), req: RotateKeyRequest{Finish: true}, step: RotateRetire, act: true},
		{name: "the kept window passed", keys: []string{"k1", "k2"}, oldKey: "k1", expires: now.Add(-time.Minute), td: dir("k2", true), step: RotateRetire, act: true},
		{name: "killed after retiring: local tidying only", keys: []string{"k2"}, td: dir("k2", true), act: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := &platform.State{Keys: map[string]string{}, RotationOldKey: tc.oldKey, OldKeyExpires: tc.expires}
			for _, k := range tc.keys {
				st.Keys[k] = "pem"
			}
			r := &rotation{e: &Engine{Now: func() time.Time { return now }}, req: tc.req, st: st, td: tc.td, staged: tc.staged}
			r.req.Provider = &scopedProvider{}
			q, act := r.question()
			step := ""
			if q != nil {
				step = q.Step
			}
			if step != tc.step || act != tc.act || r.start != tc.start {
				t.Errorf("step %q act %v start %v, want %q %v %v (outcome %q)", step, act, r.start, tc.step, tc.act, tc.start, r.outcome)
			}
		})
	}
}

package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kilnctl/kiln/engine/failure"
)

// The NDJSON schema of DESIGN.md §8 is a contract: each event type has
// exactly these keys.
func TestEventJSONKeys(t *testing.T) {
	ts := time.Date(2026, 11, 29, 10, 0, 0, 123, time.UTC)
	cases := []struct {
		ev   Event
		keys []string
	}{
		{Event{Time: ts, Type: TypePhase, Phase: "plan", State: PhaseSucceeded, ElapsedMS: 12}, []string{"elapsed_ms", "message", "phase", "state", "time", "type"}},
		{Event{Time: ts, Type: TypeDiscovery}, []string{"clusters", "elapsed_ms", "skipped", "source", "time", "type"}},
		{Event{Time: ts, Type: TypeDecision, Decision: DecisionFresh, Reason: "r"}, []string{"decision", "reason", "time", "type"}},
		{Event{Time: ts, Type: TypeResource, Kind: "Deployment", Namespace: "ns", Name: "n", Status: StatusCurrent}, []string{"kind", "message", "name", "namespace", "status", "time", "type"}},
		{Event{Time: ts, Type: TypeLog, Level: LevelWarn, Message: "m"}, []string{"level", "message", "time", "type"}},
		{Event{Time: ts, Type: TypeResult, OK: false, ExitCode: 3}, []string{"exit_code", "message", "ok", "time", "token_dir", "type"}},
		{Event{Time: ts, Type: TypePlan, Action: "update", Kind: "Deployment", Namespace: "kiln-system", Name: "kiln-gateway"}, []string{"action", "fields", "kind", "message", "name", "namespace", "time", "type"}},
		{Event{Time: ts, Type: TypeFrontDoor, FrontDoor: &FrontDoor{Mode: "none"}}, []string{"address", "dns_record", "message", "mode", "ready", "time", "tls", "type"}},
		{Event{Time: ts, Type: TypeIsolation, Isolation: &Isolation{State: IsolationUnknown}}, []string{"plugin", "reason", "state", "time", "type"}},
		{Event{Time: ts, Type: TypeAccess, Access: &Access{Mode: "API_AND_CONFIG_MAP"}}, []string{"authentication_mode", "entries", "time", "type"}},
	}
	for _, tc := range cases {
		t.Run(tc.ev.Type, func(t *testing.T) {
			b, err := json.Marshal(tc.ev)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			var keys []string
			for k := range m {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			if !reflect.DeepEqual(keys, tc.keys) {
				t.Errorf("keys %v, want %v (%s)", keys, tc.keys, b)
			}
			if m["time"] != "2026-11-29T10:00:00.000000123Z" {
				t.Errorf("time %v is not RFC3339Nano UTC", m["time"])
			}
		})
	}
}

func TestResultTokenDirIsNullWhenUnknown(t *testing.T) {
	b, _ := json.Marshal(Event{Type: TypeResult, OK: false, ExitCode: 1})
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if v, ok := m["token_dir"]; !ok || v != nil {
		t.Errorf("token_dir = %v (present %v), want null", v, ok)
	}
	if m["ok"] != false {
		t.Errorf("ok must be present and false: %s", b)
	}
	b, _ = json.Marshal(Event{Type: TypeResult, OK: true, TokenDir: "/x"})
	_ = json.Unmarshal(b, &m)
	if m["token_dir"] != "/x" {
		t.Errorf("token_dir = %v", m["token_dir"])
	}
}

func TestDiscoveryClusterShape(t *testing.T) {
	b, _ := json.Marshal(Event{Type: TypeDiscovery, Clusters: []ClusterInfo{{Provider: "kube", Name: "a", Location: "ctx", Infra: InfraPresent, Platform: PlatformAbsent}}})
	var m struct {
		Clusters []map[string]any `json:"clusters"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	c := m.Clusters[0]
	for _, k := range []string{"provider", "name", "location", "infra", "platform", "key_ids", "token_dir"} {
		if _, ok := c[k]; !ok {
			t.Errorf("cluster lacks %q: %s", k, b)
		}
	}
	if c["token_dir"] != nil {
		t.Errorf("token_dir must be null when unknown: %s", b)
	}
	if ids, ok := c["key_ids"].([]any); !ok || len(ids) != 0 {
		t.Errorf("key_ids must be an empty list, got %v", c["key_ids"])
	}
	if _, ok := c["error"]; ok {
		t.Errorf("error must be omitted for a reachable location: %s", b)
	}
}

// A plan event's fields is always a JSON array, never null.
func TestPlanEventFieldsIsAnArray(t *testing.T) {
	b, err := json.Marshal(Event{Type: TypePlan, Action: "create", Kind: "Namespace", Name: "kiln-tenant-x"})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if f, ok := m["fields"].([]any); !ok || len(f) != 0 {
		t.Errorf("fields = %#v in %s, want []", m["fields"], b)
	}
}

// TestFailedResultCarriesTheInput: a failed result names the input its
// error names (frontends decide from it, not from the words), worded by
// the frontend's Namer, and the NDJSON result keeps DESIGN.md §8's fields
// only.
func TestFailedResultCarriesTheInput(t *testing.T) {
	err := fmt.Errorf("plan: %w", NewInputError(failure.Input, InputNodes, "eks1", "{input}: 0 is out of range"))
	ev := FailedResult(err, func(in Input) string { return "the " + string(in) + " field" }, "")
	if ev.Input != InputNodes || failure.Of(ev.Err) != failure.Input || ev.ExitCode != 0 || ev.OK {
		t.Fatalf("FailedResult = %+v, want input %s, an input failure, no exit code (the CLI's)", ev, InputNodes)
	}
	if !strings.Contains(ev.Message, "the nodes field") || strings.Contains(ev.Message, "--nodes") {
		t.Errorf("message %q is not worded by the frontend's Namer", ev.Message)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	for k := range fields {
		switch k {
		case "time", "type", "ok", "exit_code", "message", "token_dir":
		default:
			t.Errorf("the result's JSON has field %q beyond DESIGN.md §8's: %s", k, b)
		}
	}
	if plain := FailedResult(errors.New("boom"), nil, ""); plain.Input != "" || failure.Of(plain.Err) != failure.Failed {
		t.Errorf("FailedResult of a plain error = %+v, want no input, failed", plain)
	}
}

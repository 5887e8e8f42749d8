package ndjson_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/event"

	"github.com/kilnctl/kiln/engine/failure"
	"github.com/kilnctl/kiln/internal/cli/ndjson"
	"github.com/kilnctl/kiln/internal/exit"
)

// The NDJSON schema of DESIGN.md §8 is a contract: each event type has
// exactly these keys.
func TestEventJSONKeys(t *testing.T) {
	ts := time.Date(2026, 11, 29, 10, 0, 0, 123, time.UTC)
	cases := []struct {
		ev   event.Event
		keys []string
	}{
		{event.Event{Time: ts, Payload: event.PhaseEvent{Phase: "plan", State: engine.PhaseSucceeded, ElapsedMS: 12}}, []string{"elapsed_ms", "message", "phase", "state", "time", "type"}},
		{event.Event{Time: ts, Payload: event.DiscoveryEvent{}}, []string{"clusters", "elapsed_ms", "skipped", "source", "time", "type"}},
		{event.Event{Time: ts, Payload: event.DecisionEvent{Decision: engine.DecisionFresh, Reason: "r"}}, []string{"decision", "reason", "time", "type"}},
		{event.Event{Time: ts, Payload: event.ResourceEvent{Kind: "Deployment", Namespace: "ns", Name: "n", Status: engine.StatusCurrent}}, []string{"kind", "message", "name", "namespace", "status", "time", "type"}},
		{event.Event{Time: ts, Payload: event.LogEvent{Level: engine.LevelWarn, Message: "m"}}, []string{"level", "message", "time", "type"}},
		{event.Event{Time: ts, Payload: event.ResultEvent{OK: false}}, []string{"exit_code", "message", "ok", "time", "token_dir", "type"}},
		{event.Event{Time: ts, Payload: event.PlanEvent{Action: "update", Kind: "Deployment", Namespace: "kiln-system", Name: "kiln-gateway"}}, []string{"action", "fields", "kind", "message", "name", "namespace", "time", "type"}},
		{event.Event{Time: ts, Payload: &engine.FrontDoor{Mode: "none"}}, []string{"address", "dns_record", "message", "mode", "ready", "time", "tls", "type"}},
		{event.Event{Time: ts, Payload: &engine.Isolation{State: engine.IsolationUnknown}}, []string{"plugin", "reason", "state", "time", "type"}},
		{event.Event{Time: ts, Payload: &engine.Access{Mode: "API_AND_CONFIG_MAP"}}, []string{"authentication_mode", "entries", "time", "type"}},
	}
	for _, tc := range cases {
		t.Run(string(tc.ev.Type()), func(t *testing.T) {
			b, err := ndjson.Marshal(tc.ev)
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
	b, _ := ndjson.Marshal(event.Event{Payload: event.ResultEvent{OK: false}})
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if v, ok := m["token_dir"]; !ok || v != nil {
		t.Errorf("token_dir = %v (present %v), want null", v, ok)
	}
	if m["ok"] != false {
		t.Errorf("ok must be present and false: %s", b)
	}
	b, _ = ndjson.Marshal(event.Event{Payload: event.ResultEvent{OK: true, TokenDir: "/x"}})
	_ = json.Unmarshal(b, &m)
	if m["token_dir"] != "/x" {
		t.Errorf("token_dir = %v", m["token_dir"])
	}
}

func TestDiscoveryClusterShape(t *testing.T) {
	b, _ := ndjson.Marshal(event.Event{Payload: event.DiscoveryEvent{Clusters: []engine.ClusterInfo{{Provider: "kube", Name: "a", Location: "ctx", Infra: engine.InfraPresent, Platform: engine.PlatformAbsent}}}})
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
	b, err := ndjson.Marshal(event.Event{Payload: event.PlanEvent{Action: "create", Kind: "Namespace", Name: "kiln-tenant-x"}})
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
	err := fmt.Errorf("plan: %w", engine.NewInputError(failure.Input, engine.InputNodes, "eks1", "{input}: 0 is out of range"))
	ev := engine.FailedResult(err, func(in engine.Input) string { return "the " + string(in) + " field" }, "")
	if engine.InputOf(ev.Err) != engine.InputNodes || exit.Code(ev.Err) != exit.BadInput || ev.OK {
		t.Fatalf("engine.FailedResult = %+v, want input %s, exit 2", ev, engine.InputNodes)
	}
	if !strings.Contains(ev.Message, "the nodes field") || strings.Contains(ev.Message, "--nodes") {
		t.Errorf("message %q is not worded by the frontend's Namer", ev.Message)
	}
	b, err := ndjson.Marshal(event.Event{Payload: ev})
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
	if plain := engine.FailedResult(errors.New("boom"), nil, ""); engine.InputOf(plain.Err) != "" || exit.Code(plain.Err) != exit.Failed {
		t.Errorf("engine.FailedResult of a plain error = %+v, want no input, exit 1", plain)
	}
}

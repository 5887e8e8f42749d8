package engine

import (
	"slices"
	"testing"
	"time"

	"github.com/kilnctl/kiln/creds"
)

// TestPlanTokens: which tokens the tenant-table protocol issues again and
// when tenants.json changes.
func TestPlanTokens(t *testing.T) {
	key, err := creds.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	td, err := creds.NewTokenDir("dev1", "kube", "ctx", key, []string{"a", "b"}, now)
	if err != nil {
		t.Fatal(err)
	}
	table, err := bindNewDir(td, []string{"a", "b"}, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, tenants []string, tb *creds.TenantTable, force []string, issue []string, changes bool) {
		t.Helper()
		w, err := planTokens(td, tenants, tb, force)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(w.issue, issue) || w.table != changes {
			t.Errorf("%s: issue %v table %v; want %v %v", name, w.issue, w.table, issue, changes)
		}
	}
	check("converged", []string{"a", "b"}, table, nil, nil, false)
	check("tenant b removed", []string{"a"}, table, nil, nil, true)
	check("tenant c added", []string{"a", "b", "c"}, table, nil, []string{"c"}, true)
	check("rotate a", []string{"a", "b"}, table, []string{"a"}, []string{"a"}, true)
	check("no table (earlier kiln)", []string{"a", "b"}, nil, nil, []string{"a", "b"}, true)
	other := table.Clone()
	other.Audience = "0123456789abcdef0123456789abcdef"
	check("another platform id", []string{"a"}, other, nil, []string{"a"}, true)
	staged := table.Clone()
	staged.Legacy = true
	check("migration not finished", []string{"a", "b"}, staged, nil, nil, true)
	extra := table.Clone()
	extra.Tenants["a"] = append(extra.Tenants["a"], "0123456789abcdef0123456789abcdef")
	check("a staged tid left by a killed run", []string{"a", "b"}, extra, nil, nil, true)
}

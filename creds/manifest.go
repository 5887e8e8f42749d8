package creds

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// State is the lifecycle state of a token directory.
type State string

const (
	// StatePending: written, but the cluster may not trust the key yet.
	// A pending directory whose key the cluster never received may be
	// replaced; a committed one never is.
	StatePending State = "pending"
	// StateCommitted: kiln has read back the cluster's kiln-auth and
	// kiln-config and knows the cluster trusts this key.
	StateCommitted State = "committed"
)

// Manifest is manifest.json of a token directory (DESIGN.md §6, contract).
// It holds no secret material.
type Manifest struct {
	Cluster   string    `json:"cluster"`
	Provider  string    `json:"provider"`
	Location  string    `json:"location"`
	KeyID     string    `json:"key_id"`
	State     State     `json:"state"`
	CreatedAt time.Time `json:"created_at"` // RFC 3339, UTC, whole seconds
	Tenants   []string  `json:"tenants"`
	// Account is the cloud account the cluster's location belongs to (the
	// AWS account id, from STS GetCallerIdentity), for providers whose
	// locations are an account's (aws). Optional: directories written
	// before kiln recorded it, and kube's, have none.
	Account string `json:"account,omitempty"`
}

// manifestFields lists the JSON fields a manifest must have, in file order.
var manifestFields = []string{"cluster", "provider", "location", "key_id", "state", "created_at", "tenants"}

// HasTenant reports whether tenant is listed in the manifest.
func (m *Manifest) HasTenant(tenant string) bool { return slices.Contains(m.Tenants, tenant) }

// validate checks field values; errors name the JSON field.
func (m *Manifest) validate() error {
	if err := checkName("cluster", m.Cluster); err != nil {
		return err
	}
	if err := checkName("provider", m.Provider); err != nil {
		return err
	}
	if m.Location == "" {
		return errors.New("location is empty")
	}
	if !ValidKeyID(m.KeyID) {
		return fmt.Errorf("key_id %q is not sha256:<64 lowercase hex digits>", m.KeyID)
	}
	switch m.State {
	case StatePending, StateCommitted:
	default:
		return fmt.Errorf("state %q is unknown (want %q or %q)", m.State, StatePending, StateCommitted)
	}
	if m.CreatedAt.IsZero() {
		return errors.New("created_at is zero")
	}
	if m.Account != "" && !validAccount(m.Account) {
		return fmt.Errorf("account %q is not a 12-digit AWS account id", m.Account)
	}
	return checkTenants("tenants", m.Tenants)
}

// validAccount reports a 12-digit AWS account id.
func validAccount(s string) bool {
	if len(s) != 12 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// marshal returns the manifest as indented JSON with a final newline: it is
// a file people read when something went wrong.
func (m *Manifest) marshal() ([]byte, error) {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	return append(data, '\n'), nil
}

// parseManifest decodes and validates manifest.json strictly: every field
// present, no unknown fields, no trailing data, valid values. Errors name the
// field; they may quote values, which are never secret.
func parseManifest(data []byte) (*Manifest, error) {
	// Presence first, so a missing field is reported by name instead of
	// surfacing later as an empty value.
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	for _, f := range manifestFields {
		if _, ok := raw[f]; !ok {
			return nil, fmt.Errorf("missing field %q", f)
		}
	}
	// encoding/json does not name the field when a time fails to parse.
	var created string
	if err := json.Unmarshal(raw["created_at"], &created); err != nil {
		return nil, fmt.Errorf("created_at is not a string: %w", err)
	}
	if _, err := time.Parse(time.RFC3339, created); err != nil {
		return nil, fmt.Errorf("created_at %q is not an RFC 3339 time", created)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("invalid: %w", err)
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

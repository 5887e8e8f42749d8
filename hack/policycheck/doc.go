// Package policycheck holds a test, and nothing else, that asks an
// independent NetworkPolicy semantics engine what the NetworkPolicies kiln
// installs admit (docs/security.md, issue #22). It is a Go module of its
// own so that the engine and its dependencies stay out of kiln's go.mod.
package policycheck

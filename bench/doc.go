// Package bench holds kiln's benchmarks against a real local control plane
// (internal/testcluster): how fast readiness is detected compared with
// kubectl and polling, and what `kiln create --continue` costs on a cluster
// that is already converged. Run them with bench/run.sh, which also writes
// the results into docs/benchmarks.md.
package bench

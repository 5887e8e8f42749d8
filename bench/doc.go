// Package bench holds kiln's benchmarks against a real local control plane
// (internal/testenv/testcluster), each against a peer measured in the same run:
// readiness (kiln wait as a process against kubectl rollout status and
// kubectl wait; kiln's in-process watcher as the engine overhead),
// create --continue on a ready cluster against kubectl apply (server-side
// and client-side), kiln list across contexts with one unreachable, fresh
// create and destroy, project list and status at scale against a
// kubectl-get-per-object script, bulk start, completion through API faults,
// discovery with slow contexts, the live inspector and upgrade.
//
// bench/run.sh runs them and writes every generated section of
// docs/benchmarks.md; `make bench-smoke` (part of `make test`) runs each
// once at tiny sizes so none rots.
package bench

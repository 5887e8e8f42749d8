#!/usr/bin/env bash
# Measures discovery with an engineer's kubeconfig (20 contexts, 3 of them
# with a credential plugin that takes 60 s): the time of `kiln create` and
# of `kiln status`, for kiln before the bounded, remembered discovery
# (BEFORE_REF, default main) and for the working tree, in the same run.
# This is the DISCOVERY block of bench/run.sh alone (bench/run.sh writes
# every generated section of docs/benchmarks.md):
#
#   bench/discovery.sh                 # about 5 minutes
#   BEFORE_REF=abc123 bench/discovery.sh
#   KILN_BENCH_SLOW_S=20 NO_DOCS=1 bench/discovery.sh
exec env DISCOVERY=only "$(dirname "$0")/run.sh" "$@"

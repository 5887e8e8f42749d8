#!/usr/bin/env bash
# Benchmarks `kiln gateway` (a tenant token verified on every request)
# against nginx as a plain proxy (the platform's gateway before kiln had
# its own) and oauth2-proxy (the Go proxy users pick for token checks), all
# in front of the same backend, with wrk as the load generator: the GATEWAY
# block of bench/run.sh alone, which writes its section of
# docs/benchmarks.md. Not run in CI.
#
#   bench/gateway.sh                        # 5 interleaved rounds of 10 s per peer
#   GATEWAY_ROUNDS=3 NO_DOCS=1 bench/gateway.sh
#   KILN_BENCH_GATEWAY_CONCURRENCY=64 KILN_BENCH_GATEWAY_PROXY_CPUS=0,1 bench/gateway.sh
#
# Needs nginx (Debian: apt-get install nginx-light) and wrk (apt-get install
# wrk) on PATH; oauth2-proxy on PATH or in KILN_BENCH_OAUTH2_PROXY
# (go install github.com/oauth2-proxy/oauth2-proxy/v7@v7.15.6). A peer that
# is missing is skipped; without wrk the Go client loads.
exec env GATEWAY=only "$(dirname "$0")/run.sh" "$@"

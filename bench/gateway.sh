#!/usr/bin/env bash
# Benchmarks `kiln gateway` on loopback against nginx (plain proxying, the
# platform's gateway before kiln had its own) and against no proxy, all in
# front of the same backend, with the gateway verifying a tenant token on
# every request. Prints a markdown table (median of COUNT rounds, ratios
# gateway ÷ nginx) for docs/benchmarks.md. Not run in CI.
# Each round's load generator runs on the same cores as the proxies.
#
#   bench/gateway.sh                 # COUNT=3 rounds of 10 s per peer
#   COUNT=5 KILN_BENCH_GATEWAY_SECONDS=20 KILN_BENCH_GATEWAY_CONCURRENCY=32 bench/gateway.sh
#
# Needs nginx on PATH (Debian: apt-get install nginx-light); without it the
# nginx row is skipped.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
COUNT=${COUNT:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
# Rounds interleave the peers (direct, nginx, gateway, direct, ...) so a
# change in the machine's load during the run hits all of them alike.
: >"$tmp/out.txt"
for _ in $(seq "$COUNT"); do
	go test -run '^$' -bench 'GatewayProxy' -benchtime=1x -count=1 -timeout 30m ./bench/gateway/ 2>&1 | tee -a "$tmp/out.txt"
done
go test -run '^$' -bench 'VerifyTenantToken' -count=1 ./bench/gateway/ 2>&1 | tee -a "$tmp/out.txt"
load_after=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
echo
echo "- $(date -u +%Y-%m-%d), kiln at $(git rev-parse --short HEAD 2>/dev/null || echo unknown); $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); $(nginx -v 2>&1 || true); $(go version | cut -d' ' -f3)"
echo "- load average before / after: $load_before / $load_after; concurrency ${KILN_BENCH_GATEWAY_CONCURRENCY:-16}, ${KILN_BENCH_GATEWAY_SECONDS:-10} s per peer and round, $COUNT rounds"
echo
awk '
/^BenchmarkGatewayProxy\// {
	name = $1; sub(/^BenchmarkGatewayProxy\//, "", name); sub(/-[0-9]+$/, "", name)
	for (i = 3; i < NF; i += 2) { u = $(i + 1); c = ++cnt[name, u]; v[name, u, c] = $i }
	peers[name] = 1
}
/^BenchmarkVerifyTenantToken/ { verify = $3 / 1000 }
function median(name, u,   n, a, i, j, t) {
	n = cnt[name, u]; if (n == 0) return ""
	for (i = 1; i <= n; i++) a[i] = v[name, u, i]
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function r(x, y) { return (x == "" || y == "" || y + 0 == 0) ? "–" : sprintf("%.2f×", x / y) }
END {
	print "| proxy | req/s | p50 ms | p99 ms | req/s ÷ nginx | p50 ÷ nginx | p99 ÷ nginx |"
	print "|---|---:|---:|---:|---:|---:|---:|"
	split("direct nginx kiln-gateway", order, " ")
	for (k = 1; k <= 3; k++) {
		p = order[k]; if (!(p in peers)) continue
		label = (p == "direct") ? "none (client → backend)" : (p == "nginx") ? "nginx, plain proxy" : "`kiln gateway`, token verified"
		printf "| %s | %.0f | %.2f | %.2f | %s | %s | %s |\n", label, median(p, "req/s"), median(p, "p50-ms"), median(p, "p99-ms"),
			r(median(p, "req/s"), median("nginx", "req/s")), r(median(p, "p50-ms"), median("nginx", "p50-ms")), r(median(p, "p99-ms"), median("nginx", "p99-ms"))
	}
	if (verify != "") printf "\nOne RS256 verification of a new token (RSA-3072, `creds.VerifyTenantToken`): %.0f µs; repeated tokens hit the gateway'"'"'s cache.\n", verify
}' "$tmp/out.txt"

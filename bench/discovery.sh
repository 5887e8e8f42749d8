#!/usr/bin/env bash
# Measures discovery with an engineer's kubeconfig (20 contexts, 3 of them
# with a credential plugin that takes 60 s): the time of `kiln create` and
# of `kiln status`, for kiln before the bounded, remembered discovery
# (BEFORE_REF, default main) and for the working tree, in the same run, and
# writes the result into its generated section of docs/benchmarks.md.
#
#   bench/discovery.sh                 # about 5 minutes
#   BEFORE_REF=abc123 bench/discovery.sh
#   KILN_BENCH_SLOW_S=20 NO_DOCS=1 bench/discovery.sh
#
# Needs the control-plane binaries (`make testbin`).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

BEFORE_REF=${BEFORE_REF:-main}
ITER=${ITER:-1}
export KILN_BENCH_SLOW_S=${KILN_BENCH_SLOW_S:-60}
doc=docs/benchmarks.md
begin='<!-- BEGIN GENERATED discovery by bench/discovery.sh: do not edit by hand -->'
end='<!-- END GENERATED discovery -->'
if [[ -z ${NO_DOCS:-} ]] && ! { grep -qxF "$begin" "$doc" && grep -qxF "$end" "$doc"; }; then
	echo "discovery.sh: $doc lacks the discovery section's markers" >&2
	exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

commit=$(git rev-parse --short HEAD)
[[ -n $(git status --porcelain) ]] && commit+=" (with uncommitted changes)"
before=$(git rev-parse --short "$BEFORE_REF")
mkdir "$tmp/before-src"
git archive "$BEFORE_REF" | tar -x -C "$tmp/before-src"
(cd "$tmp/before-src" && go build -o "$tmp/kiln-before" ./cmd/kiln)
go build -o "$tmp/kiln-after" ./cmd/kiln
export KILN_BENCH_KILN="$tmp/kiln-after" KILN_BENCH_KILN_BEFORE="$tmp/kiln-before"

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
SECONDS=0
go test -run '^$' -bench '^BenchmarkDiscovery$' -benchtime="${ITER}x" -count=1 -timeout 30m ./bench/ 2>&1 | tee "$tmp/out.txt"
for want in Discovery/before Discovery/after; do
	grep -q "^Benchmark$want" "$tmp/out.txt" || { echo "discovery.sh: no result for Benchmark$want" >&2; exit 1; }
done
elapsed=$SECONDS
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)

{
	echo "$begin"
	echo
	echo "Measured $started by \`bench/discovery.sh\` (ITER=$ITER, plugins answering after ${KILN_BENCH_SLOW_S}s, ${elapsed}s in total);"
	echo "before: kiln built from $BEFORE_REF ($before); after: the working tree at $commit."
	echo
	echo "- machine: $(nproc) cores, ${cpu:-unknown CPU}, $(uname -sr)"
	echo "- load average before / after the run: $load_before / $load_after"
	echo "- $(go version)"
	echo
	awk '
	/^Benchmark/ {
		name = $1; sub(/^BenchmarkDiscovery\//, "", name); sub(/-[0-9]+$/, "", name)
		for (i = 3; i < NF; i += 2) v[name, $(i + 1)] = $i
	}
	function r(x, y) { return (y + 0 == 0) ? "–" : sprintf("%.1f×", x / y) }
	END {
		print "| kiln | `kiln create kube NAME --context kiln-bench` (ms) | `kiln status kube NAME` (ms) |"
		print "|---|---:|---:|"
		printf "| before | %.0f | %.0f |\n", v["before", "create-ms"], v["before", "status-ms"]
		printf "| after | %.0f | %.0f |\n", v["after", "create-ms"], v["after", "status-ms"]
		printf "| before ÷ after | %s | %s |\n", r(v["before", "create-ms"], v["after", "create-ms"]), r(v["before", "status-ms"], v["after", "status-ms"])
	}' "$tmp/out.txt"
	echo
	echo '```text'
	grep -v -e '^goos:' -e '^goarch:' -e '^pkg:' -e '^cpu:' -e '^PASS' -e '^ok ' -e '^$' "$tmp/out.txt" || true
	echo '```'
	echo
	echo "$end"
} >"$tmp/section.md"
cat "$tmp/section.md"
if [[ -z ${NO_DOCS:-} ]]; then
	awk -v begin="$begin" -v end="$end" -v section="$tmp/section.md" '
		$0 == begin { while ((getline line < section) > 0) print line; skip = 1; next }
		$0 == end   { skip = 0; next }
		!skip
	' "$doc" >"$tmp/doc.md"
	cp "$tmp/doc.md" "$doc"
	echo "discovery.sh: wrote the results into $doc"
fi

#!/usr/bin/env bash
# bench-smoke: every benchmark once at tiny sizes (the sizes come from the
# environment the Makefile's bench-smoke target sets), so that none rots.
#
# ./bench is compiled once and its binary run five times at once, each
# run with a control plane of its own: BenchmarkUpgrade and
# BenchmarkPlatformDestroy install a kiln platform of their own, and a
# cluster hosts one; the other benchmarks are split in three runs. bench/gateway, tui and engine/provider/aws (no control
# plane) run beside them. Each part's output is printed whole when it ends,
# prefixed with its name; the script fails if any part failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
GO=${GO:-go}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

start=$SECONDS
if ! "$GO" test -c -o "$out/bench.test" ./bench/; then
	echo "bench-smoke: ./bench does not compile" >&2
	exit 1
fi
echo "bench-smoke: ./bench compiled in $((SECONDS - start)) s"

run() { # NAME CMD...: runs CMD in the background, output to $out/NAME
	local name=$1
	shift
	(
		start=$SECONDS
		"$@" >"$out/$name.log" 2>&1
		rc=$?
		echo "bench-smoke: $name took $((SECONDS - start)) s" >>"$out/$name.log"
		echo $rc >"$out/$name.rc"
	) &
}
# The test binary runs in its package directory, as go test would run it.
benchbin() { (cd bench && "$out/bench.test" -test.run '^$' -test.benchtime=1x -test.count=1 "$@"); }

# The platform benchmarks (each installs and removes platforms of its own)
# are two runs, and the project benchmarks (which share one platform with
# projects) a third: one run of them all took about 130 s, the goal for
# all of bench-smoke is 2 minutes.
lifecycle='CreateContinueReady|CreateDestroy|Discovery'
readers='FaultCompletion|List|ReadinessDetection'
run bench benchbin -test.bench "^Benchmark($lifecycle)\$" -test.timeout 15m
run readers benchbin -test.bench "^Benchmark($readers)\$" -test.timeout 15m
run projects benchbin -test.bench . -test.skip "^Benchmark(Upgrade|PlatformDestroy|$lifecycle|$readers)\$" -test.timeout 15m
run upgrade benchbin -test.bench '^BenchmarkUpgrade$' -test.timeout 10m
destroy() { KILN_BENCH_DESTROY_PROJECTS=1 benchbin -test.bench '^BenchmarkPlatformDestroy$' -test.timeout 10m; }
run destroy destroy
run others "$GO" test -run '^$' -bench . -benchtime=1x -count=1 -timeout 10m ./bench/gateway/ ./tui/ ./engine/provider/aws/
wait

rc=0
for name in bench readers projects upgrade destroy others; do
	sed "s/^/[$name] /" "$out/$name.log"
	code=$(cat "$out/$name.rc" 2>/dev/null || echo 1)
	if [ "$code" != 0 ]; then
		echo "bench-smoke: $name failed (exit $code)" >&2
		rc=1
	fi
done
echo "bench-smoke: $((SECONDS - start)) s in all"
exit $rc

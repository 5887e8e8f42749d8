#!/usr/bin/env bash
# test.sh: `go test ./...` of `make test`, with cmd/kiln's end-to-end tests
# in SHARDS test processes at once (default 3: the e2e tests mostly wait, on
# API servers, kills and timeouts, so a third shard cut CI's wall time
# where the two cores were idle).
#
# cmd/kiln's e2e tests run one after another inside their test process (they
# share that process's two control planes, kiln-a and kiln-b) and take most
# of the suite's wall time while the machine waits on API servers, kills and
# timeouts. Each shard is a test process of its own, with its own pair of
# control planes; the tests (found in the sources) are dealt longest first
# to the least loaded shard, so every test runs in exactly one shard
# (checked below). The other
# packages run beside the shards as one `go test` (then, with
# KILN_AFTER_PKGS=1, policycheck and bench-smoke), and so does
# `go test -race -short` of engine, tui, creds, internal/cli and
# internal/gateway (its real-node tests left to the packages' run).
#
# KILN_TEST_FLAGS adds go test flags to every process (e.g. -short).
# Output lines are prefixed with their process ([pkgs], [e2e-1], …); the
# exit status is the first failure's.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
TIMEOUT=${TEST_TIMEOUT:-60m}
SHARDS=${KILN_E2E_SHARDS:-3}
# shellcheck disable=SC2206 # extra go test flags, split on spaces (e.g. -short)
flags=(${KILN_TEST_FLAGS:-})

mapfile -t tests < <(grep -h '^func Test[A-Za-z0-9_]*(t \*testing.T)' cmd/kiln/*_test.go |
	sed -E 's/^func (Test[A-Za-z0-9_]*)\(.*/\1/' | sort -u)
if [ "${#tests[@]}" -eq 0 ]; then
	echo "test.sh: found no tests in cmd/kiln" >&2
	exit 1
fi

# Tests are dealt longest first, each to the shard with the least expected
# time (greedy): the seconds below are the "--- PASS (Ns)" lines of a CI
# run on the 2-core machine (2026-12-04, both shards beside the packages;
# TestKilledCreateConverges's parallel lanes by its longer lane) for the
# tests over 20 s; every other test counts as their mean, about 10 s.
# KILN_TEST_DEAL=1 prints the shards and their expected seconds, and stops.
declare -A weight=(
	[TestCommandsSurviveAnAPIServerRestart]=408
	[TestCommandsCompleteThroughAPIFaults]=132
	[TestCommandsCompleteUnderHostileAnswers]=122
	[TestAWSKilledCreateConverges]=119
	[TestAWSUpgradeInfrastructure]=101
	[TestDestroyKilledAtEveryStepIsFinishedByDestroy]=97
	[TestKilledUpgradeConverges]=89
	[TestKilledCreateConverges]=71
	[TestEveryHintRunsAndDoesWhatItSays]=41
	[TestKilnOnARealNode]=35
	[TestAWSKilledCreateWithAccessConverges]=34
	[TestUpgradePlanConfirmApply]=28
	[TestAWSAccessEntries]=27
	[TestAWSDestroyWaitsForLoadBalancers]=26
	[TestProjectLifecycle]=24
)
declare -a regex load
for ((s = 0; s < SHARDS; s++)); do load[$s]=0; done
mapfile -t order < <(for t in "${tests[@]}"; do echo "${weight[$t]:-10} $t"; done | sort -k1,1nr -k2,2 | cut -d' ' -f2)
for t in "${order[@]}"; do
	best=0
	for ((s = 1; s < SHARDS; s++)); do
		[ "${load[$s]}" -lt "${load[$best]}" ] && best=$s
	done
	regex[$best]="${regex[$best]:+${regex[$best]}|}$t"
	load[$best]=$((load[best] + ${weight[$t]:-10}))
done
dealt=0
for s in "${!regex[@]}"; do
	n=$(tr '|' '\n' <<<"${regex[$s]}" | wc -l)
	dealt=$((dealt + n))
done
if [ "$dealt" -ne "${#tests[@]}" ]; then
	echo "test.sh: dealt $dealt of ${#tests[@]} tests" >&2
	exit 1
fi
if [ "${KILN_TEST_DEAL:-}" = 1 ]; then
	for s in "${!regex[@]}"; do echo "e2e-$((s + 1)) (~${load[$s]} s): ${regex[$s]}"; done
	exit 0
fi

mapfile -t pkgs < <($GO list ./... | grep -v '/cmd/kiln$')

# prefixed NAME COMMAND...: run COMMAND, its output prefixed [NAME], then
# its exit status and the seconds since the suite started (where CI's
# wall time goes).
begin=$SECONDS
prefixed() {
	local name=$1
	shift
	set +e
	"$@" 2>&1 | sed -u "s/^/[$name] /"
	local rc=${PIPESTATUS[0]}
	set -e
	echo "[$name] exit $rc at $((SECONDS - begin)) s"
	return "$rc"
}

# timed runs go test -v and keeps of a passing top-level test only its
# "--- PASS: TestX (12.34s)" line (the seconds the weights above come
# from), not its subtests' lines that follow it; a failing or unfinished
# test's output is printed whole, as without -v.
timed() {
	set +e
	"$@" 2>&1 | awk '
		/^=== RUN   Test[^\/]*$/ { buf = ""; intest = 1; passed = 0 }
		passed && /^[ \t]/ { next }
		{ passed = 0 }
		intest { buf = buf $0 "\n" }
		!intest { print; fflush() }
		/^--- (PASS|SKIP): Test/ && intest { print; fflush(); buf = ""; intest = 0; passed = 1; next }
		/^--- FAIL: Test/ && intest { printf "%s", buf; fflush(); buf = ""; intest = 0 }
		END { if (intest) printf "%s", buf }'
	local rc=${PIPESTATUS[0]}
	set -e
	return "$rc"
}

# After the packages (which end long before the e2e shards), the same
# process slot runs `make policycheck` and `make bench-smoke` when
# KILN_AFTER_PKGS=1 (make test sets it): the wall time of the whole suite is
# then the longest e2e shard's, not the shard's plus theirs. A failure of the
# packages does not stop them; the first failure's status is kept.
pkgs_then() {
	local rc=0
	prefixed pkgs $GO test -timeout "$TIMEOUT" -count=1 ${flags[@]+"${flags[@]}"} "${pkgs[@]}" || rc=$?
	if [ "${KILN_AFTER_PKGS:-}" = 1 ]; then
		prefixed policy make --no-print-directory policycheck GO="$GO" || { [ "$rc" -ne 0 ] || rc=1; }
		prefixed bench make --no-print-directory bench-smoke GO="$GO" || { [ "$rc" -ne 0 ] || rc=1; }
	fi
	return "$rc"
}

pids=()
pkgs_then &
pids+=($!)
for s in "${!regex[@]}"; do
	prefixed "e2e-$((s + 1))" timed $GO test -v -timeout "$TIMEOUT" -count=1 ${flags[@]+"${flags[@]}"} -run "^(${regex[$s]})\$" ./cmd/kiln/ &
	pids+=($!)
done
# The race detector over the packages with goroutines (DEVELOPERS.md:
# engine, tui, creds, cli), -short so it fits beside the e2e tests;
# KILN_RACE=0 leaves it out.
if [ "${KILN_RACE:-1}" != 0 ]; then
	# creds' Secret Service tests list every kiln item in the login
	# collection: beside [pkgs] (which runs them too) they need a Secret
	# Service of their own, or each sees the other's items.
	ss=()
	[ "${KILN_TEST_SECRET_SERVICE:-}" = 1 ] && ss=(hack/with-secret-service.sh)
	# The gateway's too (its event loop is one goroutine beside the
	# others), without its real-node tests: [pkgs] runs those, and a
	# second real node beside its own would wait for it.
	prefixed race ${ss[@]+"${ss[@]}"} $GO test -race -short -timeout "$TIMEOUT" -count=1 -skip 'OnARealNode$' ./engine/... ./tui/... ./creds/... ./internal/cli/... ./internal/gateway/ &
	pids+=($!)
fi
rc=0
for p in "${pids[@]}"; do
	if ! wait "$p"; then
		[ "$rc" -ne 0 ] || rc=1
	fi
done
exit "$rc"

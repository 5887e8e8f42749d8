# kiln — build, test and demo. `make demo` and `make test` are the two
# commands a fresh machine needs (see README.md).

SHELL := /usr/bin/env bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo none)
DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(DATE)
GORELEASER := github.com/goreleaser/goreleaser/v2@v2.15.1
KUBECONFIG_LOCAL := $(CURDIR)/.cache/cluster/kubeconfig
TEST_TIMEOUT ?= 60m

.PHONY: all build docs test unit policycheck fmt-check vet testbin testbin-realnode cluster-up cluster-down demo bench bench-smoke goreleaser-check clean

all: build

# Static, as the release builds it (CGO_ENABLED=0): the same binary is the
# demo's gateway image on a real node.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/kiln ./cmd/kiln

## docs: regenerate the command reference, docs/reference/ (one page per
## command), from kiln's cobra command tree; internal/refdoc's test fails
## when the committed pages are stale.
docs:
	$(GO) run ./hack/gendocs

## testbin: build the pinned control-plane binaries into .cache/testbin (cached)
testbin:
	@hack/build-testbin.sh

## testbin-realnode: testbin, then the real node's kubelet, kube-proxy and
## CRI clean-up tool (a set of their own, stamp-cached like testbin)
testbin-realnode:
	@hack/build-testbin.sh realnode

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.cache/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	cd hack/testbin && $(GO) vet ./...
	cd hack/policycheck && $(GO) vet ./...
	cd internal/testenv/awsemu/kumoregion && $(GO) vet ./...

## test: format, vet, `goreleaser check`, then unit and integration tests
## (hack/test.sh: every package, cmd/kiln's e2e in two processes at once)
## against a real control plane, the AWS emulator and a real Secret Service,
## and, once the packages are done and beside the e2e processes, policycheck
## (an independent NetworkPolicy engine's verdict on kiln's NetworkPolicies)
## and every benchmark once at tiny sizes (bench-smoke).
test: fmt-check vet goreleaser-check testbin-realnode build
	hack/with-secret-service.sh env KILN_TEST_SECRET_SERVICE=1 KILN_AFTER_PKGS=1 GO=$(GO) TEST_TIMEOUT=$(TEST_TIMEOUT) hack/test.sh

## bench-smoke: compile and run every benchmark once (-benchtime=1x) at tiny
## sizes so none rots; no figures are kept (hack/bench-smoke.sh). ./bench is
## compiled once and run five times at once, each with a control plane
## of its own (BenchmarkUpgrade and BenchmarkPlatformDestroy install a platform
## of their own, and a cluster hosts one; the other benchmarks are split in
## three runs), beside the others (no control plane).
BENCH_SMOKE_ENV := KILN_BENCH_SCALE_SIZES=2,3 KILN_BENCH_PROJECTS=3 KILN_BENCH_BULK=2 \
	KILN_BENCH_CONCURRENCY=2 KILN_BENCH_SETTLE_S=60 KILN_BENCH_INSPECT_PROJECTS=3 KILN_BENCH_IDLE_S=1 \
	KILN_BENCH_SLOW_S=1 KILN_BENCH_UPGRADE_PROJECTS=2 KILN_BENCH_FAULT_RATES=10 KILN_BENCH_FAULT_SCENARIOS=none KILN_BENCH_LIST_ITER=1 \
	KILN_BENCH_GATEWAY_SECONDS=1
bench-smoke: testbin
	$(BENCH_SMOKE_ENV) GO=$(GO) hack/bench-smoke.sh

## unit: fast feedback (~1 min): -short skips the end-to-end tests of the
## binary; package tests of lock, readiness and testcluster still start a
## control plane of their own (needs `make testbin`).
unit:
	$(GO) test -short -count=1 ./...
	$(MAKE) --no-print-directory policycheck

## policycheck: kiln's NetworkPolicies, evaluated by cyclonus's policy engine
## (hack/policycheck, a module of its own so the engine stays out of go.mod)
policycheck:
	cd hack/policycheck && $(GO) test -count=1 ./...

goreleaser-check:
	$(GO) run $(GORELEASER) check

## cluster-up: the local control plane (context kiln-local); its node is real
## when this machine can run one and `make testbin-realnode` was run (see
## hack/cluster), else two kwok nodes. KILN_DEMO_NODE=kwok|real chooses.
cluster-up: testbin
	$(GO) run ./hack/cluster up

cluster-down:
	$(GO) run ./hack/cluster down

## demo: kiln's main job on the built-in local control plane, ending with a
## request through the front door. On a machine that can run a real node
## (root, Debian: hack/realnode-deps.sh installs its packages and builds its
## binaries) the cluster's only node is real and the request reaches a real
## pod; else kwok nodes, and the demo says why it cannot send the request.
demo: build testbin
	@hack/demo.sh

bench: testbin build
	bench/run.sh

clean:
	rm -rf bin dist

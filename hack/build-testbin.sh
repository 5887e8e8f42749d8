#!/usr/bin/env bash
# Builds the pinned control-plane binaries (hack/testbin/go.mod) into
# .cache/testbin. A stamp file records the hash of go.mod/go.sum and the Go
# version; when it matches and every binary is present, nothing is rebuilt.
# A set built once is also kept in the user's cache (~/.cache/kiln/testbin,
# by stamp), from which a fresh checkout links it instead of building.
#
# `build-testbin.sh realnode` (make testbin-realnode) also builds the real
# node's binaries (kubelet, kube-proxy, kiln-cri-clean, CoreDNS,
# kube-router) as a set of their own with its own
# stamp (.stamp-realnode): a checkout that never starts a real node does not
# pay for them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${KILN_TESTBIN_DIR:-$root/.cache/testbin}
mod=$root/hack/testbin
declare -A pkgs=(
  [etcd]=./cmd/etcd
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
  [kwok]=sigs.k8s.io/kwok/cmd/kwok
  [kubelet]=k8s.io/kubernetes/cmd/kubelet
  [kube-proxy]=k8s.io/kubernetes/cmd/kube-proxy
  [kiln-cri-clean]=./cmd/kiln-cri-clean
  [coredns]=.
  [kube-router]=github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
)
# The module each binary is built in: CoreDNS and kube-router have a module
# of their own (hack/testbin/coredns, hack/testbin/kube-router) so their
# dependencies do not move the control plane's.
declare -A mods=([coredns]=$mod/coredns [kube-router]=$mod/kube-router)
stamp=$( (cat "$mod/go.mod" "$mod/go.sum" "$mod"/cmd/*/main.go; go version) | sha256sum | cut -c1-16)
realnode_stamp=$( (echo "$stamp"; cat "$mod/coredns/go.mod" "$mod/coredns/go.sum" "$mod/coredns/main.go" "$mod/kube-router/go.mod" "$mod/kube-router/go.sum") | sha256sum | cut -c1-16)
# The user's cache of built sets ($KILN_TESTBIN_CACHE; an empty value turns
# it off), each set in a folder named by its stamp.
cache=${KILN_TESTBIN_CACHE-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/testbin}
mkdir -p "$out"

# build NAME STAMPFILE STAMP BIN... builds one set unless its stamp matches
# and every binary is there.
build() {
  local set=$1 stampfile=$out/$2 stamp=$3; shift 3
  local bins=("$@")
  if [ "$(cat "$stampfile" 2>/dev/null)" = "$stamp" ]; then
    local missing=0 b
    for b in "${bins[@]}"; do [ -x "$out/$b" ] || missing=1; done
    if [ "$set" = core ] && [ ! -f "$out/kwok-stages.yaml" ]; then missing=1; fi
    if [ $missing = 0 ]; then
      echo "testbin: $set up to date in $out"
      return 0
    fi
  fi
  rm -f "$stampfile"
  # A set built before by any checkout on this machine (the user's cache,
  # keyed by the same stamp) is linked in instead of relinked from Go's
  # build cache: a fresh clone then starts its tests half a minute sooner.
  local shared=$cache/$set-$stamp extra=()
  [ "$set" = core ] && extra=(kwok-stages.yaml)
  if [ -n "$cache" ] && [ -f "$shared/.complete" ]; then
    for b in "${bins[@]}" "${extra[@]}"; do
      ln -f "$shared/$b" "$out/$b" 2>/dev/null || cp -f "$shared/$b" "$out/$b"
    done
    echo "$stamp" > "$stampfile"
    echo "testbin: $set linked from $shared"
    return 0
  fi
  echo "testbin: building ${#bins[@]} $set binaries into $out (a first build is slow on 2 cores: see README; later runs only relink)"
  local i=0 start b
  for b in "${bins[@]}"; do
    i=$((i+1))
    start=$(date +%s)
    printf 'testbin: [%d/%d] %s ... ' "$i" "${#bins[@]}" "$b"
    (cd "${mods[$b]:-$mod}" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$out/$b.tmp" "${pkgs[$b]}")
    mv "$out/$b.tmp" "$out/$b"
    echo "done in $(( $(date +%s) - start ))s"
  done
  if [ "$set" = core ]; then
    # kwok simulates nodes and pods through Stage objects. Take the upstream
    # "fast" stages from the pinned kwok module (not vendored into this repo).
    local kwokdir st f
    kwokdir=$(cd "$mod" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
    st=$kwokdir/kustomize/stage
    {
      for f in node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml \
               pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
        echo "---"
        cat "$st/$f"
      done
    } > "$out/kwok-stages.yaml.tmp"
    mv "$out/kwok-stages.yaml.tmp" "$out/kwok-stages.yaml"
  fi
  echo "$stamp" > "$stampfile"
  if [ -n "$cache" ] && mkdir -p "$shared.tmp.$$" 2>/dev/null; then
    for b in "${bins[@]}" "${extra[@]}"; do
      ln -f "$out/$b" "$shared.tmp.$$/$b" 2>/dev/null || cp -f "$out/$b" "$shared.tmp.$$/$b"
    done
    touch "$shared.tmp.$$/.complete"
    rm -rf "$shared" && mv "$shared.tmp.$$" "$shared" || rm -rf "$shared.tmp.$$"
  fi
  echo "testbin: $set ready in $out"
}

build core .stamp "$stamp" etcd kube-apiserver kube-controller-manager kube-scheduler kwok
case "${1:-}" in
  "") ;;
  realnode) build realnode .stamp-realnode "$realnode_stamp" kubelet kube-proxy kiln-cri-clean coredns kube-router ;;
  *) echo "usage: $0 [realnode]" >&2; exit 2 ;;
esac

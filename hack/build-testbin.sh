#!/usr/bin/env bash
# Builds the pinned control-plane binaries (hack/testbin/go.mod) into
# .cache/testbin. A stamp file records the hash of go.mod/go.sum and the Go
# version; when it matches and every binary is present, nothing is rebuilt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${KILN_TESTBIN_DIR:-$root/.cache/testbin}
mod=$root/hack/testbin
bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
declare -A pkgs=(
  [etcd]=./cmd/etcd
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
  [kwok]=sigs.k8s.io/kwok/cmd/kwok
)
stamp=$( (cat "$mod/go.mod" "$mod/go.sum" "$mod/cmd/etcd/main.go"; go version) | sha256sum | cut -c1-16)
mkdir -p "$out"
if [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp" ]; then
  missing=0
  for b in "${bins[@]}"; do [ -x "$out/$b" ] || missing=1; done
  [ -f "$out/kwok-stages.yaml" ] || missing=1
  if [ $missing = 0 ]; then
    echo "testbin: up to date in $out"
    exit 0
  fi
fi
rm -f "$out/.stamp"
cd "$mod"
echo "testbin: building ${#bins[@]} binaries into $out (the first build takes 10-15 minutes on 2 cores; later runs only relink)"
i=0
for b in "${bins[@]}"; do
  i=$((i+1))
  start=$(date +%s)
  printf 'testbin: [%d/%d] %s ... ' "$i" "${#bins[@]}" "$b"
  CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$out/$b.tmp" "${pkgs[$b]}"
  mv "$out/$b.tmp" "$out/$b"
  echo "done in $(( $(date +%s) - start ))s"
done
# kwok simulates nodes and pods through Stage objects. Take the upstream
# "fast" stages from the pinned kwok module (not vendored into this repo).
kwokdir=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
st=$kwokdir/kustomize/stage
{
  for f in node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml \
           pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    echo "---"
    cat "$st/$f"
  done
} > "$out/kwok-stages.yaml.tmp"
mv "$out/kwok-stages.yaml.tmp" "$out/kwok-stages.yaml"
echo "$stamp" > "$out/.stamp"
echo "testbin: ready in $out"

#!/usr/bin/env bash
# The demo: kiln's main job on the local control plane started by
# `make cluster-up` (context kiln-local). Safe to run again: create runs with
# --continue ("create or continue").
set -euo pipefail
cd "$(dirname "$0")/.."
export KUBECONFIG=$PWD/.cache/cluster/kubeconfig
# Keep the demo's token dir and keyring inside the checkout, away from the
# user's own state.
export XDG_STATE_HOME=$PWD/.cache/demo/state
export XDG_DATA_HOME=$PWD/.cache/demo/data
export KILN_KEYRING_PASSPHRASE=${KILN_KEYRING_PASSPHRASE:-kiln-demo}
kiln=bin/kiln
flags=(--keyring-backend file --headless)

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "kiln version"
$kiln version
step "the local cluster (kubectl get nodes)"
kubectl --context kiln-local get nodes
step "kiln create kube demo --context kiln-local --continue"
$kiln create kube demo --context kiln-local --continue "${flags[@]}"
step "kiln create kube demo --context kiln-local   (again, without --continue: exit 3, nothing changed)"
set +e
$kiln create kube demo --context kiln-local "${flags[@]}"
echo "exit code: $?"
set -e
step "kiln wait kube demo"
$kiln wait kube demo --timeout 2m "${flags[@]}"
step "kiln project create kube demo default/web   (Secret → Deployment → Service → route kiln-system/default.web, each verified)"
$kiln project create kube demo default/web "${flags[@]}"
step "kiln status kube demo"
$kiln status kube demo "${flags[@]}"
step "done"
echo "The local control plane keeps running: export KUBECONFIG=$KUBECONFIG"
echo "Try: bin/kiln status kube demo --keyring-backend file   (with XDG_STATE_HOME=$XDG_STATE_HOME)"
echo "Tear down: bin/kiln destroy kube demo --yes ...; make cluster-down"

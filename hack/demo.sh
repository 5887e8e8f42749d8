#!/usr/bin/env bash
# The demo: kiln's main job on the local control plane (context kiln-local),
# ending with a request through the front door. Safe to run again: create
# runs with --continue ("create or continue").
#
# The cluster's only node is real when this machine can run one (root and
# Debian: hack/realnode-deps.sh installs containerd, runc, the CNI plugins,
# iptables and ipset, and builds the kubelet, kube-proxy, CoreDNS and
# kube-router): kiln's gateway and the project really run, and the last step
# gets the project's page through the front door with its tenant's token
# (200) and without (401). Otherwise the node is kwok's, no pod runs, and
# the demo says so instead of sending the request. KILN_DEMO_NODE=kwok or
# =real chooses.
set -euo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}
mode=${KILN_DEMO_NODE:-auto}
if [ "$mode" != kwok ]; then
  if ! hack/realnode-deps.sh; then
    [ "$mode" = real ] && { echo "demo: KILN_DEMO_NODE=real, but this machine cannot run a real node (above)" >&2; exit 1; }
    echo "demo: no real node on this machine (above): the demo's pods run on kwok nodes"
  fi
fi
$go run ./hack/cluster up
$go run ./hack/cluster images

export KUBECONFIG=$PWD/.cache/cluster/kubeconfig
# Keep the demo's token dir and keyring inside the checkout, away from the
# user's own state.
export XDG_STATE_HOME=$PWD/.cache/demo/state
export XDG_DATA_HOME=$PWD/.cache/demo/data
export KILN_KEYRING_PASSPHRASE=${KILN_KEYRING_PASSPHRASE:-kiln-demo}
kiln=bin/kiln
flags=(--keyring-backend file --headless)
node=$(cat .cache/cluster/node)

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "kiln version"
$kiln version
step "the local cluster (kubectl get nodes)"
kubectl --context kiln-local get nodes -o wide
echo "node: $node"
step "kiln create kube demo --context kiln-local -c hack/demo-config.yaml --continue"
$kiln create kube demo --context kiln-local -c hack/demo-config.yaml --continue "${flags[@]}"
step "kiln create kube demo --context kiln-local -c hack/demo-config.yaml   (again, without --continue: exit 3, nothing changed)"
set +e
$kiln create kube demo --context kiln-local -c hack/demo-config.yaml "${flags[@]}"
echo "exit code: $?"
set -e
step "kiln wait kube demo"
$kiln wait kube demo --timeout 2m "${flags[@]}"
step "kiln project create kube demo default/web   (Secret → Deployment → Service → route kiln-system/default.web, each verified)"
$kiln project create kube demo default/web "${flags[@]}"
step "kiln wait kube demo --probe   (API readiness, then requests through the gateway with each tenant's token)"
$kiln wait kube demo --probe --timeout 2m "${flags[@]}"
step "kiln status kube demo"
$kiln status kube demo "${flags[@]}"

step "a request through the front door"
status=$($kiln status kube demo -o json "${flags[@]}")
addr=$(jq -r 'select(.type=="frontdoor") | .address' <<<"$status")
tokens=$(jq -r 'select(.type=="result") | .token_dir // empty' <<<"$status")
host=web.default.demo.kiln.test
case $node in
real:*)
  [ -n "$addr" ] || { echo "demo: the front door has no address (kiln status above says why)" >&2; exit 1; }
  [ -n "$tokens" ] || { echo "demo: kiln status names no token dir" >&2; exit 1; }
  # The token goes from its file to curl's header; it is never printed.
  TOKEN=$(cat "$tokens/tokens/default")
  echo "\$ TOKEN=\$(cat $tokens/tokens/default)"
  echo "\$ curl -H 'Host: $host' -H \"Authorization: Bearer \$TOKEN\" http://$addr/"
  body=$(curl -sS --max-time 10 -w '\nHTTP %{http_code}' -H "Host: $host" -H "Authorization: Bearer $TOKEN" "http://$addr/")
  echo "$body"
  [ "$(tail -n1 <<<"$body")" = "HTTP 200" ] || { echo "demo: expected 200 with the tenant's token" >&2; exit 1; }
  echo "\$ curl -H 'Host: $host' http://$addr/      (no token)"
  body=$(curl -sS --max-time 10 -w '\nHTTP %{http_code}' -H "Host: $host" "http://$addr/")
  echo "$body"
  [ "$(tail -n1 <<<"$body")" = "HTTP 401" ] || { echo "demo: expected 401 without a token" >&2; exit 1; }
  echo "(status says network isolation unknown: the node's kube-router runs as a process on this machine,"
  echo " not as a DaemonSet kiln can see; it does enforce kiln's NetworkPolicies.)"
  ;;
*)
  echo "not sent: the node is kwok's, where no container runs ($node)"
  echo "the front door would be: curl -H 'Host: $host' -H \"Authorization: Bearer \$(cat ${tokens:-TOKEN_DIR}/tokens/default)\" http://${addr:-ADDRESS}/"
  ;;
esac

step "done"
echo "The local control plane keeps running: export KUBECONFIG=$KUBECONFIG"
echo "Try: bin/kiln status kube demo --keyring-backend file   (with XDG_STATE_HOME=$XDG_STATE_HOME)"
echo "Tear down: bin/kiln destroy kube demo --yes ...; make cluster-down"
case $node in real:*) echo "While it runs it holds this machine's real node: the real-node tests of make test fail at once, naming it, until make cluster-down." ;; esac

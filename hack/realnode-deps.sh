#!/usr/bin/env bash
# What a real node needs (internal/testenv/testcluster, Options.RealNode): the Debian
# packages below, installed when missing, then `make testbin-realnode`.
# Used by .ci/run (the tests' real node) and by `make demo` (whose cluster's
# only node is real when this machine can run one).
#
#   hack/realnode-deps.sh           install (as root, with apt-get) and build
#   hack/realnode-deps.sh --check   exit 0 if nothing is missing, else say what
#
# containerd and runc run the pods, the CNI plugins wire them to a bridge,
# kube-proxy writes iptables rules, kube-router iptables and ipset rules for
# NetworkPolicy, the node's bridge is made with ip.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
command -v iptables >/dev/null || need+=(iptables)
command -v ip >/dev/null || need+=(iproute2)
command -v ipset >/dev/null || need+=(ipset)
if [ "${1:-}" = --check ]; then
  [ "$(id -u)" = 0 ] || { echo "realnode: not root"; exit 1; }
  [ ${#need[@]} -eq 0 ] || { echo "realnode: missing Debian packages ${need[*]}"; exit 1; }
  exit 0
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "realnode: missing ${need[*]}; install them as root with apt-get (Debian package names)" >&2
    exit 1
  fi
  echo "realnode: installing ${need[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
exec make --no-print-directory testbin-realnode

#!/usr/bin/env bash
# netpol-rules.sh add|delete: the iptables rules that hand the first packet of
# every new pod connection to the dev node's NetworkPolicy engine (hack/netpol,
# kube-network-policies) on NFQUEUE $NETPOL_QUEUE. The engine accepts or drops
# it; later packets of an accepted connection pass as ESTABLISHED.
#
# Upstream installs the same diversion as an nftables "queue" rule, which
# kernels without nft_queue reject; the iptables NFQUEUE target needs only
# xt_NFQUEUE. Nothing is queued with --queue-bypass: while the engine is not
# running, new pod connections are dropped (fail closed), never let through.
#
#   mangle POSTROUTING → MCP-NETPOL     pod-to-pod and pod-to-outside, after
#                                       Service DNAT, before the CNI's SNAT
#   filter INPUT → MCP-NETPOL-INPUT     pods to the node itself (the API
#                                       server, the kubelet), after DNAT
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# ipt TABLE ARGS...: iptables with the xtables lock.
ipt() { iptables -w -t "$@"; }

delete() {
  local spec t hook ch
  for spec in "mangle POSTROUTING $NETPOL_CHAIN" "filter INPUT $NETPOL_INPUT_CHAIN"; do
    read -r t hook ch <<< "$spec"
    while ipt "$t" -D "$hook" -j "$ch" 2>/dev/null; do :; done
    ipt "$t" -F "$ch" 2>/dev/null || true
    ipt "$t" -X "$ch" 2>/dev/null || true
  done
}

add() {
  delete
  ipt mangle -N "$NETPOL_CHAIN"
  # The jump first: the owner match is valid only in a chain reached from
  # OUTPUT or POSTROUTING.
  ipt mangle -I POSTROUTING -j "$NETPOL_CHAIN"
  ipt mangle -A "$NETPOL_CHAIN" -m conntrack --ctstate ESTABLISHED,RELATED -j RETURN
  # The node's own root processes (the kubelet's probes, the tests) are not
  # pods; upstream exempts them the same way.
  ipt mangle -A "$NETPOL_CHAIN" -m owner --uid-owner 0 -j RETURN
  ipt mangle -A "$NETPOL_CHAIN" -s "$POD_CIDR" -j NFQUEUE --queue-num "$NETPOL_QUEUE"
  ipt mangle -A "$NETPOL_CHAIN" -d "$POD_CIDR" -j NFQUEUE --queue-num "$NETPOL_QUEUE"

  ipt filter -N "$NETPOL_INPUT_CHAIN"
  ipt filter -I INPUT -j "$NETPOL_INPUT_CHAIN"
  ipt filter -A "$NETPOL_INPUT_CHAIN" -m conntrack --ctstate ESTABLISHED,RELATED -j RETURN
  ipt filter -A "$NETPOL_INPUT_CHAIN" -s "$POD_CIDR" -j NFQUEUE --queue-num "$NETPOL_QUEUE"
}

case "${1:-}" in
  add) add ;;
  delete) delete ;;
  *) die "usage: netpol-rules.sh add|delete" ;;
esac

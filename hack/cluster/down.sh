#!/usr/bin/env bash
# down.sh: tears the dev cluster down and leaves nothing behind: the node's
# processes and containerd's shims, the pods' mounts, network namespaces,
# bridge, iptables chains and cgroups, the CNI cache, the sysctls it changed,
# and the state dir. Idempotent: with nothing running it only checks that
# nothing is left. Exits non-zero if something could not be removed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_root dev-down

# stop NAME...: SIGTERM to the named components, then SIGKILL after 3 s. The
# state is deleted anyway, and kube-apiserver may ignore SIGTERM for 15 s.
stop() {
  local c pid pids=()
  for c in "$@"; do
    pid=$(pid_of "$c")
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && pids+=("$pid")
  done
  [ ${#pids[@]} -eq 0 ] && return 0
  for _ in $(seq 1 6); do
    any_alive "${pids[@]}" || return 0
    sleep 0.5
  done
  kill -9 "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 1 10); do any_alive "${pids[@]}" && sleep 0.2; done
  return 0
}
any_alive() {
  local p
  for p in "$@"; do kill -0 "$p" 2>/dev/null && return 0; done
  return 1
}

if [ -n "$(our_pids)" ] || [ -d "$STATE" ]; then
  step "tearing down the dev cluster (state in ${STATE#"$ROOT"/})"
else
  step "no dev cluster running; checking that nothing is left behind"
fi

# 1. Let the kubelet stop every pod itself, so CNI DEL removes each pod's
#    network (veth, iptables rules, IP) the normal way. Controllers and the
#    scheduler go first, so nothing creates or places a new pod meanwhile.
if [ -n "$(pid_of kubelet)" ] && kc get --raw /readyz >/dev/null 2>&1; then
  stop kube-controller-manager kube-scheduler
  step "stopping pods"
  kc delete pods --all --all-namespaces --force --grace-period=0 --wait=false >/dev/null 2>&1 || true
  running_tasks() { ctrk tasks ls 2>/dev/null | awk 'NR > 1 && $3 == "RUNNING"' | grep -q .; }
  for _ in $(seq 1 60); do running_tasks || break; sleep 0.5; done
fi

# 2. Stop the node's processes; containerd last, after its leftover
#    containers are gone.
[ -n "$(our_pids)" ] && step "stopping the node's processes"
stop kube-proxy kubelet kube-scheduler kube-controller-manager netpol kube-apiserver etcd
# Our pod sandboxes' ids: the CNI plugins name what they leave on the host
# after them (iptables chains, result files), and only those are removed.
sandbox_ids() {
  # containerd's containers (CRI sandboxes are its pause containers), its
  # sandbox directories, and the CNI result cache of our network.
  [ -n "$(pid_of containerd)" ] && ctrk containers ls -q 2>/dev/null || true
  local d f
  for d in "$STATE"/containerd/{root,state}/io.containerd.grpc.v1.cri/sandboxes/*/; do
    [ -d "$d" ] && basename "$d"
  done
  for f in /var/lib/cni/results/"$CNI_NETWORK"-*-eth0; do
    [ -e "$f" ] && { f=${f##*/"$CNI_NETWORK"-}; echo "${f%-eth0}"; }
  done
  return 0
}
ids=$(sandbox_ids | sort -u)
if [ -n "$(pid_of containerd)" ]; then
  # Network namespaces of leftover sandboxes, removed after containerd stops.
  netns=$(for c in $(ctrk containers ls -q 2>/dev/null); do
    ctrk containers info "$c" 2>/dev/null | grep -o '"/var/run/netns/cni-[^"]*"' | tr -d '"' || true
  done | sort -u)
  for t in $(ctrk tasks ls -q 2>/dev/null); do ctrk tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true; done
  sleep 0.5
  for t in $(ctrk tasks ls -q 2>/dev/null); do ctrk tasks delete -f "$t" >/dev/null 2>&1 || true; done
  for c in $(ctrk containers ls -q 2>/dev/null); do ctrk containers delete "$c" >/dev/null 2>&1 || true; done
  stop containerd
fi
# Anything of ours still alive: shims whose containerd went away, or
# components whose PID file was lost.
for pid in $(our_pids); do kill -9 "$pid" 2>/dev/null || true; done

# 3. Mounts under the state dir (pod volumes, rootfs overlays, shm), innermost
#    first, and network namespaces of our sandboxes (the ones named by
#    containerd, and any created while the cluster ran).
step "removing mounts, network namespaces, bridge, iptables chains and cgroups"
awk -v s="$STATE/" 'index($2, s) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do
  umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
done || true
started=$(cat "$STATE/host/started" 2>/dev/null || echo "")
# /run/netns is a mount point of the cluster's own when the directory is
# (up.sh makes it one, so that `ip netns add` does not hide the pods'
# namespaces under a mount of its own): take it away first, so that the
# namespaces left in the directory can be deleted.
if grep -qx /var/run/netns "$STATE/host/created-dirs" 2>/dev/null; then
  while mountpoint -q /run/netns; do umount /run/netns 2>/dev/null || umount -l /run/netns || break; done
fi
for ns in ${netns:-}; do ip netns delete "$(basename "$ns")" 2>/dev/null || true; done
if [ -n "$started" ]; then
  for f in /var/run/netns/cni-*; do
    if [ -e "$f" ] && [ "$(stat -c %Y "$f")" -ge "$started" ]; then
      ip netns delete "$(basename "$f")" 2>/dev/null || true
    fi
  done
fi

# 4. The pods' bridge and the iptables chains of the CNI bridge plugin (tagged
#    with our network's name), kube-proxy (its own --cleanup) and the kubelet.
ip link delete "$CNI_BRIDGE" 2>/dev/null || true
if command -v iptables >/dev/null; then
  for ch in $(iptables -w -t nat -S POSTROUTING 2>/dev/null | grep -F "name: \\\"$CNI_NETWORK\\\"" | grep -o -- '-j CNI-[0-9a-f]*' | awk '{print $2}' || true); do
    iptables -w -t nat -S POSTROUTING | grep -F -- "-j $ch" | sed 's/^-A /-D /' | while read -r rule; do
      eval "iptables -w -t nat $rule" 2>/dev/null || true
    done || true
    iptables -w -t nat -F "$ch" 2>/dev/null || true
    iptables -w -t nat -X "$ch" 2>/dev/null || true
  done
  # The plugin's chains that lost their POSTROUTING jump, or never got it (a
  # pod's network set up or torn down while the kubelet stopped): found by
  # our network's name in their own rules, and by name when still empty.
  # The bridge plugin names a pod's chain "CNI-" and the first 24 hex digits
  # of sha512(network name + sandbox id) (containernetworking/plugins
  # pkg/utils FormatChainName); only our sandboxes' chains are removed, as
  # another runtime's chain is empty and unreferenced too before its first
  # rule.
  for ch in $(iptables -w -t nat -S 2>/dev/null | grep -F "name: \\\"$CNI_NETWORK\\\"" | awk '$1 == "-A" && $2 ~ /^CNI-/ {print $2}' | sort -u || true); do
    iptables -w -t nat -F "$ch" 2>/dev/null || true
    iptables -w -t nat -X "$ch" 2>/dev/null || true
  done
  for id in $ids; do
    ch=CNI-$(printf '%s' "$CNI_NETWORK$id" | sha512sum | cut -c1-24)
    iptables -w -t nat -S POSTROUTING 2>/dev/null | grep -F -- "-j $ch" | sed 's/^-A /-D /' | while read -r rule; do
      eval "iptables -w -t nat $rule" 2>/dev/null || true
    done || true
    iptables -w -t nat -F "$ch" 2>/dev/null || true
    iptables -w -t nat -X "$ch" 2>/dev/null || true
  done
  [ -x "$K8SBIN/kube-proxy" ] && "$K8SBIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
  # The chains that hand pod connections to the NetworkPolicy engine.
  "$ROOT/hack/cluster/netpol-rules.sh" delete
  for ipt in iptables ip6tables; do
    for t in filter nat mangle; do
      # Chains the kubelet makes: jumps to them first, then the chains.
      for ch in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-PROXY-CANARY KUBE-IPTABLES-HINT KUBE-NODE-PORT KUBE-FORWARD; do
        "$ipt" -w -t "$t" -S 2>/dev/null | grep -E -- "^-A [A-Z]+ .*-j $ch( |$)" | sed 's/^-A /-D /' | while read -r rule; do
          eval "$ipt -w -t $t $rule" 2>/dev/null || true
        done || true
        "$ipt" -w -t "$t" -F "$ch" 2>/dev/null || true
        "$ipt" -w -t "$t" -X "$ch" 2>/dev/null || true
      done
    done
  done
fi
# The engine's own nftables table: it fails to load on kernels without
# nft_queue and is deleted when the engine stops; removed here in case.
if command -v nft >/dev/null; then
  nft delete table inet kube-network-policies 2>/dev/null || true
fi

# 5. The pods' cgroups (the kubelet's kubepods tree, cgroup v1 or v2).
for d in /sys/fs/cgroup/kubepods /sys/fs/cgroup/*/kubepods; do
  if [ -d "$d" ]; then find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
done

# 6. Files the runtime keeps outside the state dir, and the sysctls.
rm -f /var/lib/cni/results/"$CNI_NETWORK"-* 2>/dev/null || true
# The loopback plugin's results are named after its own network
# (cni-loopback) and the sandbox: only our sandboxes' are removed.
for id in $ids; do rm -f "/var/lib/cni/results/cni-loopback-$id-lo"; done
for l in /var/log/containers/*.log; do
  if [ -L "$l" ] && [[ "$(readlink "$l")" == "$STATE/"* ]]; then rm -f "$l"; fi
done
created_dirs=$(cat "$STATE/host/created-dirs" 2>/dev/null || true)
for d in $created_dirs; do
  case "$d" in
    /run/containerd | /var/lib/kubelet) rm -rf "$d" ;;  # only the node's files
    *) find "$d" -depth -type d -empty -delete 2>/dev/null || true ;;
  esac
done
if [ -f "$STATE/host/sysctl" ]; then
  while IFS= read -r kv; do sysctl -qw "$kv" 2>/dev/null || true; done < "$STATE/host/sysctl"
fi

# 7. The state dir, then check that nothing is left.
rm -rf "$STATE" 2>/dev/null || {
  sleep 1
  rm -rf "$STATE"
}
left=()
[ -n "$(our_pids)" ] && left+=("processes: $(our_pids | tr '\n' ' ')")
[ -e "$STATE" ] && left+=("state dir $STATE")
grep -qF " $STATE/" /proc/mounts && left+=("mounts under $STATE")
ip link show "$CNI_BRIDGE" >/dev/null 2>&1 && left+=("link $CNI_BRIDGE")
if command -v iptables >/dev/null; then
  ch=$( (iptables-save 2>/dev/null; ip6tables-save 2>/dev/null) | grep -E '^:(KUBE-|CNI-|MCP-NETPOL)' | cut -d' ' -f1 | tr '\n' ' ' || true)
  [ -n "$ch" ] && left+=("iptables chains: $ch")
fi
if command -v nft >/dev/null && nft list table inet kube-network-policies >/dev/null 2>&1; then
  left+=("nftables table inet kube-network-policies")
fi
ls -d /sys/fs/cgroup/kubepods /sys/fs/cgroup/*/kubepods >/dev/null 2>&1 && left+=("kubepods cgroups")
for d in $created_dirs; do [ -e "$d" ] && left+=("$d"); done
if [ ${#left[@]} -gt 0 ]; then
  printf 'error: left behind: %s\n' "${left[@]}" >&2
  exit 1
fi
step "dev cluster torn down; nothing left behind"

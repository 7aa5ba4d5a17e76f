# shellcheck shell=bash disable=SC2034
# lib.sh: settings and helpers shared by the dev cluster's scripts (sourced).
#
# Everything the cluster writes lives under $STATE (default .dev/ in the repo),
# except what the kernel and the container runtime keep elsewhere by design
# (network namespaces, iptables chains, cgroups, the CNI result cache, shim
# sockets under /run/containerd); down.sh removes those by name.

# A failing command says where it failed instead of ending the script silently.
set -E
trap 'echo "error: ${BASH_SOURCE[0]##*/}:$LINENO: \"$BASH_COMMAND\" failed" >&2' ERR

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
STATE=${MCP_DEV_STATE:-$ROOT/.dev}
K8SBIN=$ROOT/bin/k8s
IMAGES=$ROOT/bin/images
PKI=$STATE/pki
LOGS=$STATE/logs
RUN=$STATE/run
KUBECONFIG_FILE=$STATE/kubeconfig
CONTAINERD_SOCK=$RUN/containerd.sock

# Non-default ports, so the dev cluster runs beside envtest API servers and
# anything else on this machine.
ETCD_PORT=12379
ETCD_PEER_PORT=12380
APISERVER_PORT=16443

NODE_NAME=mcp-dev
CNI_NETWORK=mcp-dev   # the CNI network's name; tags its iptables chains and cache files
CNI_BRIDGE=mcpdev0    # the Linux bridge the pods hang off
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/16
SANDBOX_IMAGE=localhost/mcp-operator/pause:dev

# NetworkPolicy enforcement (hack/netpol, netpol-rules.sh): the NFQUEUE the
# first packets of pod connections go to, and the iptables chains that send
# them there.
NETPOL_QUEUE=100
NETPOL_CHAIN=MCP-NETPOL
NETPOL_INPUT_CHAIN=MCP-NETPOL-INPUT

# Sysctls the node changes (kube-proxy, the kubelet, the bridge): up.sh records
# their values once and down.sh puts them back.
HOST_SYSCTLS=(
  net.ipv4.ip_forward
  net.bridge.bridge-nf-call-iptables
  net.bridge.bridge-nf-call-ip6tables
  net.ipv4.conf.all.route_localnet
  vm.overcommit_memory
  vm.panic_on_oom
  kernel.panic
  kernel.panic_on_oops
  kernel.keys.root_maxkeys
  kernel.keys.root_maxbytes
)

# Directories outside $STATE that the node's programs create whatever they
# are told (the kubelet's device-plugin socket, CRI network namespaces, shim
# sockets, the CNI result cache, container log links, libmount's table).
# up.sh notes which did not exist; down.sh removes those (after removing our
# entries from the shared ones).
HOST_DIRS=(/run/containerd /var/lib/kubelet /var/lib/cni /var/log/containers /var/run/netns /run/mount)

# The node's processes, in start order; down.sh stops them in reverse.
COMPONENTS=(containerd etcd kube-apiserver netpol kube-controller-manager kube-scheduler kubelet kube-proxy)

T0=${T0:-$EPOCHREALTIME}
export T0

# step prints a progress line with the time since the command started.
step() { printf '[%6.1fs] %s\n' "$(awk -v a="$EPOCHREALTIME" -v b="$T0" 'BEGIN{print a-b}')" "$*"; }
die() { echo "error: $*" >&2; exit 1; }

need_root() {
  [ "$(id -u)" = 0 ] || die "the dev cluster needs root (it runs containerd, the kubelet and kube-proxy): run 'sudo make ${1:-dev}'"
}

# node_ip prints the machine's primary IPv4 address: the node's InternalIP,
# which the apiserver advertises and pods reach it on.
node_ip() {
  local dev
  dev=$(ip -4 route show default | awk '{for (i = 1; i < NF; i++) if ($i == "dev" && d == "") d = $(i + 1)} END {print d}')
  { [ -n "$dev" ] && ip -4 -o addr show dev "$dev" scope global; ip -4 -o addr show scope global; } |
    awk 'NR == 1 {split($4, a, "/"); print a[1]}'
}

kc() { "$K8SBIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"; }
ctrk() { ctr --address "$CONTAINERD_SOCK" -n k8s.io "$@"; }

# pid_of NAME prints the PID recorded for a component when that process is
# still the one we started (its command line names $STATE), else nothing.
pid_of() {
  local pid
  [ -f "$STATE/pids" ] || return 0
  pid=$(awk -v n="$1" '$1 == n {pid = $2} END {print pid}' "$STATE/pids")
  [ -n "$pid" ] || return 0
  local args
  mapfile -d '' args 2>/dev/null < "/proc/$pid/cmdline" || return 0
  [[ "${args[*]}" == *"$STATE/"* ]] && echo "$pid"
  return 0
}

# our_pids prints every live node process: the components and containerd's
# shims (started with -address under $STATE), recognised by their executable
# and a command line that names $STATE — never anything else on the machine.
our_pids() {
  local p exe args
  for p in /proc/[0-9]*; do
    [ "${p#/proc/}" = "$BASHPID" ] && continue
    mapfile -d '' args 2>/dev/null < "$p/cmdline" || continue
    [[ "${args[*]}" == *"$STATE/"* ]] || continue
    exe=$(readlink "$p/exe" 2>/dev/null) || continue
    case "${exe##*/}" in
      etcd | kube-apiserver | netpol | kube-controller-manager | kube-scheduler | kubelet | kube-proxy | containerd | containerd-shim*) echo "${p#/proc/}" ;;
    esac
  done
  return 0
}

# wait_for SECONDS WHAT CMD...: retries CMD every half second until it
# succeeds, or fails after SECONDS with a message naming WHAT.
wait_for() {
  local secs=$1 what=$2 end=$((SECONDS + $1))
  shift 2
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$end" ]; then
      echo "error: timed out after ${secs}s waiting for $what" >&2
      return 1
    fi
    sleep 0.5
  done
}

#!/usr/bin/env bash
# up.sh: starts the dev cluster — a real single-node Kubernetes (containerd,
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
# kube-proxy) with its state under $STATE — and waits until the node is Ready.
# Idempotent: a cluster that is already up is left running; one that is half
# up (a process died) is torn down and started again.
#
# Needs root. The Kubernetes binaries are built from Go modules into bin/k8s
# on the first run (minutes); containerd, runc and the CNI plugins come from
# the distribution's packages (deps.sh). Images in bin/images/*.tar (built by
# `make images`, which must include the pause image) are imported.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_root dev

running() {
  local c
  for c in "${COMPONENTS[@]}"; do [ -n "$(pid_of "$c")" ] || return 1; done
  kc get --raw /readyz >/dev/null 2>&1
}

if [ -f "$STATE/pids" ]; then
  if running; then
    step "cluster already up (state in ${STATE#"$ROOT"/})"
    "$ROOT/hack/cluster/images.sh"
    exit 0
  fi
  step "a previous cluster is partly running or was not torn down: tearing it down first"
  "$ROOT/hack/cluster/down.sh"
fi

"$ROOT/hack/cluster/deps.sh"
step "Kubernetes binaries in bin/k8s (built from Go modules on the first run only: several minutes)"
"$ROOT/hack/k8s-binaries.sh" etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl
[ -f "$IMAGES/pause.tar" ] || die "bin/images/pause.tar is missing: run 'make images' first"
[ -x "$ROOT/bin/netpol" ] || die "bin/netpol (NetworkPolicy enforcement) is missing: run 'make dev', which builds it"

mkdir -p "$STATE" "$LOGS" "$RUN" "$STATE/etcd" "$STATE/kubelet" "$STATE/cni/net.d" "$STATE/host"
"$ROOT/hack/cluster/pki.sh"
NODE_IP=$(cat "$PKI/done")

# What the node changes on the host, recorded once so down.sh can restore it.
date +%s > "$STATE/host/started"
if [ ! -f "$STATE/host/sysctl" ]; then
  for s in "${HOST_SYSCTLS[@]}"; do
    v=$(sysctl -n "$s" 2>/dev/null) && printf '%s=%s\n' "$s" "$v"
  done > "$STATE/host/sysctl"
fi
if [ ! -f "$STATE/host/created-dirs" ]; then
  for d in "${HOST_DIRS[@]}"; do
    [ -e "$d" ] || echo "$d"
  done > "$STATE/host/created-dirs"
fi
# The first `ip netns add` on a host (the isolation e2e's outside host makes
# one) bind-mounts /run/netns over itself, hiding the namespaces containerd
# had already mounted there: the pods they belong to then never finish
# terminating. When the directory is the cluster's own, make it that mount
# point now, before any pod, so that every namespace lives in it.
if grep -qx /var/run/netns "$STATE/host/created-dirs" && ! mountpoint -q /run/netns; then
  mkdir -p /run/netns
  mount --bind /run/netns /run/netns
  mount --make-shared /run/netns
fi
sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 net.bridge.bridge-nf-call-ip6tables=1

render() {
  sed -e "s|@STATE@|$STATE|g" -e "s|@NODE_IP@|$NODE_IP|g" -e "s|@SANDBOX_IMAGE@|$SANDBOX_IMAGE|g" \
    -e "s|@CNI_NETWORK@|$CNI_NETWORK|g" -e "s|@CNI_BRIDGE@|$CNI_BRIDGE|g" -e "s|@POD_CIDR@|$POD_CIDR|g" "$1" > "$2"
}
render "$ROOT/hack/cluster/containerd.toml" "$STATE/containerd.toml"
render "$ROOT/hack/cluster/kubelet.yaml" "$STATE/kubelet.yaml"
render "$ROOT/hack/cluster/cni.conflist" "$STATE/cni/net.d/10-$CNI_NETWORK.conflist"

: > "$STATE/pids"
# start NAME CMD...: runs CMD in its own session (a Ctrl-C of make does not
# reach it), logging to $LOGS/NAME.log, and records its PID.
start() {
  local name=$1
  shift
  setsid "$@" > "$LOGS/$name.log" 2>&1 < /dev/null &
  echo "$name $!" >> "$STATE/pids"
}
# alive NAME: fails with the component's log tail when it has exited. It
# looks three times: a process caught in the middle of exec has no command
# line for a moment.
alive() {
  local i
  for i in 1 2 3; do
    [ -n "$(pid_of "$1")" ] && return 0
    sleep 0.1
  done
  echo "error: $1 exited; the end of ${LOGS#"$ROOT"/}/$1.log:" >&2
  tail -20 "$LOGS/$1.log" >&2
  exit 1
}

step "starting containerd"
start containerd /usr/bin/containerd --config "$STATE/containerd.toml"
wait_for 20 "containerd's socket" ctr --address "$CONTAINERD_SOCK" version || { alive containerd; exit 1; }
"$ROOT/hack/cluster/images.sh"

step "starting etcd on 127.0.0.1:$ETCD_PORT"
start etcd "$K8SBIN/etcd" --name mcp-dev --data-dir "$STATE/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "mcp-dev=http://127.0.0.1:$ETCD_PEER_PORT" --listen-metrics-urls "" --log-level warn

step "starting kube-apiserver on $NODE_IP:$APISERVER_PORT"
# Bound ServiceAccount tokens: the issuer is also the default API audience;
# tokens requested for another audience (the bridge's "mcp-operator") are
# checked by TokenReview with that audience.
start kube-apiserver "$K8SBIN/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --bind-address="$NODE_IP" --secure-port="$APISERVER_PORT" --advertise-address="$NODE_IP" \
  --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" --client-ca-file="$PKI/ca.crt" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
  --service-cluster-ip-range="$SERVICE_CIDR" --authorization-mode=Node,RBAC \
  --kubelet-client-certificate="$PKI/admin.crt" --kubelet-client-key="$PKI/admin.key" \
  --kubelet-preferred-address-types=InternalIP --profiling=false --cert-dir="$STATE/apiserver-certs"
until kc get --raw /readyz >/dev/null 2>&1; do
  alive etcd
  alive kube-apiserver
  sleep 0.5
done
step "kube-apiserver ready"

# NetworkPolicy enforcement before any pod starts: the engine, then the rules
# that hand it the first packet of each pod connection.
step "starting NetworkPolicy enforcement (kube-network-policies on NFQUEUE $NETPOL_QUEUE)"
start netpol "$ROOT/bin/netpol" --kubeconfig="$KUBECONFIG_FILE" --hostname-override="$NODE_NAME" \
  --nfqueue-id="$NETPOL_QUEUE"
"$ROOT/hack/cluster/netpol-rules.sh" add

step "starting kube-controller-manager, kube-scheduler, kubelet, kube-proxy"
start kube-controller-manager "$K8SBIN/kube-controller-manager" \
  --kubeconfig="$KUBECONFIG_FILE" --authentication-kubeconfig="$KUBECONFIG_FILE" --authorization-kubeconfig="$KUBECONFIG_FILE" \
  --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
  --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
  --use-service-account-credentials=false --leader-elect=false --bind-address=127.0.0.1 \
  --cert-dir="$STATE/kcm-certs" --profiling=false
start kube-scheduler "$K8SBIN/kube-scheduler" \
  --kubeconfig="$KUBECONFIG_FILE" --authentication-kubeconfig="$KUBECONFIG_FILE" --authorization-kubeconfig="$KUBECONFIG_FILE" \
  --leader-elect=false --bind-address=127.0.0.1 --cert-dir="$STATE/scheduler-certs" --profiling=false
start kubelet "$K8SBIN/kubelet" --config="$STATE/kubelet.yaml" --kubeconfig="$KUBECONFIG_FILE" \
  --root-dir="$STATE/kubelet" --cert-dir="$STATE/kubelet/pki" --hostname-override="$NODE_NAME" --node-ip="$NODE_IP"
# --oom-score-adj=0: root here may not lower its own OOM score.
start kube-proxy "$K8SBIN/kube-proxy" --kubeconfig="$KUBECONFIG_FILE" --hostname-override="$NODE_NAME" \
  --cluster-cidr="$POD_CIDR" --proxy-mode=iptables --conntrack-max-per-core=0 --oom-score-adj=0 \
  --metrics-bind-address=127.0.0.1:10249 --healthz-bind-address=127.0.0.1:10256

node_ready() {
  [ "$(kc get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}
until node_ready; do
  for c in "${COMPONENTS[@]}"; do alive "$c"; done
  sleep 0.5
done
step "node $NODE_NAME Ready"
# Pods can't start before their namespace's ServiceAccount and root CA exist.
wait_for 60 "the default ServiceAccount" kc -n default get serviceaccount default
wait_for 60 "the kube-root-ca.crt ConfigMap" kc -n default get configmap kube-root-ca.crt
step "cluster up: export KUBECONFIG=${KUBECONFIG_FILE}"

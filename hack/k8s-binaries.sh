#!/usr/bin/env bash
# k8s-binaries.sh NAME... : builds Kubernetes binaries (kube-apiserver, etcd, kubelet,
# kube-controller-manager, kube-scheduler, kube-proxy, kubectl) from Go modules into
# bin/k8s/, once. A binary already built at the pinned version is reused, so only the
# first run pays the build (kube-apiserver + etcd: about 4 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/bin/k8s
K8S_VERSION=v1.37.2
mkdir -p "$OUT"

# One set of flags for every binary: changing -trimpath or the ldflags rebuilds the
# whole Kubernetes tree. The version ldflags make the binaries report v1.37.2.
LD="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LD="$LD -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=37 -X $p.gitTreeState=clean -X $p.buildDate=2026-01-01T00:00:00Z"
done

pkg_of() {
  case "$1" in
    etcd) echo go.etcd.io/etcd/server/v3 ;;
    kube-apiserver|kubelet|kube-controller-manager|kube-scheduler|kube-proxy|kubectl) echo "k8s.io/kubernetes/cmd/$1" ;;
    *) echo "k8s-binaries.sh: unknown binary $1" >&2; exit 2 ;;
  esac
}

stamp=$(sha256sum hack/k8s/go.mod hack/k8s/go.sum | sha256sum | cut -c1-16)
for name in "$@"; do
  pkg=$(pkg_of "$name")
  if [ -x "$OUT/$name" ] && [ "$(cat "$OUT/.$name.stamp" 2>/dev/null)" = "$stamp" ]; then
    continue
  fi
  echo ">> building $name from $pkg (first run only; minutes)" >&2
  start=$(date +%s)
  (cd hack/k8s && go build -trimpath -ldflags "$LD" -o "$OUT/$name" "$pkg")
  echo "$stamp" > "$OUT/.$name.stamp"
  echo ">> built $name in $(( $(date +%s) - start ))s" >&2
done

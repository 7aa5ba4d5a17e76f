#!/usr/bin/env bash
# deps.sh: installs what the dev node runs and that Go modules don't give us —
# containerd, runc, the CNI plugins and iptables — from the distribution's
# packages, when they are missing. Debian and Ubuntu (apt-get) only.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_root dev

missing=()
[ -x /usr/bin/containerd ] && command -v ctr >/dev/null || missing+=(containerd)
command -v runc >/dev/null || missing+=(runc)
[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ] || missing+=(containernetworking-plugins)
command -v iptables >/dev/null && command -v ip6tables >/dev/null || missing+=(iptables)
command -v openssl >/dev/null || missing+=(openssl)
[ ${#missing[@]} -eq 0 ] && exit 0

command -v apt-get >/dev/null || die "missing ${missing[*]}; install them with your distribution's package manager"
step "installing ${missing[*]} (distribution packages, once)"
apt-get update -qq
# The packages' service scripts must not start a system-wide containerd: the
# dev node runs its own, with its state under $STATE.
DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
step "installed ${missing[*]}"

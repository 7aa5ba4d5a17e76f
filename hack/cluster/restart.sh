#!/usr/bin/env bash
# restart.sh NAME: stops one of the dev cluster's node components (as
# up.sh started it, e.g. kube-apiserver) and starts it again with the same
# command line, then waits for the API server to answer. For `make soak`,
# which restarts the API server once under load.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_root restart

name=${1:?usage: restart.sh COMPONENT}
pid=$(pid_of "$name")
[ -n "$pid" ] || die "$name is not running"
mapfile -d '' cmd < "/proc/$pid/cmdline"
kill "$pid"
for _ in $(seq 100); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
setsid "${cmd[@]}" >> "$LOGS/$name.log" 2>&1 < /dev/null &
echo "$name $!" >> "$STATE/pids"
wait_for 60 "the API server" kc get --raw /readyz

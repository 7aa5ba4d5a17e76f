#!/usr/bin/env bash
# images.sh: imports the images built by `make images` (bin/images/*.tar,
# docker-archive) into the dev node's containerd, skipping those already
# imported unchanged. There is no registry: pods use these images as they are.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

stamps=$STATE/containerd/imported  # goes away with containerd's state
mkdir -p "$stamps"
shopt -s nullglob
for tar in "$IMAGES"/*.tar; do
  name=$(basename "$tar" .tar)
  # A Jaeger image left from an earlier run is not wanted without tracing.
  [ "$name" = jaeger ] && [ "${MCP_DEV_TRACING:-true}" != true ] && continue
  sum=$(sha256sum "$tar" | cut -d' ' -f1)
  [ "$(cat "$stamps/$name" 2>/dev/null)" = "$sum" ] && continue
  step "importing image $name into containerd"
  ctrk images import "$tar" >/dev/null
  echo "$sum" > "$stamps/$name"
done

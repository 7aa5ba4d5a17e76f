#!/usr/bin/env bash
# Installs the system packages the tests need, when they are missing: Node.js
# and npm run the MCP peers (servers and clients nobody here wrote); Debian's
# Chromium is the headless browser the console's tests drive. Go modules and
# npm packages are installed by the Makefile.
set -euo pipefail
missing=()
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
command -v git >/dev/null || missing+=(git)
command -v chromium >/dev/null || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "missing: ${missing[*]}; install them (Debian: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo ">> installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

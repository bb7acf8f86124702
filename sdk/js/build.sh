#!/usr/bin/env bash
# Build ttlbelow.js into the component ttlbelow.wasm (or the path given as $1).
# Needs Node.js 20 and npm; installs @bytecodealliance/componentize-js (version pinned in
# package.json) into node_modules here on the first run. See README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(realpath -m "${1:-$here/ttlbelow.wasm}")
cd "$here"
[ -x node_modules/.bin/componentize-js ] || npm ci --no-audit --no-fund
# All WASI features off: the component imports only wasp:plugin/host (a "pure component":
# an uncaught exception traps instead of printing).
node_modules/.bin/componentize-js ttlbelow.js --wit ../../wit --world-name wasp-plugin \
    --disable stdio random clocks http fetch-event -o "$out"
echo "built $out"

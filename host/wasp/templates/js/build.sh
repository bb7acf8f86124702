#!/usr/bin/env bash
# Build {{name}}.js into the component {{name}}.wasm (or the path given as $1). Needs Node.js 20
# and npm; installs @bytecodealliance/componentize-js (pinned in package.json) into
# node_modules on the first run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(realpath -m "${1:-$here/{{name}}.wasm}")
# A failed build leaves no component from an earlier one behind.
rm -f "$out"
cd "$here"
[ -x node_modules/.bin/componentize-js ] || npm ci --no-audit --no-fund
mkdir -p "$(dirname "$out")"
node_modules/.bin/componentize-js {{name}}.js --wit wit --world-name wasp-plugin \
    --disable http fetch-event -o "$out"
echo "built $out"

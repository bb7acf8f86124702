#!/usr/bin/env bash
# Build a JavaScript plugin into a component.
#
#   build.sh [EXAMPLE|FILE.js] [OUT.wasm]
#
# EXAMPLE is one of this directory's examples (ttlbelow, srccount; ttlbelow when omitted),
# FILE.js any module exporting the `plugin` interface of wit/plugin.wit. OUT defaults to the
# source's name with .wasm, next to it. `build.sh OUT.wasm` (one argument ending in .wasm)
# builds ttlbelow into OUT.
# Needs Node.js (18 or later) and npm; installs @bytecodealliance/componentize-js (version pinned
# in package.json and package-lock.json) into node_modules here. See README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=ttlbelow
if [ $# -ge 1 ] && [[ "$1" != *.wasm ]]; then
    src=$1
    shift
fi
case "$src" in
*.js) src=$(realpath "$src") ;;
ttlbelow | srccount) src=$here/$src.js ;;
*)
    echo "build.sh: unknown example '$src' (ttlbelow, srccount, or a .js file)" >&2
    exit 2
    ;;
esac
out=$(realpath -m "${1:-${src%.js}.wasm}")
# A failed build leaves no component from an earlier one behind.
rm -f "$out"
cd "$here"
# npm ci on the first build, and again when package-lock.json changed since (npm keeps what it
# installed in node_modules/.package-lock.json).
if [ ! -x node_modules/.bin/componentize-js ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    npm ci --no-audit --no-fund
fi
# WASI: stdio, random and clocks on (console.log and uncaught exceptions reach wasp's log,
# Math.random is seeded, Date.now() runs); http and fetch-event off (no network in a plugin,
# and wasp does not offer wasi:http).
node_modules/.bin/componentize-js "$src" --wit ../../wit --world-name wasp-plugin \
    --disable http fetch-event -o "$out"
echo "built $out"

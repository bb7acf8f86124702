#!/usr/bin/env bash
# Build a Python plugin into a component.
#
#   build.sh [EXAMPLE|FILE.py] [OUT.wasm]
#
# EXAMPLE is one of this directory's examples (ttlbelow, srccount; ttlbelow when omitted),
# FILE.py any module defining the class `Plugin` (a subclass of wit_world.exports.Plugin).
# OUT defaults to the source's name with .wasm, next to it. `build.sh OUT.wasm` (one argument
# ending in .wasm) builds ttlbelow into OUT.
# Needs componentize-py 0.25.1 on PATH (pip install componentize-py==0.25.1); see README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=ttlbelow
if [ $# -ge 1 ] && [[ "$1" != *.wasm ]]; then
    src=$1
    shift
fi
case "$src" in
*.py) src=$(realpath "$src") ;;
ttlbelow | srccount) src=$here/$src.py ;;
*)
    echo "build.sh: unknown example '$src' (ttlbelow, srccount, or a .py file)" >&2
    exit 2
    ;;
esac
out=$(realpath -m "${1:-${src%.py}.wasm}")
# A failed build leaves no component from an earlier one behind.
rm -f "$out"
want=0.25.1
have=$(componentize-py --version 2>/dev/null | awk '{print $2}') || true
if [ "$have" != "$want" ]; then
    echo "build.sh: componentize-py $want is needed (found: ${have:-none}); pip install componentize-py==$want" >&2
    exit 1
fi
cd "$here"
# The module is the file's name, found on the path -p gives (its directory).
componentize-py -d ../../wit -w wasp-plugin componentize -p "$(dirname "$src")" \
    "$(basename "$src" .py)" -o "$out"
echo "built $out"

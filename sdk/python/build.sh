#!/usr/bin/env bash
# Build ttlbelow.py into the component ttlbelow.wasm (or the path given as $1).
# Needs componentize-py 0.25.1 on PATH (pip install componentize-py==0.25.1); see README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(realpath -m "${1:-$here/ttlbelow.wasm}")
want=0.25.1
have=$(componentize-py --version 2>/dev/null | awk '{print $2}') || true
if [ "$have" != "$want" ]; then
    echo "build.sh: componentize-py $want is needed (found: ${have:-none}); pip install componentize-py==$want" >&2
    exit 1
fi
cd "$here"
componentize-py -d ../../wit -w wasp-plugin componentize ttlbelow -o "$out"
echo "built $out"

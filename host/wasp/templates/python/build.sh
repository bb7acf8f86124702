#!/usr/bin/env bash
# Build {{name}}.py into the component {{name}}.wasm (or the path given as $1). Needs
# componentize-py {{componentize_py}} on PATH (pip install componentize-py=={{componentize_py}}).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(realpath -m "${1:-$here/{{name}}.wasm}")
# A failed build leaves no component from an earlier one behind.
rm -f "$out"
want={{componentize_py}}
have=$(componentize-py --version 2>/dev/null | awk '{print $2}') || true
if [ "$have" != "$want" ]; then
    echo "build.sh: componentize-py $want is needed (found: ${have:-none}); pip install componentize-py==$want" >&2
    exit 1
fi
cd "$here"
mkdir -p "$(dirname "$out")"
componentize-py -d wit -w wasp-plugin componentize {{name}} -o "$out"
echo "built $out"

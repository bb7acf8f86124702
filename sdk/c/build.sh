#!/usr/bin/env bash
# Build ttlbelow.c into the component ttlbelow.wasm (or the path given as $1).
#
# Needs (README.md): clang-19 and lld-19 with wasi-libc and libclang-rt-19-dev-wasm32 (Debian
# packages), wit-bindgen-cli 0.61.1 and wasm-tools 1.258.3 (cargo install --locked). The
# generated bindings and the core module go to a temporary directory; only $1 is written.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(realpath -m "${1:-$here/ttlbelow.wasm}")
# A failed build leaves no component from an earlier one behind.
rm -f "$out"
cc=${CC:-clang-19}
wit_bindgen_version=0.61.1
wasm_tools_version=1.258.3

need() { # need TOOL VERSION: the tool is on PATH and prints that version
    local have
    have=$("$1" --version 2>/dev/null | awk '{print $2}') || true
    if [ "$have" != "$2" ]; then
        echo "build.sh: $1 $2 is needed (found: ${have:-none}); see sdk/c/README.md" >&2
        exit 1
    fi
}
command -v "$cc" >/dev/null || { echo "build.sh: $cc is needed; see sdk/c/README.md" >&2; exit 1; }
need wit-bindgen "$wit_bindgen_version"
need wasm-tools "$wasm_tools_version"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 1. C bindings of the world: wasp_plugin.h, wasp_plugin.c, wasp_plugin_component_type.o.
wit-bindgen c "$here/../../wit" --world wasp-plugin --out-dir "$work/gen" >"$work/log" 2>&1 ||
    { cat "$work/log" >&2; exit 1; }
# 2. A core module: a WASI "reactor" (no main; exports called by the host). wasi-libc gives
#    malloc/free and string functions, none of which import WASI.
"$cc" --target=wasm32-wasi -mexec-model=reactor -O2 -Wall -Wextra \
    -I "$work/gen" -o "$work/ttlbelow.core.wasm" \
    "$here/ttlbelow.c" "$work/gen/wasp_plugin.c" "$work/gen/wasp_plugin_component_type.o"
# 3. The component: the core module wrapped with the world's types (from the custom section
#    that wasp_plugin_component_type.o carries).
mkdir -p "$(dirname "$out")"
wasm-tools component new "$work/ttlbelow.core.wasm" -o "$out"
wasm-tools validate --features component-model "$out"
echo "built $out"

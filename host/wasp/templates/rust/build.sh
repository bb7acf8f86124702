#!/usr/bin/env bash
# Build {{name}}.wasm from src/lib.rs: a component for wasm32-wasip2 (Rust 1.95 or later).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(realpath -m "${1:-$here/{{name}}.wasm}")
# A failed build leaves no component from an earlier one behind.
rm -f "$out"
cd "$here"
if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx wasm32-wasip2; then
    rustup target add wasm32-wasip2
fi
cargo build --release --target wasm32-wasip2
mkdir -p "$(dirname "$out")"
cp "${CARGO_TARGET_DIR:-target}/wasm32-wasip2/release/{{name}}.wasm" "$out"
echo "built $out"

#!/usr/bin/env bash
# The WASI preview1 reactor adapter that build.sh links into the component: the file
# artefacts/wasi_snapshot_preview1.reactor.wasm of the crate
# wasi-preview1-component-adapter-provider 46.0.1 (the Wasmtime project's release of the
# adapter), checked against its pinned sha256.
#
#   adapter.sh           make sure the crate is in cargo's cache (fetched by cargo once)
#   adapter.sh DIR       and unpack the adapter into DIR; prints its path
#
# The crate comes through cargo (which checks it against the registry's checksum) into
# cargo's own cache, $CARGO_HOME/registry/cache; nothing is downloaded when it is there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
name=wasi-preview1-component-adapter-provider
version=46.0.1
member=$name-$version/artefacts/wasi_snapshot_preview1.reactor.wasm
adapter_sha256=0acb10959bd3c1d2e7903ef82212910bfc156ab5698ef3f2ff669474ba59fb0a
cache=${CARGO_HOME:-$HOME/.cargo}/registry/cache

find_crate() { compgen -G "$cache/*/$name-$version.crate" | head -n 1 || true; }

crate=$(find_crate)
if [ -z "$crate" ]; then
    # A throwaway package that depends on the crate: `cargo fetch` puts it in the cache. Run
    # from here so that the repository's rust-toolchain.toml picks cargo.
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    mkdir "$tmp/src" && : >"$tmp/src/lib.rs"
    printf '[package]\nname = "fetch-adapter"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\n%s = "=%s"\n' \
        "$name" "$version" >"$tmp/Cargo.toml"
    (cd "$here" && cargo fetch --quiet --manifest-path "$tmp/Cargo.toml")
    crate=$(find_crate)
    [ -n "$crate" ] || { echo "adapter.sh: cargo fetch did not leave $name-$version.crate in $cache" >&2; exit 1; }
fi
[ $# -eq 0 ] && exit 0

dir=$(realpath -m "$1")
mkdir -p "$dir"
tar -xzf "$crate" -C "$dir" --strip-components=2 "$member"
have=$(sha256sum "$dir/wasi_snapshot_preview1.reactor.wasm" | awk '{print $1}')
if [ "$have" != "$adapter_sha256" ]; then
    echo "adapter.sh: $member from $crate has sha256 $have, not $adapter_sha256" >&2
    exit 1
fi
echo "$dir/wasi_snapshot_preview1.reactor.wasm"

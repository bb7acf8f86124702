#!/usr/bin/env bash
# Build the Debian package of wasp: target/debian/wasp_<version>-1_<arch>.deb.
#
#   packaging/build-deb.sh                 release build, assets, then `cargo deb --no-build`
#   packaging/build-deb.sh --assets BIN DIR
#                                          only generate the assets with the wasp binary BIN
#                                          into DIR (completions/, man/): what the package
#                                          takes from target/release/packaging/
#
# The package's contents are [package.metadata.deb] in host/wasp/Cargo.toml: the binary (the
# bundled plugins are embedded in it), wasp.service, /etc/wasp/wasp.nft (a conffile), shell
# completions and man pages (generated here by the built binary: `wasp completions SHELL`,
# `wasp man --dir`). Needs cargo-deb (`cargo install cargo-deb`). Honours CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

# Completions for bash, zsh and fish, and every man page (gzipped, as Debian ships them).
assets() {
    local bin=$1 dir=$2
    rm -rf "$dir/completions" "$dir/man"
    mkdir -p "$dir/completions" "$dir/man"
    "$bin" completions bash >"$dir/completions/wasp.bash"
    "$bin" completions zsh >"$dir/completions/_wasp"
    "$bin" completions fish >"$dir/completions/wasp.fish"
    "$bin" man --dir "$dir/man" >/dev/null
    gzip -9n "$dir"/man/*.1
}

if [ "${1:-}" = --assets ]; then
    [ $# -eq 3 ] || { echo "usage: $0 --assets BIN DIR" >&2; exit 2; }
    assets "$2" "$3"
    exit 0
fi

if ! cargo deb --version >/dev/null 2>&1; then
    echo "build-deb.sh: cargo-deb is missing: cargo install cargo-deb" >&2
    exit 1
fi
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
cargo build --release --locked -p wasp
assets "$target/release/wasp" "$target/release/packaging"
cargo deb -p wasp --no-build "$@"

#!/usr/bin/env bash
# Build every cargo-fuzz target of this project and run each briefly from its seed corpus.
#
# Usage: tests/fuzz/run-smoke.sh            (each target for $FUZZ_SECONDS, default 20 seconds)
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). Exits non-zero when a
# build fails or a target crashes; the crashing input is left in tests/fuzz/artifacts/<target>/.
# The checked-in seeds in corpus/<target>/ are only read: new inputs go to a temporary folder.
# Builds go to $CARGO_TARGET_DIR when it is set (else tests/fuzz/target).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
seconds="${FUZZ_SECONDS:-20}"
flags=(--fuzz-dir "$here" -O -a)   # release build with debug assertions and overflow checks

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "run-smoke: the nightly toolchain is missing (rustup toolchain install nightly)" >&2
    exit 2
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "run-smoke: cargo-fuzz is missing (cargo install cargo-fuzz)" >&2
    exit 2
fi

cd "$here"
cargo +nightly fuzz build "${flags[@]}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# parse_ruleset also starts from nftables' own rule lines (../shared/nft-tests/py, read where
# it is, never copied into the repository): one seed file per rule, inside a table and chain.
suite="${WASP_NFT_TESTS:-$here/../../../shared/nft-tests/py}"
mkdir -p "$work/suite-seeds"
if [ -d "$suite" ]; then
    n=0
    while IFS= read -r rule; do
        n=$((n + 1))
        printf 'table inet t {\n\tchain c {\n\t\t%s\n\t}\n}\n' "$rule" >"$work/suite-seeds/$n.nft"
    done < <(cat "$suite"/*/*.t | grep -v '^[#:*!?%-]' | grep -v '^[[:space:]]*$' | cut -d';' -f1 | sort -u)
    echo "run-smoke: $n seed(s) from $suite"
fi

status=0
for target in $(cargo +nightly fuzz list --fuzz-dir "$here"); do
    seeds="$here/corpus/$target"
    mkdir -p "$work/$target" "$seeds"
    extra=()
    [ "$target" = parse_ruleset ] && extra=("$work/suite-seeds")
    echo "run-smoke: $target for ${seconds}s from $(find "$seeds" -type f | wc -l) seed(s)"
    if ! cargo +nightly fuzz run "${flags[@]}" "$target" "$work/$target" "$seeds" "${extra[@]}" -- \
        -max_total_time="$seconds" -print_final_stats=1; then
        echo "run-smoke: $target FAILED (input in $here/artifacts/$target/)" >&2
        status=1
    fi
done
exit "$status"

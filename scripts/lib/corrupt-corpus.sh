# shellcheck shell=bash
# The corrupted-file corpus (docs/fuzzing.md, "Corrupted files"), written the same way for
# scripts/test-corrupt.sh (CLI, C ABI), scripts/test-java.sh and scripts/test-swift.sh.
#
# write_corrupt_corpus OUT ZOO OFFLOAD_ZOO
#   Builds the fuzz crate's `corrupt` writer (release, in $MOTE_CACHE/fuzz-target/plain, shared
#   with scripts/test-corrupt.sh) and writes into OUT (emptied first) the copies of every `.so`
#   of ZOO and every `.so` and `.tar` of OFFLOAD_ZOO, with OUT/corpus.tsv. Returns non-zero,
#   with a message on stderr, when the writer does not build or fails.
write_corrupt_corpus() {
    local out=$1 zoo=$2 ozoo=$3 root cache
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    cache="${MOTE_CACHE:-$HOME/.cache/mote}"
    cargo build --release --locked --manifest-path "$root/fuzz/Cargo.toml" --bin corrupt \
        --target-dir "$cache/fuzz-target/plain" >&2 || { echo "the corpus writer did not build" >&2; return 1; }
    rm -rf "$out" || return 1
    (
        shopt -s nullglob
        "$cache/fuzz-target/plain/release/corrupt" "$out" "$zoo"/*.so "$ozoo"/*.so "$ozoo"/*.tar
    ) || { echo "the corpus writer failed" >&2; return 1; }
    [ -s "$out/corpus.tsv" ] || { echo "the corpus writer listed no copies in $out/corpus.tsv" >&2; return 1; }
}

#!/usr/bin/env bash
# RUSTC_WRAPPER for scripts/fuzz.sh: compiles the gzip/deflate crates Mote depends on
# (flate2, miniz_oxide, crc32fast, adler2, simd-adler32) without libFuzzer's coverage
# instrumentation, every other crate with it. They stay under AddressSanitizer.
#
# Why: inflating a `.tar` export or a deflated `.npz` entry under the comparison tracing
# (`-sanitizer-coverage-trace-compares`) took three quarters of `model_code_free`'s time
# (docs/fuzzing.md, "Throughput"); their branches are not Mote's parsers, and the bytes they
# produce still reach Mote's instrumented code.
set -euo pipefail
rustc="$1"
shift
crate=""
prev=""
for a in "$@"; do
    [ "$prev" = --crate-name ] && crate="$a"
    prev="$a"
done
case "$crate" in
    flate2 | miniz_oxide | crc32fast | adler2 | simd_adler32) ;;
    *) exec "$rustc" "$@" ;;
esac
args=()
skip=0
for a in "$@"; do
    if [ "$skip" = 1 ]; then
        skip=0
        case "$a" in
            passes=sancov-module | llvm-args=-sanitizer-coverage*) continue ;;
            *) args+=(-C "$a"); continue ;;
        esac
    fi
    case "$a" in
        -C) skip=1 ;;
        -Cpasses=sancov-module | -Cllvm-args=-sanitizer-coverage*) ;;
        *) args+=("$a") ;;
    esac
done
exec "$rustc" "${args[@]}"

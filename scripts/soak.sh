#!/usr/bin/env bash
# Soak run (a script, not a test; docs/soak.md): Mote under load for a set time. Worker threads
# load and unload the zoo's and the offload zoo's models (mapped, from memory, code-free), run
# them on shared and per-thread sessions at 1 and 2 threads, call the `packed` model's
# registered function, and inject errors all along (bad inputs, raising kernels, failing
# callbacks, corrupted and truncated libraries). Every output is checked against TVM's; every
# injected error must be the expected typed error; resident memory, open descriptors, mapped
# regions and threads must stay flat after the warm-up.
#
#   scripts/soak.sh [--minutes N] [--threads T] [--interval S] [--seed N]
#
# Defaults: 10 minutes (fractions allowed: --minutes 0.5 is a smoke run), 8 worker threads,
# a sample every 10 s (less for short runs). Prints a line per sample, then a summary ending
# `soak: PASSED` or `soak: FAILED: <why>`; the exit status is non-zero on failure.
# The zoos are built or reused as scripts/test.sh does (cached under ${MOTE_CACHE:-~/.cache/mote}).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --minutes|--threads|--interval|--seed)
            [ $# -ge 2 ] || { echo "soak.sh: $1 needs a value" >&2; exit 2; }
            args+=("$1" "$2"); shift 2 ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) echo "soak.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

host="$(rustc -vV | sed -n 's/^host: //p')"
[ "$host" = x86_64-unknown-linux-gnu ] || { echo "soak.sh: runs the x86_64 zoos on x86_64 Linux (host is $host)" >&2; exit 1; }

echo "soak.sh: zoos" >&2
MOTE_ZOO_DIR="$(scripts/zoo.sh --target x86_64 | tail -n 1)"
export MOTE_ZOO_DIR
[ -f "$MOTE_ZOO_DIR/manifest.json" ] || { echo "soak.sh: no x86_64 zoo" >&2; exit 1; }
MOTE_OFFLOAD_ZOO_DIR="$(scripts/offload-zoo.sh --target x86_64 | tail -n 1)"
export MOTE_OFFLOAD_ZOO_DIR
[ -f "$MOTE_OFFLOAD_ZOO_DIR/manifest.json" ] || { echo "soak.sh: no x86_64 offload zoo" >&2; exit 1; }

echo "soak.sh: building the soak binary (release)" >&2
cargo build --release --locked -p mote-tests --bin soak >&2

exec "${CARGO_TARGET_DIR:-$root/target}/release/soak" "${args[@]}"

#!/usr/bin/env bash
# Generate ffi/include/mote.h with the pinned cbindgen (installed on first use under
# ${MOTE_CACHE:-$HOME/.cache/mote}/cbindgen-<version>).
#
#   scripts/cbindgen.sh            write ffi/include/mote.h
#   scripts/cbindgen.sh --check    fail if the checked-in header differs from a fresh one
set -euo pipefail

version=0.29.2
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${MOTE_CACHE:-$HOME/.cache/mote}"
prefix="$cache/cbindgen-$version"
bin="$prefix/bin/cbindgen"

if [ ! -x "$bin" ]; then
    echo "cbindgen.sh: installing cbindgen $version into $prefix (about a minute)" >&2
    cargo install cbindgen --version "$version" --locked --root "$prefix" >&2 \
        || { echo "cbindgen.sh: error: cargo install cbindgen $version failed (crates.io reachable?)" >&2; exit 1; }
fi

header="$root/ffi/include/mote.h"
fresh="$(mktemp)"
trap 'rm -f "$fresh"' EXIT
(cd "$root/ffi" && "$bin" --quiet --config cbindgen.toml --crate mote-ffi --output "$fresh")

if [ "${1:-}" = "--check" ]; then
    if ! diff -u "$header" "$fresh"; then
        echo "cbindgen.sh: error: ffi/include/mote.h is out of date; run scripts/cbindgen.sh and commit it" >&2
        exit 1
    fi
    echo "cbindgen.sh: ffi/include/mote.h is up to date" >&2
else
    cp "$fresh" "$header"
    echo "cbindgen.sh: wrote ffi/include/mote.h" >&2
fi

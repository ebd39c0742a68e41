#!/usr/bin/env bash
# Generate bindings-java/java/src/main/java/org/mote/NativeBridge.java (the Java declarations of
# every JNI entry of the mote-java crate) from bindings-java/src/natives.rs.
#
#   scripts/java-natives.sh            write the file
#   scripts/java-natives.sh --check    fail if the checked-in file differs from a fresh one
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$root/bindings-java/java/src/main/java/org/mote/NativeBridge.java"
fresh="$(mktemp)"
trap 'rm -f "$fresh"' EXIT
(cd "$root" && cargo run -q --locked -p mote-java --bin java-natives) >"$fresh"

if [ "${1:-}" = "--check" ]; then
    if ! diff -u "$out" "$fresh"; then
        echo "java-natives.sh: error: NativeBridge.java is out of date; run scripts/java-natives.sh and commit it" >&2
        exit 1
    fi
    echo "java-natives.sh: NativeBridge.java is up to date" >&2
else
    mkdir -p "$(dirname "$out")"
    cp "$fresh" "$out"
    echo "java-natives.sh: wrote ${out#$root/}" >&2
fi

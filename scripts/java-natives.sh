#!/usr/bin/env bash
# Generate the natives classes of the Java bindings from the mote-java crate's JNI entries:
# bindings-java/java/src/main/java/org/mote/NativeBridge.java (from bindings-java/src/natives.rs)
# and bindings-java/java/src/main/java/org/mote/rpc/RpcBridge.java (from bindings-java/src/rpc.rs).
#
#   scripts/java-natives.sh            write the files
#   scripts/java-natives.sh --check    fail if a checked-in file differs from a fresh one
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
java="$root/bindings-java/java/src/main/java"
fresh="$(mktemp)"
trap 'rm -f "$fresh"' EXIT
(cd "$root" && cargo build -q --locked -p mote-java --bin java-natives)
status=0
for class in org.mote.NativeBridge org.mote.rpc.RpcBridge; do
    out="$java/$(echo "$class" | tr . /).java"
    (cd "$root" && cargo run -q --locked -p mote-java --bin java-natives -- "$class") >"$fresh"
    if [ "${1:-}" = "--check" ]; then
        if ! diff -u "$out" "$fresh"; then
            echo "java-natives.sh: error: ${out#$root/} is out of date; run scripts/java-natives.sh and commit it" >&2
            status=1
        else
            echo "java-natives.sh: ${out#$root/} is up to date" >&2
        fi
    else
        mkdir -p "$(dirname "$out")"
        cp "$fresh" "$out"
        echo "java-natives.sh: wrote ${out#$root/}" >&2
    fi
done
exit "$status"

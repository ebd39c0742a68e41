#!/usr/bin/env bash
# Generate the natives classes of the Java bindings from the mote-java crate's JNI entries:
# bindings-java/java/src/main/java/org/mote/NativeBridge.java (from bindings-java/src/natives.rs),
# bindings-java/java/src/main/java/org/mote/rpc/RpcBridge.java (from bindings-java/src/rpc.rs,
# compiled only with mote-java's `rpc` feature) and the test-only
# bindings-java/java/src/test/java/org/mote/TestHooks.java (from bindings-java/src/test_hooks.rs,
# compiled only with the `test-hooks` feature). The generator reads those files as text, so its
# build without features writes all three.
#
#   scripts/java-natives.sh            write the files
#   scripts/java-natives.sh --check    fail if a checked-in file differs from a fresh one
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
main="$root/bindings-java/java/src/main/java"
test="$root/bindings-java/java/src/test/java"
fresh="$(mktemp)"
trap 'rm -f "$fresh"' EXIT
(cd "$root" && cargo build -q --locked -p mote-java --bin java-natives)
status=0
for entry in "org.mote.NativeBridge:$main" "org.mote.rpc.RpcBridge:$main" "org.mote.TestHooks:$test"; do
    class=${entry%%:*}
    out="${entry#*:}/$(echo "$class" | tr . /).java"
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

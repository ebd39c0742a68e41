#!/usr/bin/env bash
# The runtime's, the test crate's, the C ABI crate's and the RPC crate's Rust tests under
# AddressSanitizer with LeakSanitizer (docs/fuzzing.md, "Sanitizers").
#
#   scripts/sanitize.sh
#
# Host stable Rust with -Zsanitizer=address, allowed by RUSTC_BOOTSTRAP=1 (the standard library
# is not rebuilt: AddressSanitizer does not need it to be instrumented). The zoos come from
# scripts/zoo.sh and scripts/offload-zoo.sh (cached); builds go to
# ${MOTE_CACHE:-$HOME/.cache/mote}/asan-target. No sanitizer report is suppressed; the one
# exemption is the RPC suite's resident-memory bounds (below). Ends with
# "asan checks: N passed, M failed" (test counts).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cache="${MOTE_CACHE:-$HOME/.cache/mote}"
host="$(rustc -vV | sed -n 's/^host: //p')"
[ "$host" = x86_64-unknown-linux-gnu ] || { echo "sanitize.sh: runs on x86_64 Linux (host is $host)" >&2; exit 1; }

# shellcheck source=scripts/lib/host-zoos.sh
. scripts/lib/host-zoos.sh
host_zoos
MOTE_PYTHON="$(scripts/venv.sh | tail -n 1)/bin/python"
export MOTE_PYTHON

log="$cache/sanitize-asan.log"
# Optimization level 1 (debug assertions and overflow checks stay on) runs the instrumented
# tests about twice as fast as level 0; AddressSanitizer checks every access the optimizer
# leaves, and the canaries below are built the same way.
export CARGO_PROFILE_DEV_OPT_LEVEL=1 CARGO_PROFILE_TEST_OPT_LEVEL=1
export RUSTC_BOOTSTRAP=1 RUSTFLAGS="-Zsanitizer=address" RUSTDOCFLAGS="-Zsanitizer=address"
# use_sigaltstack=0: with POCL's threads in the process (the OpenCL tests), AddressSanitizer
# aborts in its own thread teardown ("CHECK failed: sanitizer_common.cpp:81 ... unable to
# unmmap", unmapping the alternate signal stack it gave a thread); without its alternate stack
# every test, the OpenCL ones included, runs and is checked.
export ASAN_OPTIONS="detect_leaks=1:use_sigaltstack=0"

# Canaries: a heap overflow and a leak, each must be reported, or a clean run proves nothing.
canary_failed=0
cargo build -q --locked --target "$host" --target-dir "$cache/asan-target" \
    --manifest-path scripts/lib/asan-canary/Cargo.toml || { echo "sanitize.sh: the canary did not build" >&2; exit 1; }
canary="$cache/asan-target/$host/debug/asan-canary"
for c in "overflow:ERROR: AddressSanitizer: heap-buffer-overflow" "leak:ERROR: LeakSanitizer: detected memory leaks"; do
    out="$("$canary" "${c%%:*}" 2>&1 || true)"
    if grep -qF "${c#*:}" <<<"$out"; then
        echo "asan check: the ${c%%:*} canary was reported"
    else
        echo "asan check: the ${c%%:*} canary was NOT reported"; canary_failed=$((canary_failed + 1))
    fi
done

set +e
# The RPC hostile suite's resident-memory bounds are off: AddressSanitizer's quarantine keeps
# freed memory resident on purpose (LeakSanitizer reports real leaks instead).
MOTE_TEST_NO_RSS_BOUNDS=1 \
    cargo test --no-fail-fast --locked --target "$host" --target-dir "$cache/asan-target" \
    -p mote -p mote-tests -p mote-ffi -p mote-rpc 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
reports=$(grep -c -E 'ERROR: (AddressSanitizer|LeakSanitizer)' "$log" || true)
read -r p f < <(grep -E '^test result:' "$log" | awk '{p+=$4; f+=$6} END {print p+0, f+0}')
echo "sanitizer reports: $reports"
echo "asan checks: $((p + 2 - canary_failed)) passed, $((f + reports + canary_failed)) failed"
[ "$rc" = 0 ] && [ "$reports" = 0 ] && [ "$canary_failed" = 0 ]

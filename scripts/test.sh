#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run):
#   1. formatting and clippy (-D warnings) on the host's stable Rust;
#   2. the x86_64 model zoo built with TVM 0.27, then every Rust test on the host (the RPC
#      server's suites drive TVM's own Python client, tracker and proxy: MOTE_PYTHON), and the
#      thread-pool stress test again in release;
#   3. the C ABI: header drift and hygiene, ABI baseline, C tests under valgrind, CMake example;
#      the Java bindings on the desktop JVM (natives drift, Javadoc, JUnit 5 through Maven);
#      the Android JNI library (arm64, linked without the NDK, audited), the AAR, and the
#      RPC app's APK (built without Gradle, verified, badging checked);
#   4. the aarch64 zoos, and the same tests cross-built with trixie's Rust 1.85 under qemu,
#      including the offload zoo on the real ACL through libmote_acl.so; the shim's own C test;
#   5. the phone, simulated: the aarch64 `mote rpc serve` under qemu with the real ACL, driven
#      by TVM's client on the host (scripts/test-rpc-phone.sh);
#   6. check builds for iOS, macOS and Android.
# Tools that are missing are installed (venv, trixie chroot) or the run fails: nothing is
# skipped. Expensive things are cached under ${MOTE_CACHE:-$HOME/.cache/mote}.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export MOTE_CACHE="${MOTE_CACHE:-$HOME/.cache/mote}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

step() { printf '\n=== %s (%ss) ===\n' "$1" "$SECONDS" >&2; }
fail() { echo "test.sh: FAILED: $*" >&2; exit 1; }

results=()
record() { results+=("$1"); }

step "formatting and lints"
cargo fmt --all --check || fail "cargo fmt --check (run cargo fmt --all)"
cargo clippy --workspace --all-targets --locked -- -D warnings || fail "clippy"
record "fmt+clippy: ok"

step "x86_64 model zoo and offload zoo (TVM 0.27)"
MOTE_ZOO_DIR="$(scripts/zoo.sh --target x86_64 | tail -n 1)"
export MOTE_ZOO_DIR
[ -f "$MOTE_ZOO_DIR/manifest.json" ] || fail "no x86_64 zoo"
MOTE_OFFLOAD_ZOO_DIR="$(scripts/offload-zoo.sh --target x86_64 | tail -n 1)"
export MOTE_OFFLOAD_ZOO_DIR
[ -f "$MOTE_OFFLOAD_ZOO_DIR/manifest.json" ] || fail "no x86_64 offload zoo"

step "host tests (x86_64)"
# The RPC suites run TVM's own client, tracker and proxy from the venv.
MOTE_PYTHON="$(scripts/venv.sh | tail -n 1)/bin/python"
export MOTE_PYTHON
[ -x "$MOTE_PYTHON" ] || fail "no venv python for the RPC tests"
cargo test --workspace --locked 2>&1 | tee "$MOTE_CACHE/last-host-tests.log"
[ "${PIPESTATUS[0]}" = 0 ] || fail "host tests"
record "host tests: $(grep -E '^test result:' "$MOTE_CACHE/last-host-tests.log" | awk '{p+=$4; f+=$6} END {print p " passed, " f " failed"}')"

step "thread-pool stress test (release: 3 sessions x 4 threads x 200,000 launches)"
cargo test -p mote --release --locked --lib stress_ 2>&1 | tee "$MOTE_CACHE/last-stress-tests.log"
[ "${PIPESTATUS[0]}" = 0 ] || fail "thread-pool stress test"
record "stress: $(grep -E '^test result:' "$MOTE_CACHE/last-stress-tests.log" | awk '{p+=$4; f+=$6} END {print p " passed, " f " failed"}')"

step "C ABI (header, ABI baseline, C tests under valgrind, CMake)"
scripts/test-ffi.sh 2>&1 | tee "$MOTE_CACHE/last-ffi-tests.log"
[ "${PIPESTATUS[0]}" = 0 ] || fail "C ABI tests"
ffi_line="$(grep -E '^ffi checks:' "$MOTE_CACHE/last-ffi-tests.log" | tail -n 1)"
record "$ffi_line"

step "Java bindings (desktop JVM: natives drift, Javadoc, JUnit 5 through Maven)"
scripts/test-java.sh 2>&1 | tee "$MOTE_CACHE/last-java-tests.log"
[ "${PIPESTATUS[0]}" = 0 ] || fail "Java binding tests"
java_line="$(grep -E '^java checks:' "$MOTE_CACHE/last-java-tests.log" | tail -n 1)"
record "$java_line"

step "Android: arm64 JNI library (no NDK), its audit, the AAR"
scripts/test-android.sh 2>&1 | tee "$MOTE_CACHE/last-android-tests.log"
[ "${PIPESTATUS[0]}" = 0 ] || fail "Android library/AAR checks"
android_line="$(grep -E '^android checks:' "$MOTE_CACHE/last-android-tests.log" | tail -n 1)"
record "$android_line"

step "Android RPC app: the APK (javac, d8, aapt2, zipalign, apksigner; no Gradle)"
scripts/build-apk.sh 2>&1 | tee "$MOTE_CACHE/last-apk-checks.log"
[ "${PIPESTATUS[0]}" = 0 ] || fail "APK build/checks"
apk_line="$(grep -E '^apk checks:' "$MOTE_CACHE/last-apk-checks.log" | tail -n 1)"
record "$apk_line"

step "aarch64 tests under qemu (trixie Rust 1.85)"
scripts/test-aarch64.sh 2>&1 | tee "$MOTE_CACHE/last-aarch64-tests.log"
[ "${PIPESTATUS[0]}" = 0 ] || fail "aarch64 tests"
record "aarch64 tests: $(grep -E '^test result:' "$MOTE_CACHE/last-aarch64-tests.log" | awk '{p+=$4; f+=$6} END {print p " passed, " f " failed"}')"

step "ACL backend shim (aarch64, real ACL 24.11, qemu)"
scripts/test-acl.sh 2>&1 | tee "$MOTE_CACHE/last-acl-tests.log"
[ "${PIPESTATUS[0]}" = 0 ] || fail "ACL shim tests"
acl_line="$(grep -E '^acl checks:' "$MOTE_CACHE/last-acl-tests.log" | tail -n 1)"
record "$acl_line"

step "RPC: the phone, simulated (aarch64 server under qemu with ACL, TVM's client on the host)"
scripts/test-rpc-phone.sh 2>&1 | tee "$MOTE_CACHE/last-rpc-phone.log"
[ "${PIPESTATUS[0]}" = 0 ] || fail "RPC phone simulation"
phone_line="$(grep -E '^rpc phone checks:' "$MOTE_CACHE/last-rpc-phone.log" | tail -n 1)"
record "$phone_line"

step "check builds for iOS, macOS, Android"
scripts/check-mobile.sh || fail "mobile check builds"
record "check builds: ok"

step "summary"
printf '%s\n' "${results[@]}"
total_p=0; total_f=0
for log in "$MOTE_CACHE/last-host-tests.log" "$MOTE_CACHE/last-stress-tests.log" "$MOTE_CACHE/last-aarch64-tests.log"; do
    read -r p f < <(grep -E '^test result:' "$log" | awk '{p+=$4; f+=$6} END {print p+0, f+0}')
    total_p=$((total_p + p)); total_f=$((total_f + f))
done
for line in "$ffi_line" "$java_line" "$android_line" "$apk_line" "$acl_line" "$phone_line"; do
    # "<name> checks: N passed, M failed": the numbers before "passed" and "failed".
    read -r p f < <(echo "$line" | awk '{for (i = 2; i <= NF; i++) {if ($i ~ /^passed/) p = $(i-1); if ($i ~ /^failed/) f = $(i-1)} print p+0, f+0}')
    total_p=$((total_p + p)); total_f=$((total_f + f))
done
echo "all suites passed in ${SECONDS}s"
echo "$total_p passed, $total_f failed"

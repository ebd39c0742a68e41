#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run):
#   1. formatting and clippy (-D warnings) on the host's stable Rust;
#   2. the x86_64 model zoo built with TVM 0.27, then every Rust test on the host (the RPC
#      server's suites drive TVM's own Python client, tracker and proxy: MOTE_PYTHON), and the
#      thread-pool stress test again in release, and the cpu backend's kernels in a build
#      without the `avx512` feature; the tests under AddressSanitizer and ThreadSanitizer;
#   3. the C ABI: header drift and hygiene, ABI baseline, C tests under valgrind, CMake example;
#      the Java bindings on the desktop JVM (natives drift, Javadoc, JUnit 5 through Maven);
#      the Android JNI library (arm64, linked without the NDK, audited), the AAR, and the
#      RPC app's APK (built without Gradle, verified, badging checked);
#   4. the aarch64 zoos, and the same tests cross-built with trixie's Rust 1.85 under qemu,
#      including the offload zoo on the real ACL through libmote_acl.so; the shim's own C test;
#   5. the phone, simulated: the aarch64 `mote rpc serve` under qemu with the real ACL, driven
#      by TVM's client on the host (scripts/test-rpc-phone.sh);
#   6. the Swift bindings and the iOS app's core (swift test in the chroot), a check build for
#      Android, and Mote.xcframework and MoteRPC.xcframework built for iOS, the simulator and
#      macOS and checked, then the root Swift package (Package.swift) as SwiftPM reads it, in
#      its release form too.
# Tools that are missing are installed (venv, trixie chroot) or the run fails: nothing is
# skipped. Expensive things are cached under ${MOTE_CACHE:-$HOME/.cache/mote}.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export MOTE_CACHE="${MOTE_CACHE:-$HOME/.cache/mote}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# The run happens in a work copy at a fixed path, $MOTE_CACHE/work, brought to this checkout's
# content first (scripts/lib/work_copy.py: unchanged files keep their modification times,
# changed ones are rewritten, anything else goes except cargo's target/ and SwiftPM's .build/
# folders). Cargo judges staleness by modification times, so in a fresh clone, where every
# file is new, it would rebuild every crate of the workspace, and in the clone's own target/
# every dependency too; in the work copy it rebuilds what changed since the last run, as
# after an edit.
# MOTE_WORK_COPY=0 runs in place, as does a checkout that is not a git work tree (an unpacked
# archive: there is no list of its files). One run at a time holds the work copy (flock).
if [ "${MOTE_WORK_COPY:-1}" != 0 ] && [ -z "${MOTE_IN_WORK_COPY:-}" ] \
    && [ "$(git -C "$root" rev-parse --show-toplevel 2>/dev/null)" = "$(cd "$root" && pwd -P)" ]; then
    mkdir -p "$MOTE_CACHE"
    exec 9>"$MOTE_CACHE/work.lock"
    flock -n 9 || { echo "test.sh: another run holds $MOTE_CACHE/work.lock: waiting for it" >&2; flock 9; }
    work="$MOTE_CACHE/work"
    # Cargo keeps one copy of each artifact, but incremental-compilation state piles up.
    if [ -d "$work/target" ] && [ "$(du -s --block-size=1G "$work/target" | cut -f1)" -gt 24 ]; then
        echo "test.sh: $work/target is over 24 GiB: emptied" >&2
        rm -rf "$work/target"
    fi
    python3 "$root/scripts/lib/work_copy.py" "$root" "$work" >&2 || { echo "test.sh: FAILED: the work copy $work" >&2; exit 1; }
    echo "test.sh: running in the work copy (MOTE_WORK_COPY=0 runs in place)" >&2
    MOTE_IN_WORK_COPY=1 exec "$work/scripts/test.sh" "$@"
elif [ -z "${MOTE_IN_WORK_COPY:-}" ]; then
    echo "test.sh: running in place ($root)" >&2
fi
# The trixie builds' target folder lives in the cache (scripts/in-trixie.sh), so that a fresh
# clone reuses the standard library -Zbuild-std made and the dependencies. Artifacts of earlier
# flags and features pile up there: past 16 GiB it is emptied and rebuilt from scratch.
trixie_target="${MOTE_TRIXIE_TARGET:-$MOTE_CACHE/target-trixie}"
if [ -d "$trixie_target" ] && [ "$(du -s --block-size=1G "$trixie_target" | cut -f1)" -gt 16 ]; then
    echo "test.sh: $trixie_target is over 16 GiB: emptied" >&2
    rm -rf "$trixie_target"
fi

results=()
# Each step's header names the free disk: a full disk fails builds in ways that look unrelated.
current_step="start"
free_disk() { df -Ph "$root" | awk 'NR == 2 {print $4 " free on " $6}'; }
step() {
    current_step=$1
    printf '\n=== %s (%ss; %s) ===\n' "$1" "$SECONDS" "$(free_disk)" >&2
}
fail() { echo "test.sh: FAILED: $*" >&2; exit 1; }
# Whatever stops the run (fail, or set -e), the last lines say where, what passed before it,
# and how much disk was left, so a long log's failure is found at its end.
on_exit() {
    local rc=$?
    [ "$rc" = 0 ] && return
    {
        echo
        echo "test.sh: FAILED (exit $rc) in step: $current_step, after ${SECONDS}s; $(free_disk)"
        [ "${#results[@]}" = 0 ] || printf 'passed before it: %s\n' "${results[@]}"
    } >&2
}
trap on_exit EXIT

record() { results+=("$1"); }

# cargo_counts LOG: "P passed, F failed, I ignored", summed over cargo's "test result:" lines.
cargo_counts() {
    grep -E '^test result:' "$1" | awk '{p+=$4; f+=$6; i+=$8} END {print p+0 " passed, " f+0 " failed, " i+0 " ignored"}'
}
# require_tests LOG MIN WHAT [NAME...]: a step that selects tests by name passes only if at least
# MIN passed and each NAME passed ("test ...::NAME ... ok"): cargo exits 0 with "0 passed" for a
# filter that matches nothing.
require_tests() {
    local log=$1 min=$2 what=$3 n name
    shift 3
    n=$(grep -E '^test result:' "$log" | awk '{p+=$4} END {print p+0}')
    [ "$n" -ge "$min" ] || fail "$what: $n tests passed, at least $min expected (does the filter still match?)"
    for name in "$@"; do
        grep -qE "^test (.*::)?$name \.\.\. ok\$" "$log" || fail "$what: test $name did not run (or did not pass)"
    done
}
# cargo_tests LOG MIN WHAT [NAME...] -- CARGO TEST ARGS...: `cargo test ARGS` into LOG; fails
# unless it passed, with at least MIN tests and each NAME among the passed ones (require_tests).
cargo_tests() {
    local log=$1 min=$2 what=$3 names=()
    shift 3
    while [ "$1" != -- ]; do names+=("$1"); shift; done
    shift
    cargo test "$@" 2>&1 | tee "$log"
    [ "${PIPESTATUS[0]}" = 0 ] || fail "$what"
    require_tests "$log" "$min" "$what" "${names[@]}"
}
# check_levels LOG AVX512_FEATURE WHAT: the cpu kernel tests print the ISA levels they ran
# ("cpu kernel levels covered: ...", "cpu qgemm levels covered: ..."; gemm.rs and qgemm.rs,
# run with --nocapture); fail if this CPU (/proc/cpuinfo's flags) has a level they did not run.
# AVX512_FEATURE is 1 for a build with the `avx512` feature, 0 without (no avx512 levels then).
check_levels() {
    local log=$1 avx512=$2 what=$3 flags f32="sse2 scalar" q="scalar" kind want line covered l missing=""
    [ "$(uname -m)" = x86_64 ] || fail "$what: the ISA level check reads x86_64 flags only"
    flags=" $(grep -m 1 '^flags' /proc/cpuinfo | cut -d: -f2) "
    has() { local f; for f in "$@"; do [[ "$flags" == *" $f "* ]] || return 1; done; }
    if has avx2 fma; then f32="avx2 $f32"; q="avx2 $q"; fi
    if [ "$avx512" = 1 ] && has avx2 fma avx512f avx512vl avx512bw avx512dq; then
        f32="avx512 $f32"
        if has avx512_vnni; then q="avx512vnni $q"; fi
    fi
    for kind in kernel qgemm; do
        want=$f32; [ "$kind" = qgemm ] && want=$q
        line="$(grep -oE "cpu $kind levels covered:[a-z0-9 ]*" "$log" | tail -n 1)"
        [ -n "$line" ] || fail "$what: no \"cpu $kind levels covered:\" line (the test that iterates the levels did not run)"
        covered=" ${line#*covered:} "
        for l in $want; do [[ "$covered" == *" $l "* ]] || missing+=" $kind:$l"; done
        echo "test.sh: $what: $kind levels covered:${line#*covered:} (this CPU: $want)" >&2
    done
    [ -z "$missing" ] || fail "$what: this CPU has levels the tests did not run:$missing"
}

# check_suite SCRIPT LOGNAME LABEL WHAT: run a script that ends with "<LABEL> checks: N passed,
# M failed", keep its log, fail the run with WHAT if it fails, and record its summary line.
check_lines=()
check_suite() {
    local script=$1 log="$MOTE_CACHE/last-$2.log" label=$3 what=$4 line
    "$script" 2>&1 | tee "$log"
    [ "${PIPESTATUS[0]}" = 0 ] || fail "$what"
    line="$(grep -E "^$label checks:" "$log" | tail -n 1)"
    record "$line"
    check_lines+=("$line")
}

step "formatting and lints"
cargo fmt --all --check || fail "cargo fmt --check (run cargo fmt --all)"
cargo clippy --workspace --all-targets --locked -- -D warnings || fail "clippy"
# Features no workspace build turns on: the JNI library's RPC server, and builds without the cpu
# backend (selective builds).
cargo clippy -p mote-java --features rpc,test-hooks --all-targets --locked -- -D warnings || fail "clippy (mote-java --features rpc)"
cargo clippy -p mote-ffi -p mote-cli --no-default-features --locked -- -D warnings || fail "clippy (without the cpu backend)"
# Offloaded subgraphs without the cpu backend (an app whose regions all go to ACL or BNNS).
cargo clippy -p mote-ffi --no-default-features --features offload --locked -- -D warnings || fail "clippy (offload without the cpu backend)"
# The fuzz targets are their own workspace (docs/fuzzing.md).
cargo fmt --manifest-path fuzz/Cargo.toml --check || fail "cargo fmt --check (fuzz/)"
cargo clippy --manifest-path fuzz/Cargo.toml --all-targets --locked -- -D warnings || fail "clippy (fuzz/)"
# The second Rust library the XCFramework step links beside Mote's (its own workspace too).
cargo fmt --manifest-path scripts/apple/second-rust/Cargo.toml --check || fail "cargo fmt --check (scripts/apple/second-rust/)"
cargo clippy --manifest-path scripts/apple/second-rust/Cargo.toml --all-targets --locked -- -D warnings || fail "clippy (scripts/apple/second-rust/)"
record "fmt+clippy: ok"

step "x86_64 model zoo and offload zoo (TVM 0.27)"
MOTE_ZOO_DIR="$(scripts/zoo.sh --target x86_64 | tail -n 1)"
export MOTE_ZOO_DIR
[ -f "$MOTE_ZOO_DIR/manifest.json" ] || fail "no x86_64 zoo"
MOTE_OFFLOAD_ZOO_DIR="$(scripts/offload-zoo.sh --target x86_64 | tail -n 1)"
export MOTE_OFFLOAD_ZOO_DIR
[ -f "$MOTE_OFFLOAD_ZOO_DIR/manifest.json" ] || fail "no x86_64 offload zoo"
# tests/tests/code_free.rs also runs the other architecture's code-free files: the aarch64
# offload zoo (TVM cross-compiles; the trixie chroot links), reused later by the aarch64 step.
scripts/trixie.sh >/dev/null
MOTE_CODE_FREE_FOREIGN_ZOO_DIR="$(MOTE_AARCH64_LINK="$PWD/scripts/in-trixie.sh aarch64-linux-gnu-gcc" \
    scripts/offload-zoo.sh --target aarch64 | tail -n 1)"
export MOTE_CODE_FREE_FOREIGN_ZOO_DIR
[ -f "$MOTE_CODE_FREE_FOREIGN_ZOO_DIR/manifest.json" ] || fail "no aarch64 offload zoo"

step "OpenCL device for the tests (POCL) and the OpenCL zoo (TVM 0.27; docs/opencl.md)"
scripts/opencl.sh || fail "no OpenCL device (scripts/opencl.sh)"
MOTE_OPENCL_ZOO_DIR="$(scripts/opencl-zoo.sh | tail -n 1)"
export MOTE_OPENCL_ZOO_DIR
[ -f "$MOTE_OPENCL_ZOO_DIR/manifest.json" ] || fail "no OpenCL zoo"
record "opencl: $(scripts/opencl.sh | grep -m 1 'Device #' | sed 's/.*Device #0: //')"

step "host tests (x86_64)"
# The RPC suites run TVM's own client, tracker and proxy from the venv.
MOTE_PYTHON="$(scripts/venv.sh | tail -n 1)/bin/python"
export MOTE_PYTHON
[ -x "$MOTE_PYTHON" ] || fail "no venv python for the RPC tests"
cargo test --workspace --locked 2>&1 | tee "$MOTE_CACHE/last-host-tests.log"
[ "${PIPESTATUS[0]}" = 0 ] || fail "host tests"
record "host tests: $(cargo_counts "$MOTE_CACHE/last-host-tests.log")"

step "AddressSanitizer + LeakSanitizer: mote, mote-tests, mote-ffi, mote-rpc (docs/fuzzing.md)"
check_suite scripts/sanitize.sh asan-tests "asan" "tests under AddressSanitizer"

step "ThreadSanitizer: mote, mote-tests, mote-ffi and the C tests (trixie Rust 1.85, -Zbuild-std; docs/fuzzing.md)"
check_suite scripts/tsan.sh tsan-tests "tsan" "tests under ThreadSanitizer"

step "thread-pool stress test (release: 3 sessions x 4 threads x 200,000 launches)"
cargo_tests "$MOTE_CACHE/last-stress-tests.log" 2 "thread-pool stress test" \
    stress_every_task_runs_exactly_once_for_its_own_launch \
    stress_a_failing_task_releases_the_barrier_at_1_to_8_threads \
    -- -p mote --release --locked --lib stress_
record "stress: $(cargo_counts "$MOTE_CACHE/last-stress-tests.log")"

step "session budgets and interrupt in release (the stack budget on a 512 KiB thread)"
# The same release test binary; debug builds run these in the host and aarch64 suites.
cargo_tests "$MOTE_CACHE/last-budget-release-tests.log" 8 "budget tests (release)" \
    recursion_stops_at_the_stack_budget_on_a_512_kib_thread \
    stress_interrupts_from_another_thread_cancel_one_call_each \
    -- -p mote --release --locked --lib vm::budget_tests -- --nocapture
record "budgets (release): $(cargo_counts "$MOTE_CACHE/last-budget-release-tests.log")"

step "cpu backend kernels in release (default features): every ISA level this CPU has ran"
# The same release test binary as the stress step; the level lists are compared with
# /proc/cpuinfo (check_levels).
cargo_tests "$MOTE_CACHE/last-cpu-levels-tests.log" 25 "cpu kernel tests (release)" \
    every_level_matches_an_f64_reference_on_odd_shapes qgemm_matches_an_exact_reference \
    -- -p mote --release --locked --lib offload::backends::cpu -- --nocapture
check_levels "$MOTE_CACHE/last-cpu-levels-tests.log" 1 "cpu kernel tests (release)"
record "cpu kernels (release): $(cargo_counts "$MOTE_CACHE/last-cpu-levels-tests.log")"

step "cpu backend kernels built without the avx512 feature (the gemm crate's AVX2 GEMM on an AVX-512 CPU)"
# The gemm crate picks its widest kernels itself: on an AVX-512 machine only a build without
# the feature runs its AVX2 ones (docs/cpu-kernels.md).
cargo_tests "$MOTE_CACHE/last-no-avx512-tests.log" 25 "cpu kernel tests without avx512" \
    every_level_matches_an_f64_reference_on_odd_shapes qgemm_matches_an_exact_reference \
    -- -p mote --release --locked --lib --no-default-features --features cpu-backend offload::backends::cpu -- --nocapture
check_levels "$MOTE_CACHE/last-no-avx512-tests.log" 0 "cpu kernel tests without avx512"
record "cpu kernels without avx512: $(cargo_counts "$MOTE_CACHE/last-no-avx512-tests.log")"

step "C ABI (header, ABI baseline, C tests under valgrind, CMake)"
check_suite scripts/test-ffi.sh ffi-tests "ffi" "C ABI tests"

step "selective builds: the feature choice, and Mote without its cpu backend (docs/footprint.md)"
check_suite scripts/test-selective.sh selective-tests "selective" "selective build checks"

step "corrupted-file corpus through the CLI and the C ABI (docs/fuzzing.md)"
check_suite scripts/test-corrupt.sh corrupt-tests "corrupt" "corrupted-file checks"

step "crafted attack files (issue 27) through the CLI, the C ABI and the code-free RPC server (docs/untrusted-models.md)"
check_suite scripts/test-crafted.sh crafted-tests "crafted" "crafted attack file checks"

step "Java bindings (desktop JVM: natives drift, Javadoc, JUnit 5 through Maven)"
check_suite scripts/test-java.sh java-tests "java" "Java binding tests"

step "Android: arm64-v8a and x86_64 JNI libraries (no NDK), their audit and unwinder, the AAR"
check_suite scripts/test-android.sh android-tests "android" "Android library/AAR checks"

step "Android RPC app: the APK (javac, d8, aapt2, zipalign, apksigner; no Gradle)"
check_suite scripts/build-apk.sh apk-checks "apk" "APK build/checks"

step "Android: bionic's symbol resolution for the AAR's and the APK's libraries with models exported for Android (docs/android.md)"
check_suite scripts/test-android-bionic.sh android-bionic-tests "android bionic" "Android bionic resolution checks"

step "Android RPC app under Robolectric (host JNI library, TVM's client through the app's server; offline after the first fetch)"
check_suite scripts/test-android-app.sh android-app-tests "android app" "Android app Robolectric tests"

step "Swift bindings (uniffi drift, swift test in the trixie chroot)"
check_suite scripts/test-swift.sh swift-tests "swift" "Swift binding tests"

step "iOS RPC app core (swift test of ios-app in the trixie chroot, TVM's client through the controller)"
check_suite scripts/test-ios-app.sh ios-app-tests "ios app" "iOS app core tests"

step "aarch64 tests under qemu (trixie Rust 1.85)"
MOTE_OFFLOAD_ZOO_DIR_X86_64="$MOTE_OFFLOAD_ZOO_DIR" scripts/test-aarch64.sh 2>&1 | tee "$MOTE_CACHE/last-aarch64-tests.log"
[ "${PIPESTATUS[0]}" = 0 ] || fail "aarch64 tests"
record "aarch64 tests: $(cargo_counts "$MOTE_CACHE/last-aarch64-tests.log")"

step "ACL backend shim (aarch64, real ACL 24.11, qemu)"
check_suite scripts/test-acl.sh acl-tests "acl" "ACL shim tests"

step "RPC: the phone, simulated (aarch64 server under qemu with ACL, TVM's client on the host)"
check_suite scripts/test-rpc-phone.sh rpc-phone "rpc phone" "RPC phone simulation"

step "check build for Android (mote, mote-ffi, mote-rpc, mote-swift, mote-swift-rpc)"
scripts/check-mobile.sh || fail "mobile check builds"
record "check builds: ok"

step "Apple: Mote.xcframework and MoteRPC.xcframework (static libraries for iOS, the simulator and macOS; Mach-O checks)"
check_suite scripts/build-xcframework.sh xcframework "xcframework" "XCFramework build/checks"

step "SwiftPM: the root package (both branches, the release form with the zip above, privacy manifest)"
check_suite scripts/test-swiftpm.sh swiftpm "swiftpm" "SwiftPM root package checks"

step "fuzzing (libFuzzer + AddressSanitizer, 20 s per target; docs/fuzzing.md)"
check_suite scripts/fuzz.sh fuzz "fuzz" "fuzzing"

step "summary"
printf '%s\n' "${results[@]}"
total_p=0; total_f=0; total_i=0
for log in host-tests stress-tests cpu-levels-tests no-avx512-tests aarch64-tests; do
    read -r p f i < <(grep -E '^test result:' "$MOTE_CACHE/last-$log.log" | awk '{p+=$4; f+=$6; i+=$8} END {print p+0, f+0, i+0}')
    total_p=$((total_p + p)); total_f=$((total_f + f)); total_i=$((total_i + i))
done
for line in "${check_lines[@]}"; do
    # "<name> checks: N passed, M failed": the numbers before "passed" and "failed".
    read -r p f < <(echo "$line" | awk '{for (i = 2; i <= NF; i++) {if ($i ~ /^passed/) p = $(i-1); if ($i ~ /^failed/) f = $(i-1)} print p+0, f+0}')
    total_p=$((total_p + p)); total_f=$((total_f + f))
done
echo "all suites passed in ${SECONDS}s"
echo "$total_p passed, $total_f failed, $total_i ignored (cargo's ignored tests; the script suites count none)"

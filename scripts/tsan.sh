#!/usr/bin/env bash
# The runtime's, the conformance tests' and the C ABI's tests under ThreadSanitizer
# (docs/fuzzing.md, "ThreadSanitizer").
#
#   scripts/tsan.sh
#
# ThreadSanitizer needs the standard library instrumented too (its locks and atomics are what
# order most accesses), so std is rebuilt from source with -Zbuild-std: that takes rust-src,
# which the trixie chroot's Rust 1.85 has and the host's stable Rust does not. Debian's rustc
# ships no sanitizer runtime, so the programs are linked by clang 19 with -fsanitize=thread: its
# compiler-rt is the runtime of the LLVM (19) that rustc 1.85 instruments with, and
# -Zexternal-clangrt tells rustc not to look for its own. x86_64 builds without the `avx512`
# feature (Rust 1.89). Nightly flags are allowed with RUSTC_BOOTSTRAP=1.
#
# Runs, in the chroot:
#   1. two canaries, a Rust program and a C program with one data race each, built as the tests
#      are: each must be reported, or a clean run below would prove nothing;
#   2. cargo test --lib --tests of mote, mote-tests (the zoos, the offload zoo, concurrency) and
#      mote-ffi;
#   3. the C ABI's C tests (test_api, test_zoo, test_callbacks, test_budgets: C threads sharing
#      models and sessions, callbacks from Mote's pool, interrupts from another thread), built with clang -fsanitize=thread against the
#      instrumented libmote.so.
# No report is suppressed. Builds go to ${MOTE_CACHE:-$HOME/.cache/mote}/tsan-target; logs to
# .../tsan-*.log. Ends with "tsan checks: N passed, M failed" (tests and C programs).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cache="${MOTE_CACHE:-$HOME/.cache/mote}"
die() { echo "tsan.sh: $*" >&2; exit 1; }

if [ "${1:-}" != --inside ]; then
    [ "$(uname -m)" = x86_64 ] || die "runs on x86_64 Linux"
    # shellcheck source=scripts/lib/host-zoos.sh
    . scripts/lib/host-zoos.sh
    host_zoos
    # The C tests' inputs are written on the host (the venv's Python does not run in the chroot).
    venv="$(scripts/venv.sh | tail -n 1)"
    MOTE_TSAN_OUT="$cache/tsan-target/c-tests"
    rm -rf "$MOTE_TSAN_OUT"
    mkdir -p "$MOTE_TSAN_OUT/scratch"
    "$venv/bin/python" ffi/tests/zoo_cases.py "$MOTE_ZOO_DIR" "$MOTE_TSAN_OUT/cases" >/dev/null 2>&1 \
        || die "zoo_cases.py failed"
    "$venv/bin/python" ffi/tests/callback_models.py "$MOTE_TSAN_OUT/models" >/dev/null 2>&1 \
        || die "callback_models.py failed"
    # test_budgets.c's hand-made models (mote::fuzzing::craft), written by the host's build.
    cargo run -q -p mote-ffi --example craft_models -- "$MOTE_TSAN_OUT/crafted" >/dev/null 2>&1 \
        || die "craft_models failed"
    export MOTE_TSAN_OUT
    exec scripts/in-trixie.sh bash "$root/scripts/tsan.sh" --inside
fi

# --- inside the chroot ---
for tool in clang-19 cargo rustc; do
    command -v "$tool" >/dev/null || die "$tool missing in the chroot (scripts/trixie.sh installs it)"
done
rt="$(clang-19 -print-file-name=libclang_rt.tsan-x86_64.a)"
[ -f "$rt" ] || die "clang 19's ThreadSanitizer runtime is missing (libclang-rt-19-dev)"
llvm_rustc="$(rustc -vV | sed -n 's/^LLVM version: //p')"
llvm_clang="$(clang-19 --version | sed -n 's/.*clang version \([0-9.]*\).*/\1/p' | head -n 1)"
[ "${llvm_rustc%%.*}" = "${llvm_clang%%.*}" ] \
    || die "rustc's LLVM ($llvm_rustc) and clang's ($llvm_clang) differ: the runtime must match"

target=x86_64-unknown-linux-gnu
export RUSTC_BOOTSTRAP=1
export RUSTFLAGS="-Zsanitizer=thread -Zexternal-clangrt -Clinker=clang-19 -Clink-arg=-fsanitize=thread"
export CARGO_TARGET_DIR="$cache/tsan-target"
# Optimized a little (level 1; debug assertions and overflow checks stay on): the instrumented
# tests ran about 4.5x faster than at level 0 (mote's unit tests 168 s -> 36 s), and level 1
# keeps every access ThreadSanitizer watches (it instruments what the optimizer leaves).
export CARGO_PROFILE_DEV_OPT_LEVEL=1 CARGO_PROFILE_TEST_OPT_LEVEL=1
symbolizer=/usr/lib/llvm-19/bin/llvm-symbolizer
[ -x "$symbolizer" ] || die "llvm-symbolizer missing in the chroot (llvm-19)"
# halt_on_error=0: every report of a run is printed, not only the first; the symbolizer names
# the functions and lines in each report's stacks.
export TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1 external_symbolizer_path=$symbolizer"
export MOTE_POISON_MEMORY=1
cargo_args=(-Zbuild-std --target "$target" --locked)
logs="$cache"
passed=0
failed=0
reports() { grep -c -E '^WARNING: ThreadSanitizer' "$1" || true; }

# 1. Canaries: each must be caught.
canary_log="$logs/tsan-canary.log"
cargo run "${cargo_args[@]}" --manifest-path scripts/lib/tsan-canary/Cargo.toml >"$canary_log" 2>&1 || true
if grep -q 'WARNING: ThreadSanitizer: data race' "$canary_log"; then
    passed=$((passed + 1)); echo "tsan check: Rust canary's race reported"
else
    failed=$((failed + 1)); echo "tsan check: Rust canary's race NOT reported"; tail -n 30 "$canary_log"
fi
clang-19 -fsanitize=thread -g -O1 scripts/lib/tsan-canary/race.c -o "$MOTE_TSAN_OUT/race" -lpthread
"$MOTE_TSAN_OUT/race" >"$logs/tsan-canary-c.log" 2>&1 || true
if grep -q 'WARNING: ThreadSanitizer: data race' "$logs/tsan-canary-c.log"; then
    passed=$((passed + 1)); echo "tsan check: C canary's race reported"
else
    failed=$((failed + 1)); echo "tsan check: C canary's race NOT reported"; tail -n 30 "$logs/tsan-canary-c.log"
fi

# 2. The Rust tests.
rust_log="$logs/tsan-rust.log"
set +e
# The chroot has no OpenCL driver: the OpenCL layer's tests (device::opencl) and the OpenCL
# zoo's (opencl_zoo::) run on the host, under AddressSanitizer too, not here.
cargo test "${cargo_args[@]}" --no-default-features --features mote/cpu-backend,mote/opencl --no-fail-fast -p mote -p mote-tests -p mote-ffi \
    --lib --tests -- --skip device::opencl --skip opencl_zoo:: 2>&1 | tee "$rust_log"
rc=${PIPESTATUS[0]}
set -e
read -r p f < <(grep -E '^test result:' "$rust_log" | awk '{p+=$4; f+=$6} END {print p+0, f+0}')
n=$(reports "$rust_log")
passed=$((passed + p)); failed=$((failed + f))
echo "tsan check: Rust tests: $p passed, $f failed, $n ThreadSanitizer reports (cargo exit $rc)"
if [ "$n" != 0 ] || [ "$rc" != 0 ]; then
    [ "$f" != 0 ] || failed=$((failed + 1))
fi

# 3. The C tests against the instrumented libmote.so.
cargo build "${cargo_args[@]}" --no-default-features --features cpu-backend,opencl -p mote-ffi >&2
lib="$CARGO_TARGET_DIR/$target/debug"
ln -sf libmote_ffi.so "$lib/libmote.so.0"
ln -sf libmote_ffi.so "$lib/libmote.so"
cflags=(-std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -g -O1 -fsanitize=thread -Iffi/include)
run_c() { # run_c NAME ARGS...
    local name=$1 log="$logs/tsan-$1.log" rc
    shift
    clang-19 "${cflags[@]}" "ffi/tests/c/$name.c" -o "$MOTE_TSAN_OUT/$name" -L"$lib" -lmote \
        -Wl,-rpath,"$lib" -lpthread -lm || die "$name did not build"
    set +e
    "$MOTE_TSAN_OUT/$name" "$@" >"$log" 2>&1
    rc=$?
    set -e
    n=$(reports "$log")
    if [ "$rc" = 0 ] && [ "$n" = 0 ]; then
        passed=$((passed + 1)); echo "tsan check: $name ok"
    else
        failed=$((failed + 1)); echo "tsan check: $name FAILED (exit $rc, $n ThreadSanitizer reports)"
        tail -n 60 "$log"
    fi
}
run_c test_api "$MOTE_ZOO_DIR" "$MOTE_TSAN_OUT/scratch"
run_c test_zoo "$MOTE_TSAN_OUT/cases"
run_c test_callbacks "$MOTE_ZOO_DIR" "$MOTE_TSAN_OUT/models"
run_c test_budgets "$MOTE_TSAN_OUT/crafted" "$MOTE_ZOO_DIR"

echo "tsan checks: $passed passed, $failed failed"
[ "$failed" = 0 ]

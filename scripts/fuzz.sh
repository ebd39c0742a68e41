#!/usr/bin/env bash
# Fuzz Mote's parsers of untrusted bytes with libFuzzer (docs/fuzzing.md).
#
#   scripts/fuzz.sh [--time SECONDS | --runs N] [TARGET...]
#
# Targets (fuzz/fuzz_targets): elf module_blob opencl_module executable model_code_free run_code_free subgraph
# npy rpc_wire (default: all), two at a time ($MOTE_FUZZ_JOBS). Each runs for SECONDS (default 20, or $MOTE_FUZZ_SECONDS) or N executions, under AddressSanitizer and
# the allocation budget of fuzz/src/lib.rs, on a corpus kept in
# ${MOTE_CACHE:-$HOME/.cache/mote}/fuzz-corpus/TARGET and seeded from the model zoos (built or
# reused through scripts/zoo.sh and scripts/offload-zoo.sh). A crash, leak, timeout (10 s per
# input) or out-of-memory (2 GiB) stops the run with its input saved under
# .../fuzz-artifacts/ and fails the script, and so does a target whose libFuzzer reports no
# executions. Also builds mote-rpc's cargo-fuzz targets (rpc/fuzz, --locked) with the same flags.
# Prints one line per target with its execution count.
#
# The toolchain is the host's stable Rust: the sanitizer-coverage and AddressSanitizer flags
# are nightly-only, so they are allowed with RUSTC_BOOTSTRAP=1 (as cargo-fuzz would pass them).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# model_code_free writes each input that loads to a scratch file (to load it again from a
# path): keep those in a folder of this run, removed at exit.
TMPDIR="$(mktemp -d)"
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT
cache="${MOTE_CACHE:-$HOME/.cache/mote}"
all=(elf module_blob opencl_module executable model_code_free run_code_free subgraph npy rpc_wire)
time="${MOTE_FUZZ_SECONDS:-20}"
runs=""
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --time) time="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        -*) echo "fuzz.sh: unknown flag $1" >&2; exit 2 ;;
        *)
            if [[ " ${all[*]} " != *" $1 "* ]]; then
                echo "fuzz.sh: unknown target $1 (targets: ${all[*]})" >&2
                exit 2
            fi
            targets+=("$1"); shift ;;
    esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
command -v c++ >/dev/null || { echo "fuzz.sh: no C++ compiler (libfuzzer-sys builds libFuzzer)" >&2; exit 1; }

host="$(rustc -vV | sed -n 's/^host: //p')"
[ "$host" = x86_64-unknown-linux-gnu ] || { echo "fuzz.sh: runs on x86_64 Linux (host is $host)" >&2; exit 1; }

echo "fuzz.sh: zoos" >&2
zoo="$(scripts/zoo.sh --target x86_64 | tail -n 1)"
ozoo="$(scripts/offload-zoo.sh --target x86_64 | tail -n 1)"
clzoo="$(scripts/opencl-zoo.sh --target x86_64 | tail -n 1)"
scripts/trixie.sh >/dev/null
ozoo_a64="$(MOTE_AARCH64_LINK="$root/scripts/in-trixie.sh aarch64-linux-gnu-gcc" \
    scripts/offload-zoo.sh --target aarch64 | tail -n 1)"

echo "fuzz.sh: seeds" >&2
cargo build --release --locked --manifest-path fuzz/Cargo.toml --bin seeds \
    --target-dir "$cache/fuzz-target/plain" >&2
seeds="$cache/fuzz-seeds"
rm -rf "$seeds"
shopt -s nullglob
"$cache/fuzz-target/plain/release/seeds" "$seeds" \
    "$zoo"/*.so "$zoo"/*.npz "$ozoo"/*.so "$ozoo"/*.tar "$ozoo"/*.npz "$clzoo"/*.so \
    "$ozoo_a64"/*.so "$ozoo_a64"/*.tar >&2

echo "fuzz.sh: building the targets (libFuzzer, AddressSanitizer)" >&2
flags="--cfg fuzzing -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4"
flags+=" -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table"
flags+=" -Cllvm-args=-sanitizer-coverage-trace-compares -Zsanitizer=address"
# The gzip/deflate crates are built without coverage instrumentation (scripts/lib/fuzz-rustc.sh).
RUSTC_BOOTSTRAP=1 RUSTFLAGS="$flags" RUSTC_WRAPPER="$root/scripts/lib/fuzz-rustc.sh" cargo build --release --locked --manifest-path fuzz/Cargo.toml \
    --target "$host" --target-dir "$cache/fuzz-target/asan" \
    $(printf -- '--bin %s ' "${targets[@]}") >&2
# mote-rpc's cargo-fuzz targets (rpc/fuzz, run by hand: rpc/fuzz/README.md) are built here, with
# the same flags and from their own lock file, so neither can go stale unnoticed.
echo "fuzz.sh: building rpc/fuzz (mote-rpc's cargo-fuzz targets)" >&2
RUSTC_BOOTSTRAP=1 RUSTFLAGS="$flags" cargo build --release --locked --manifest-path rpc/fuzz/Cargo.toml \
    --target "$host" --target-dir "$cache/fuzz-target/rpc-asan" --bins >&2

artifacts="$cache/fuzz-artifacts"
mkdir -p "$artifacts"
results="$TMPDIR/results"
mkdir -p "$results"
# run_target TARGET: one libFuzzer run; its summary line goes to $results/TARGET.
run_target() {
    local t="$1" corpus="$cache/fuzz-corpus/$1" log="$cache/fuzz-$1.log" rc execs
    local limit=(-max_total_time="$time") regressions=()
    mkdir -p "$corpus"
    [ -n "$runs" ] && limit=(-runs="$runs")
    # Inputs that once failed (fuzz/regressions/TARGET) run first, every time.
    [ -d "fuzz/regressions/$t" ] && regressions=("fuzz/regressions/$t")
    echo "fuzz.sh: $t (${limit[*]})" >&2
    set +e
    "$cache/fuzz-target/asan/$host/release/$t" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$artifacts/$t-" "$corpus" "$seeds/$t" \
        "${regressions[@]}" >"$log" 2>&1
    rc=$?
    set -e
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
    if [ "$rc" != 0 ]; then
        tail -n 40 "$log" >&2
        echo "$t: FAILED after ${execs:-?} executions (exit $rc; log $log; inputs in $artifacts)" >"$results/$t"
    elif ! [ "${execs:-0}" -gt 0 ] 2>/dev/null; then
        # A target that ran nothing checked nothing (libFuzzer's final stats are the evidence).
        tail -n 20 "$log" >&2
        echo "$t: FAILED: ${execs:-no} executions reported (stat::number_of_executed_units; log $log)" >"$results/$t"
    else
        echo "$t: ${execs:-?} executions, no crash" >"$results/$t"
    fi
}
# Targets run MOTE_FUZZ_JOBS at a time (default 2): a libFuzzer run uses one core, and each
# keeps its own time limit, so two at once halve the step's time on two cores.
jobs_max="${MOTE_FUZZ_JOBS:-2}"
[[ "$jobs_max" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: MOTE_FUZZ_JOBS must be a positive number" >&2; exit 2; }
running=0
for t in "${targets[@]}"; do
    run_target "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs_max" ]; then
        wait -n || true
        running=$((running - 1))
    fi
done
wait || true
status=0
summary=()
for t in "${targets[@]}"; do
    if [ -f "$results/$t" ]; then
        summary+=("$(cat "$results/$t")")
    else
        summary+=("$t: FAILED: the run left no result")
    fi
    case "${summary[-1]}" in *FAILED*) status=1 ;; esac
done
printf 'fuzz: %s\n' "${summary[@]}"
failed=$(printf '%s\n' "${summary[@]}" | grep -c FAILED || true)
echo "fuzz checks: $(( ${#summary[@]} - failed )) passed, $failed failed"
exit "$status"

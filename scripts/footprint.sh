#!/usr/bin/env bash
# What Mote adds to an app, beside TVM's runtime and ONNX Runtime (docs/footprint.md).
#
#   scripts/footprint.sh [--sizes-only] [--models a,b,c] [--reps N] [--json-out FILE]
#
# 1. Sizes, stripped, in bytes: `libmote.so` (the C ABI, mote-ffi) for x86_64 (host) and aarch64
#    Linux (trixie chroot), the Android arm64 JNI library (scripts/build-android-so.sh), and the
#    linked contribution of the static library (what the iOS XCFramework's `libmote.a` adds to
#    an app), estimated by linking ffi/examples/c/run.c against the aarch64 and x86_64 Linux
#    `libmote_ffi.a` with --gc-sections and subtracting the same program with Mote's calls
#    stubbed out. Beside them: `libtvm_runtime.so` + `libtvm_ffi.so` and `libonnxruntime.so`
#    from the x86_64 wheels of the venv and from the aarch64 wheels of the same versions
#    (downloaded once from PyPI into ${MOTE_CACHE:-$HOME/.cache/mote}/wheels-aarch64-<hash>).
#    Each artifact is built as it ships (docs/footprint.md): the `release` profile, and for the
#    Android and iOS libraries the `mobile` profile (one codegen unit) with the standard library
#    rebuilt without its `backtrace` feature.
# 2. Unless --sizes-only: load + first-run time and peak resident memory of three real
#    architectures (default mobilenet_v2,resnet50,transformer_encoder, built by
#    scripts/bench-archs.sh into its cache) with TVM's runtime, Mote and ONNX Runtime
#    (python/footprint.py; --reps fresh processes each, median).
#
# A benchmark, not a test: run it on a quiet machine. Exit status 1 if a build or a check fails.
set -euo pipefail

die() { echo "footprint.sh: error: $*" >&2; exit 1; }
log() { echo "footprint.sh: $*" >&2; }

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
sizes_only=0
models="mobilenet_v2,resnet50,transformer_encoder"
reps=5
json_out="$root/target/footprint.json"
while [ $# -gt 0 ]; do
    case "$1" in
        --sizes-only) sizes_only=1; shift ;;
        --models) [ $# -ge 2 ] || die "--models needs a list"; models="$2"; shift 2 ;;
        --reps) [ $# -ge 2 ] || die "--reps needs a number"; reps="$2"; shift 2 ;;
        --json-out) [ $# -ge 2 ] || die "--json-out needs a file"; json_out="$2"; shift 2 ;;
        -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
done
cache="${MOTE_CACHE:-$HOME/.cache/mote}"
venv="$(scripts/venv.sh | tail -n 1)"
py="$venv/bin/python"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

host_strip() { strip -o "$2" "$1"; }
a64_strip() { scripts/in-trixie.sh aarch64-linux-gnu-strip -o "$2" "$1"; }
size_of() { stat -c %s "$1"; }
declare -A size

log "x86_64: libmote.so and libmote_ffi.a (release)"
cargo build --release --locked -p mote-ffi >&2
host_strip target/release/libmote_ffi.so "$work/libmote-x86_64.so"
size[so_x86_64]=$(size_of "$work/libmote-x86_64.so")

log "aarch64 Linux: libmote.so and libmote_ffi.a (release, trixie's Rust)"
scripts/in-trixie.sh cargo build --release --locked --target aarch64-unknown-linux-gnu -p mote-ffi >&2
a64="${MOTE_TRIXIE_TARGET:-$cache/target-trixie}/aarch64-unknown-linux-gnu/release"
a64_strip "$a64/libmote_ffi.so" "$work/libmote-aarch64.so"
size[so_aarch64]=$(size_of "$work/libmote-aarch64.so")

log "static library contribution, from a C program linked against it"
# Baseline: a program that only prints, linked the same way. run.c's own code (a few hundred
# bytes) is counted as Mote's. aarch64: the static library built as the iOS slices are
# (scripts/build-xcframework.sh: the standard library rebuilt without `backtrace`); x86_64:
# the host's release build, for reference.
printf '#include <stdio.h>\nint main(void) { puts("y[0] = 0"); return 0; }\n' >"$work/hello.c"
std_features=panic-unwind,std_detect_file_io,std_detect_dlsym_getauxval
scripts/in-trixie.sh env RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$root/target/trixie-build-std" \
    cargo rustc --locked -Zbuild-std=std,panic_unwind -Zbuild-std-features=$std_features \
    --profile mobile --target aarch64-unknown-linux-gnu -p mote-ffi --lib --crate-type staticlib >&2
link_pair() { # TAG LIBDIR CC... (the strip command is STRIP)
    local tag="$1" lib="$2"; shift 2
    "$@" -O2 -Iffi/include ffi/examples/c/run.c "$lib/libmote_ffi.a" -Wl,--gc-sections \
        -lpthread -ldl -lm -o "$work/run-$tag"
    "$@" -O2 "$work/hello.c" -Wl,--gc-sections -o "$work/hello-$tag"
    $STRIP "$work/run-$tag" "$work/run-$tag.s" && $STRIP "$work/hello-$tag" "$work/hello-$tag.s"
    echo $(( $(size_of "$work/run-$tag.s") - $(size_of "$work/hello-$tag.s") ))
}
size[static_x86_64]=$(STRIP=host_strip link_pair x86_64 "$root/target/release" cc)
size[static_aarch64]=$(STRIP=a64_strip link_pair aarch64 \
    "$root/target/trixie-build-std/aarch64-unknown-linux-gnu/mobile" scripts/in-trixie.sh aarch64-linux-gnu-gcc)

log "Android arm64 JNI library (scripts/build-android-so.sh)"
jni="$(scripts/build-android-so.sh | tail -n 1)"
a64_strip "$jni" "$work/libmote_java.so"
size[jni]=$(size_of "$work/libmote_java.so")

log "TVM's runtime and ONNX Runtime, x86_64 (the venv's wheels)"
site="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
host_strip "$site/tvm/lib/libtvm_runtime.so" "$work/tvm_runtime-x86_64.so"
host_strip "$site/tvm_ffi/lib/libtvm_ffi.so" "$work/tvm_ffi-x86_64.so"
ort_x86="$(ls "$site"/onnxruntime/capi/libonnxruntime.so.* | head -n 1)"
host_strip "$ort_x86" "$work/ort-x86_64.so"
size[tvm_x86_64]=$(( $(size_of "$work/tvm_runtime-x86_64.so") + $(size_of "$work/tvm_ffi-x86_64.so") ))
size[ort_x86_64]=$(size_of "$work/ort-x86_64.so")

log "TVM's runtime and ONNX Runtime, aarch64 (the same versions' aarch64 wheels)"
ver() { "$py" -c "import importlib.metadata as m; print(m.version('$1'))"; }
pins="apache-tvm==$(ver apache-tvm) apache-tvm-ffi==$(ver apache-tvm-ffi) onnxruntime==$(ver onnxruntime)"
wheels="$cache/wheels-aarch64-$(echo "$pins" | sha256sum | cut -c1-12)"
if [ ! -f "$wheels/.ok" ]; then
    rm -rf "$wheels" && mkdir -p "$wheels"
    # shellcheck disable=SC2086
    "$py" -m pip download --no-deps --only-binary=:all: --python-version 3.11 \
        --platform manylinux_2_28_aarch64 --platform manylinux2014_aarch64 -d "$wheels" $pins >&2
    touch "$wheels/.ok"
fi
for w in "$wheels"/*.whl; do
    "$py" -m zipfile -e "$w" "$work/whl" >/dev/null
done
a64_strip "$work/whl/tvm/lib/libtvm_runtime.so" "$work/tvm_runtime-aarch64.so"
a64_strip "$work/whl/tvm_ffi/lib/libtvm_ffi.so" "$work/tvm_ffi-aarch64.so"
a64_strip "$(ls "$work"/whl/onnxruntime/capi/libonnxruntime.so.* | head -n 1)" "$work/ort-aarch64.so"
size[tvm_aarch64]=$(( $(size_of "$work/tvm_runtime-aarch64.so") + $(size_of "$work/tvm_ffi-aarch64.so") ))
size[ort_aarch64]=$(size_of "$work/ort-aarch64.so")

mib() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1048576 }'; }
echo "Stripped sizes (MiB; bytes in target/footprint-sizes.txt)"
echo
echo "| artifact | x86_64 | aarch64 |"
echo "|---|---|---|"
echo "| Mote libmote.so (C ABI, release) | $(mib "${size[so_x86_64]}") | $(mib "${size[so_aarch64]}") |"
echo "| Mote static library, linked contribution (x86_64: release; aarch64: as the iOS slices) | $(mib "${size[static_x86_64]}") | $(mib "${size[static_aarch64]}") |"
echo "| Mote Android JNI library libmote_java.so (the AAR's: no RPC server) | - | $(mib "${size[jni]}") |"
echo "| TVM libtvm_runtime.so + libtvm_ffi.so (wheel) | $(mib "${size[tvm_x86_64]}") | $(mib "${size[tvm_aarch64]}") |"
echo "| ONNX Runtime libonnxruntime.so (wheel) | $(mib "${size[ort_x86_64]}") | $(mib "${size[ort_aarch64]}") |"
echo
goal=$(( 1024 * 1024 ))
if [ "${size[jni]}" -le "$goal" ]; then verdict=met; else verdict="NOT met"; fi
echo "Goal: arm64 JNI library at most 1 MiB stripped: $verdict (${size[jni]} bytes)"
mkdir -p target
for k in "${!size[@]}"; do echo "$k ${size[$k]}"; done | sort >target/footprint-sizes.txt

[ "$sizes_only" = 1 ] && exit 0

log "models (scripts/bench-archs.sh's cache)"
hash="$( cat python/bench_archs.py python/onnx_archs.py python/mote_tvm/*.py \
             python/requirements.txt scripts/bench-archs.sh | sha256sum | cut -c1-12 )"
models_dir="$cache/bench-archs-$hash"
if [ ! -f "$models_dir/.ok" ]; then
    log "building them: scripts/bench-archs.sh (all twenty-one models, then its benchmark; long)"
    scripts/bench-archs.sh --threads 1 --repeat 1 >/dev/null
fi
cargo build --release --locked -p mote-cli >&2
echo
"$py" python/footprint.py run --dir "$models_dir" --mote target/release/mote --models "$models" \
    --reps "$reps" --json-out "$json_out"

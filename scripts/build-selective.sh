#!/usr/bin/env bash
# A selective build of Mote's C ABI library (libmote.so / libmote.a) for a list of models: only
# what they need (docs/footprint.md, "Selective builds").
#
#   scripts/build-selective.sh [--target host|aarch64|android-arm64|android-x86_64] [--aar] [--print-features] MODEL...
#
# What is decided today, per model file (a .so/.dylib/.o export, or a .tar export_library
# wrote; either architecture, nothing is loaded):
# - offloaded subgraphs and the built-in `cpu` backend (cargo features `offload`, the
#   description parser, planner and executor, and `cpu-backend`, which implies it; together
#   about half of an aarch64 library) are kept when a model calls offloaded subgraphs
#   (partition_for_acl / partition_for_bnns: its program calls `mote.subgraph`), left out when
#   every operator is code TVM compiled into the model. Without them, a model that calls
#   offloaded subgraphs fails to load with a typed error (Error::Unsupported naming the
#   `offload` feature); compiled models are unaffected. (Built with `offload` but without
#   `cpu-backend`, as an app whose regions all go to ACL or BNNS could build it, an offloaded
#   region the other backends refuse fails with Error::Backend naming `cpu-backend` when it is
#   first prepared.)
# - OpenCL (cargo feature `opencl`: device discovery, memory, programs, launches) is kept when a
#   model carries OpenCL code (TVM's `opencl` imported module: the bytes `opencl` anywhere in the
#   file, a rule that can only keep the feature needlessly, never drop it wrongly), left out
#   otherwise. Without it, opening OpenCL fails with Error::Device naming the feature, and CPU
#   models are unaffected.
# - opt-level and LTO: a library without the cpu backend holds no kernel of its own (the models
#   bring theirs), only the loaders, the VM and the C ABI, so it is built for size
#   (`opt-level = "s"`, about 100 KB less on aarch64, and fat LTO, which drops what no entry
#   point reaches across crates and the standard library: a further 17-23%; docs/footprint.md);
#   with the cpu backend the profile's own settings stay, for the kernels' speed. The Android
#   library without kernels also leaves file and line out of panic locations (stderr, where
#   std's default hook prints them, goes nowhere on Android) and folds identical code
#   (ld.lld --icf=all).
# The scan reads the file's bytes (a .tar decompressed), so it works on a model built for
# another architecture than this machine's; a file it cannot read is an error, never a guess.
#
# --print-features prints the cargo feature list (one line, comma-separated, possibly empty)
# and builds nothing: other build scripts take it (e.g. `cargo build -p mote-ffi
# --no-default-features --features "$(scripts/build-selective.sh --print-features m.so)"`).
# Otherwise builds mote-ffi with exactly those features:
#   --target host     cargo build --release (this machine), target/selective/release/
#   --target aarch64  the trixie chroot's Rust 1.85, aarch64-unknown-linux-gnu, the `mobile`
#                     profile, std without `backtrace` (as the shipped mobile libraries),
#                     target/trixie-selective/...
#   --target android-arm64 / android-x86_64
#                     the Android JNI library (mote-java, no RPC server) the way the AAR's is
#                     built: scripts/build-android-so.sh --selective=FEATURES, in
#                     target/android/selective/ABI/ (audit it with scripts/audit-android-so.sh);
#                     with --aar (android-arm64 only) also packed, stripped, as an arm64-only
#                     AAR by scripts/build-aar.sh --selective (target/android-repo-selective/)
# and prints the library's path and stripped size (last stdout line: the path).
set -euo pipefail

die() { echo "build-selective.sh: error: $*" >&2; exit 2; }
log() { echo "build-selective.sh: $*" >&2; }

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target=host
print_only=0
aar=0
models=()
while [ $# -gt 0 ]; do
    case "$1" in
        --target) [ $# -ge 2 ] || die "--target needs host or aarch64"; target="$2"; shift 2 ;;
        --print-features) print_only=1; shift ;;
        --aar) aar=1; shift ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        -*) die "unknown option $1 (see --help)" ;;
        *) models+=("$1"); shift ;;
    esac
done
[ ${#models[@]} -gt 0 ] || die "no model given (see --help)"
[ "$aar" = 0 ] || [ "$target" = android-arm64 ] || die "--aar goes with --target android-arm64"
case "$target" in host|aarch64|android-arm64|android-x86_64) ;;
    *) die "unknown target '$target' (host, aarch64, android-arm64 or android-x86_64)" ;; esac

# uses_subgraphs FILE: exit 0 when the model's program calls offloaded subgraphs. The blob's
# function table names `mote.subgraph` verbatim: in a .so/.dylib/.o, and in a .tar's devc.o;
# a code-free .tar holds it as devc.c's C array of bytes (docs/code-free.md), decoded here.
# contains FILE NEEDLE: whether the model file holds NEEDLE (a .tar's members searched, the C
# arrays of its .c members decoded first). Exit 0 yes, 1 no; an unreadable file ends the script.
contains() {
    local f=$1 rc=0
    [ -f "$f" ] && [ -r "$f" ] || die "cannot read model '$f'"
    python3 - "$f" "$2" <<'PY' || rc=$?
import re, sys, tarfile
path, needle = sys.argv[1], sys.argv[2].encode()
try:
    if path.endswith(".tar"):
        found = False
        with tarfile.open(path) as t:
            for m in t.getmembers():
                if not m.isfile():
                    continue
                data = t.extractfile(m).read()
                if m.name.endswith(".c"):
                    data = bytes(int(x, 16) for x in re.findall(rb"0x([0-9a-fA-F]{2})", data))
                found = found or needle in data
    else:
        with open(path, "rb") as f:
            found = needle in f.read()
except (OSError, tarfile.TarError) as e:
    print(f"build-selective.sh: error: cannot read model {path}: {e}", file=sys.stderr)
    sys.exit(3)
sys.exit(0 if found else 1)
PY
    [ "$rc" -le 1 ] || exit 2
    return "$rc"
}

cpu=0
opencl=0
for m in "${models[@]}"; do
    if contains "$m" mote.subgraph; then
        log "$m: calls offloaded subgraphs -> cpu-backend"
        cpu=1
    else
        log "$m: no offloaded subgraph (all compiled code)"
    fi
    if contains "$m" opencl; then
        log "$m: OpenCL code -> opencl"
        opencl=1
    fi
done
features=()
[ "$cpu" = 1 ] && features+=(cpu-backend)
[ "$opencl" = 1 ] && features+=(opencl)
list=$(IFS=,; echo "${features[*]}")
if [ "$print_only" = 1 ]; then
    echo "$list"
    exit 0
fi

# Built for size when no kernel of Mote's own is in the library (see the header).
opt="" lto=""
[ "$cpu" = 1 ] || { opt=s; lto=fat; }
log "building for $target with features: ${list:-(none)}${opt:+, opt-level $opt}${lto:+, $lto LTO}"
case "$target" in
    android-arm64|android-x86_64)
        abi=arm64-v8a; [ "$target" = android-x86_64 ] && abi=x86_64
        # Without kernels, also: no file/line in panic locations (a panic is still caught and
        # reported with its message; only std's default hook prints the location, to stderr,
        # which Android sends nowhere), and identical code folded by ld.lld: 28 KB together
        # (docs/footprint.md).
        extra_flags="" ld_extra=""
        [ "$cpu" = 1 ] || { extra_flags=-Zlocation-detail=none; ld_extra=--icf=all; }
        lib=$(MOTE_ANDROID_OPT_LEVEL="$opt" MOTE_ANDROID_LTO="$lto" MOTE_ANDROID_RUSTFLAGS="$extra_flags" \
            MOTE_ANDROID_LD_EXTRA="$ld_extra" scripts/build-android-so.sh --selective="$list" "$abi" | tail -n 1) \
            || die "scripts/build-android-so.sh --selective=$list $abi failed"
        if [ "$abi" = arm64-v8a ]; then
            scripts/in-trixie.sh aarch64-linux-gnu-strip -o "$lib.stripped" "$lib"
        else
            scripts/in-trixie.sh x86_64-linux-gnu-strip -o "$lib.stripped" "$lib"
        fi
        if [ "$aar" = 1 ]; then
            out=$(scripts/build-aar.sh --selective "$lib.stripped" | tail -n 1) || die "scripts/build-aar.sh --selective failed"
            log "AAR: $(stat -c %s "$out") bytes ($out)"
        fi
        ;;
    host)
        env CARGO_TARGET_DIR="$root/target/selective" ${opt:+CARGO_PROFILE_RELEASE_OPT_LEVEL=$opt} \
            ${lto:+CARGO_PROFILE_RELEASE_LTO=$lto} \
            cargo build --release --locked -p mote-ffi --no-default-features --features "$list" >&2 \
            || die "cargo build failed"
        lib="$root/target/selective/release/libmote_ffi.so"
        strip -o "$lib.stripped" "$lib"
        ;;
    aarch64)
        std_features=panic-unwind,std_detect_file_io,std_detect_dlsym_getauxval
        scripts/in-trixie.sh env RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$root/target/trixie-selective" \
            ${opt:+CARGO_PROFILE_MOBILE_OPT_LEVEL=$opt} ${lto:+CARGO_PROFILE_MOBILE_LTO=$lto} \
            cargo rustc --locked -Zbuild-std=std,panic_unwind -Zbuild-std-features=$std_features \
            --target aarch64-unknown-linux-gnu --profile mobile -p mote-ffi \
            --no-default-features --features "$list" --lib --crate-type cdylib >&2 \
            || die "cargo build in the trixie chroot failed"
        lib="$root/target/trixie-selective/aarch64-unknown-linux-gnu/mobile/libmote_ffi.so"
        scripts/in-trixie.sh aarch64-linux-gnu-strip -o "$lib.stripped" "$lib"
        ;;
esac
log "stripped size: $(stat -c %s "$lib.stripped") bytes ($lib.stripped)"
echo "$lib"

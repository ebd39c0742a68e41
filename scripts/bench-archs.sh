#!/usr/bin/env bash
# Real-architecture benchmark (not a test): well-known networks written as ONNX by
# python/onnx_archs.py (ResNet-18/50, MobileNetV2/V3, ShuffleNetV2, SqueezeNet 1.1, DenseNet-121,
# GoogLeNet, EfficientNet-B0, VGG-16, grouped AlexNet, a transformer encoder) and
# python/onnx_archs_mobile.py (ShuffleNet v1 g3/g8, SqueezeNet 1.0, BN-Inception, the ONNX zoo's MobileNetV2 layout, EfficientNet-Lite0, BERT-Mini
# with a dynamic sequence length, pinned and symbolic) and python/onnx_archs_int8.py (int8 QDQ
# versions of ResNet-18, MobileNetV2, SqueezeNet 1.1, EfficientNet-Lite0, ShuffleNetV2, quantized
# with onnxruntime.quantization, checked in LSBs of the output scale), timed with ONNX
# Runtime, TVM untuned (unpartitioned) and Mote on the partition_for_acl and partition_for_bnns
# libraries at 1 and 2 threads; Mote's outputs are checked against ONNX Runtime.  docs/benchmarks.md
# explains the columns.
#
#   scripts/bench-archs.sh [--mote PATH] [--models a,b] [--threads 1,2] [--repeat N] [--skip tvm,bnns]
#                          [--json-out FILE]
#
# Without --mote, target/release/mote is built first (cargo build --release -p mote-cli --locked).
# The models (NAME.onnx, NAME.inputs.npz, NAME.{tvm,acl,bnns}.so, NAME.json, bench.json) are built
# once into ${MOTE_CACHE:-$HOME/.cache/mote}/bench-archs-<hash> (hash of the builder sources,
# python/mote_tvm, requirements and this script; `.ok` marker; temporary folder renamed into place;
# about 4.9 GB, VGG-16 alone 2.1 GB).  A model the importer, partitioner or compiler fails on is
# recorded and reported, not fatal to the build.  The table goes to stdout, progress to stderr,
# the raw numbers to --json-out (default target/bench-archs.json).  Exit status 1 if an output
# check failed or a model could not be built or run.
set -euo pipefail

die() { echo "bench-archs.sh: error: $*" >&2; exit 1; }
log() { echo "bench-archs.sh: $*" >&2; }

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mote=""
json_out=""
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
        --mote) [ $# -ge 2 ] || die "--mote needs a path"; mote="$2"; shift 2 ;;
        --mote=*) mote="${1#--mote=}"; shift ;;
        --json-out) [ $# -ge 2 ] || die "--json-out needs a file"; json_out="$2"; shift 2 ;;
        --json-out=*) json_out="${1#--json-out=}"; shift ;;
        *) args+=("$1"); shift ;;
    esac
done

cache="${MOTE_CACHE:-$HOME/.cache/mote}"
hash="$( cat "$root/python/bench_archs.py" "$root/python/onnx_archs.py" "$root/python/onnx_archs_mobile.py" \
             "$root/python/onnx_archs_int8.py" "$root"/python/mote_tvm/*.py \
             "$root/python/requirements.txt" "$root/scripts/bench-archs.sh" | sha256sum | cut -c1-12 )"
dir="$cache/bench-archs-$hash"

venv="$("$root/scripts/venv.sh" | tail -n 1)" || die "scripts/venv.sh failed"
[ -x "$venv/bin/python" ] || die "scripts/venv.sh did not give a usable venv ('$venv')"

if [ -z "$mote" ]; then
    log "building target/release/mote"
    (cd "$root" && cargo build --release -p mote-cli --locked >&2) || die "cargo build --release -p mote-cli failed"
    mote="$root/target/release/mote"
fi
[ -x "$mote" ] || die "--mote '$mote' is not an executable"
mote="$(cd "$(dirname "$mote")" && pwd)/$(basename "$mote")"

if [ ! -f "$dir/.ok" ]; then
    mkdir -p "$cache"
    exec 9>"$dir.lock"
    if command -v flock >/dev/null 2>&1; then
        flock 9 || die "cannot lock $dir.lock"
    fi
    if [ ! -f "$dir/.ok" ]; then
        tmp="$(mktemp -d "$cache/.bench-archs-$hash.tmp.XXXXXX")"
        trap 'rm -rf "$tmp"' EXIT
        log "building the benchmark models into $dir (slow: 3 TVM compiles per model)"
        # A model that fails to import, partition or compile is recorded in bench.json; the
        # build's exit status 1 says so, but the other models are still worth timing.
        # Such a build is used for this run but not marked complete (no .ok), so that a transient
        # failure (out of memory, a killed compile) is retried next time instead of cached.
        built=1
        "$venv/bin/python" "$root/python/bench_archs.py" build --out "$tmp" >&2 \
            || { built=0; log "warning: some models did not build; see the errors above and bench.json"; }
        [ -f "$tmp/bench.json" ] || die "python/bench_archs.py build wrote no bench.json"
        [ "$built" = 0 ] || touch "$tmp/.ok"
        rm -rf "$dir"
        mv -T "$tmp" "$dir" || die "cannot move $tmp to $dir"
        trap - EXIT
    fi
    exec 9>&-
else
    log "reusing $dir"
fi

[ -n "$json_out" ] || json_out="$root/target/bench-archs.json"
mkdir -p "$(dirname "$json_out")"
"$venv/bin/python" "$root/python/bench_archs.py" run --dir "$dir" --mote "$mote" --json-out "$json_out" \
    ${args[@]+"${args[@]}"}

#!/usr/bin/env bash
# Offload benchmark (not a test): MobileNetV2 (224x224, batch 1) and the small CNN, built as ONNX
# by python/onnx_models.py, timed with TVM (unpartitioned), ONNX Runtime (1 thread) and,
# optionally, Mote on the unpartitioned (.tvm.so) and partition_for_acl'd (.acl.so) libraries.
#
#   scripts/bench-offload.sh [--mote "CMD"] [--mote-run "CMD"] [--repeat N] [--threads N]
#
# CMD is formatted with {so} {npz} {onnx} {name} {dir} and must print JSON with "median_ms":
#   scripts/bench-offload.sh --mote "target/release/mote bench {so} --inputs {npz} --json --threads 1" \
#     --mote-run "target/release/mote run {so} --inputs {npz} --output {out}"
# --mote-run's outputs ({out}, an .npz) are compared with ONNX Runtime's.
#
# The models (NAME.onnx, NAME.inputs.npz, NAME.expected.npz, NAME.tvm.so, NAME.acl.so, bench.json)
# are built once into ${MOTE_CACHE:-$HOME/.cache/mote}/bench-offload-<hash> (hash of the builder
# sources, requirements and this script; `.ok` marker; temporary folder renamed into place).
# The build fails if ONNX Runtime and TVM disagree, or if TVM running the partitioned model with
# the numpy reference of mote.subgraph disagrees with TVM unpartitioned.
# The markdown table goes to stdout; progress to stderr.  Exit status 1 if a check or a Mote
# run failed.
set -euo pipefail

die() { echo "bench-offload.sh: error: $*" >&2; exit 1; }
log() { echo "bench-offload.sh: $*" >&2; }

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
case "${1:-}" in
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
esac

cache="${MOTE_CACHE:-$HOME/.cache/mote}"
hash="$( cat "$root/python/bench_offload.py" "$root/python/onnx_models.py" "$root"/python/mote_tvm/*.py \
             "$root/python/requirements.txt" "$root/scripts/bench-offload.sh" | sha256sum | cut -c1-12 )"
dir="$cache/bench-offload-$hash"

venv="$("$root/scripts/venv.sh" | tail -n 1)" || die "scripts/venv.sh failed"
[ -x "$venv/bin/python" ] || die "scripts/venv.sh did not give a usable venv ('$venv')"

if [ ! -f "$dir/.ok" ]; then
    mkdir -p "$cache"
    exec 9>"$dir.lock"
    if command -v flock >/dev/null 2>&1; then
        flock 9 || die "cannot lock $dir.lock"
    fi
    if [ ! -f "$dir/.ok" ]; then
        tmp="$(mktemp -d "$cache/.bench-offload-$hash.tmp.XXXXXX")"
        trap 'rm -rf "$tmp"' EXIT
        log "building the benchmark models into $dir"
        "$venv/bin/python" "$root/python/bench_offload.py" build --out "$tmp" >&2 \
            || die "python/bench_offload.py build failed"
        touch "$tmp/.ok"
        rm -rf "$dir"
        mv -T "$tmp" "$dir" || die "cannot move $tmp to $dir"
        trap - EXIT
    fi
    exec 9>&-
else
    log "reusing $dir"
fi

# Relative Mote commands (target/release/mote ...) are meant from the repository root.
cd "$root"
"$venv/bin/python" "$root/python/bench_offload.py" run --dir "$dir" "$@"

#!/usr/bin/env bash
# The RPC server's tests: TVM 0.27's own Python client against Mote's server (mote-rpc).
# MOTE_PYTHON is the venv's python (scripts/venv.sh), MOTE_ZOO_DIR the x86_64 zoo
# (scripts/zoo.sh), MOTE_OFFLOAD_ZOO_DIR the x86_64 offload zoo (scripts/offload-zoo.sh: its
# code-free models are what a code-free server runs), MOTE_OPENCL_ZOO_DIR the OpenCL zoo
# (scripts/opencl-zoo.sh, on POCL from scripts/opencl.sh); all are built or reused from
# ${MOTE_CACHE:-$HOME/.cache/mote}. Then `mote rpc serve --code-free` as a user runs it: a model
# that never returns is stopped by the session's timeout and by SIGINT
# (rpc/tests/python/cli_interrupt.py, docs/rpc.md "Timeouts").
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export MOTE_CACHE="${MOTE_CACHE:-$HOME/.cache/mote}"
die() { echo "test-rpc.sh: error: $*" >&2; exit 1; }

venv="$(scripts/venv.sh | tail -n 1)" || die "scripts/venv.sh failed"
[ -x "$venv/bin/python" ] || die "scripts/venv.sh did not give a usable venv ('$venv')"
zoo="$(scripts/zoo.sh --target x86_64 | tail -n 1)" || die "scripts/zoo.sh failed"
[ -f "$zoo/manifest.json" ] || die "no x86_64 zoo at '$zoo'"
ozoo="$(scripts/offload-zoo.sh --target x86_64 | tail -n 1)" || die "scripts/offload-zoo.sh failed"
[ -f "$ozoo/manifest.json" ] || die "no x86_64 offload zoo at '$ozoo'"
# The GPU seed flow (rpc/tests/python/opencl_seed.py) runs on the machine's OpenCL device.
scripts/opencl.sh >/dev/null || die "scripts/opencl.sh failed (no OpenCL device)"
clzoo="$(scripts/opencl-zoo.sh --target x86_64 | tail -n 1)" || die "scripts/opencl-zoo.sh failed"
[ -f "$clzoo/manifest.json" ] || die "no OpenCL zoo at '$clzoo'"

# venv.sh reads MOTE_PYTHON as the interpreter to build the venv with; from here on it is the
# venv's own python, which the tests run TVM's client with.
export MOTE_PYTHON="$venv/bin/python"
export MOTE_ZOO_DIR="$zoo"
export MOTE_OFFLOAD_ZOO_DIR="$ozoo"
export MOTE_OPENCL_ZOO_DIR="$clzoo"
cargo test -p mote-rpc --locked "$@"

cargo build -p mote-cli --locked
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cargo run -q -p mote-rpc --locked --example endless_model -- "$tmp/endless.tar"
target="$(cargo metadata --format-version 1 --no-deps | "$MOTE_PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
"$MOTE_PYTHON" rpc/tests/python/cli_interrupt.py "$target/debug/mote" "$tmp/endless.tar" "$ozoo"

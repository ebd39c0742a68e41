#!/usr/bin/env bash
# The RPC server's tests: TVM 0.27's own Python client against Mote's server (mote-rpc).
# MOTE_PYTHON is the venv's python (scripts/venv.sh), MOTE_ZOO_DIR the x86_64 zoo
# (scripts/zoo.sh); both are built or reused from ${MOTE_CACHE:-$HOME/.cache/mote}.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export MOTE_CACHE="${MOTE_CACHE:-$HOME/.cache/mote}"
die() { echo "test-rpc.sh: error: $*" >&2; exit 1; }

venv="$(scripts/venv.sh | tail -n 1)" || die "scripts/venv.sh failed"
[ -x "$venv/bin/python" ] || die "scripts/venv.sh did not give a usable venv ('$venv')"
zoo="$(scripts/zoo.sh --target x86_64 | tail -n 1)" || die "scripts/zoo.sh failed"
[ -f "$zoo/manifest.json" ] || die "no x86_64 zoo at '$zoo'"

# venv.sh reads MOTE_PYTHON as the interpreter to build the venv with; from here on it is the
# venv's own python, which the tests run TVM's client with.
export MOTE_PYTHON="$venv/bin/python"
export MOTE_ZOO_DIR="$zoo"
cargo test -p mote-rpc --locked "$@"

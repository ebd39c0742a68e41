#!/usr/bin/env bash
# Benchmark (not a test): Mote beside TVM's own runtime on every zoo model, same files, same
# inputs, same thread count. Prints a table with the ratio.
#
#   scripts/bench.sh [--threads N] [--runs N]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
zoo="$(scripts/zoo.sh | tail -n 1)"
venv="$(scripts/venv.sh | tail -n 1)"
cargo build --release --locked -q -p mote-cli
exec "$venv/bin/python" python/bench_compare.py --zoo "$zoo" --mote "$root/target/release/mote" "$@"

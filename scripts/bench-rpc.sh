#!/usr/bin/env bash
# RPC benchmark (not a test): Mote's server beside TVM's own (`python -m tvm.exec.rpc_server`) on
# this machine, both driven by TVM's Python client (python/rpc_bench.py): upload throughput of a
# 50 MB file, remote tensor copies both ways, and the round trip of a tiny kernel call.
#
#   scripts/bench-rpc.sh [--upload-mb N] [--copy-mb N] [--calls N] [--repeat N]
#
# Both servers listen on loopback ports chosen here and are stopped on exit.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
die() { echo "bench-rpc.sh: error: $*" >&2; exit 1; }
venv="$(scripts/venv.sh | tail -n 1)"
cargo build --release --locked -q -p mote-cli
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

free_port() { "$venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { # wait_port PORT: until something accepts on it (30 s)
    for _ in $(seq 300); do
        "$venv/bin/python" -c "import socket,sys; socket.create_connection(('127.0.0.1',$1),0.2)" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}

tvm_port="$(free_port)"
"$venv/bin/python" -m tvm.exec.rpc_server --host 127.0.0.1 --port "$tvm_port" --port-end "$((tvm_port + 1))" \
    >"$work/tvm.log" 2>&1 &
pids+=($!)
mote_port="$(free_port)"
target/release/mote rpc serve --host 127.0.0.1 --port "$mote_port" >"$work/mote.log" 2>&1 &
pids+=($!)
wait_port "$tvm_port" || { cat "$work/tvm.log" >&2; die "TVM's server did not start"; }
wait_port "$mote_port" || { cat "$work/mote.log" >&2; die "Mote's server did not start"; }

isa="baseline"
for f in avx512f avx2 asimd; do grep -qw "$f" /proc/cpuinfo && { isa="$f"; break; }; done
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); widest SIMD: $isa"
"$venv/bin/python" python/rpc_bench.py --server "tvm=127.0.0.1:$tvm_port" --server "mote=127.0.0.1:$mote_port" "$@"

#!/usr/bin/env bash
# The phone, simulated: the cross-compile-and-run workflow of TVM's RPC, end to end.
#
#   scripts/test-rpc-phone.sh [MODEL,...]     (default: the ACL-partitioned offload-zoo models)
#
# 1. Builds (or reuses) the aarch64 offload zoo (TVM on the host cross-compiles; the libraries
#    are partitioned with partition_for_acl) and the ACL backend plug-in (libmote_acl.so).
# 2. Builds the aarch64 `mote` CLI with trixie's Rust 1.85 and starts `mote rpc serve` under
#    qemu-aarch64 in the chroot, with the plug-in's folder on its library path (Mote finds
#    libmote_acl.so there by itself, as on a phone) and info logs to a file.
# 3. On the host, TVM 0.27's unchanged Python client (python/rpc_zoo_client.py) uploads each
#    aarch64 library, loads it with remote.load_module, runs it through relax.VirtualMachine on
#    remote tensors and compares the outputs with TVM's local x86 run (the zoo's expected npz).
# 4. Checks the server's log: every offloaded node of every model ran on `acl`.
# Prints "rpc phone checks: N passed, M failed"; exits non-zero on any failure.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null || (cd "$HERE/.." && pwd -P))
cd "$ROOT"
export MOTE_CACHE="${MOTE_CACHE:-$HOME/.cache/mote}"

log() { echo "test-rpc-phone: $*" >&2; }
die() { log "$*"; echo "rpc phone checks: 0 passed, 1 failed"; exit 1; }

"$HERE/trixie.sh" >/dev/null
venv="$("$HERE/venv.sh" | tail -n 1)"
[ -x "$venv/bin/python" ] || die "no venv"

if [ -n "${MOTE_OFFLOAD_ZOO_DIR_AARCH64:-}" ]; then
  OZOO=$MOTE_OFFLOAD_ZOO_DIR_AARCH64
else
  OZOO=$(MOTE_AARCH64_LINK="$HERE/in-trixie.sh aarch64-linux-gnu-gcc" \
         "$HERE/offload-zoo.sh" --target aarch64 | tail -n 1)
fi
[ -f "$OZOO/manifest.json" ] || die "no aarch64 offload zoo at '$OZOO'"
ACL_PLUGIN=$("$HERE/build-acl-shim.sh" | tail -n 1)
[ -f "$ACL_PLUGIN" ] || die "no ACL plug-in at '$ACL_PLUGIN'"

models=${1:-$("$venv/bin/python" -c "
import json, sys
m = json.load(open(sys.argv[1]))['models']
print(','.join(x['name'] for x in m if x.get('partition') == 'acl'))" "$OZOO/manifest.json")}
[ -n "$models" ] || die "no ACL models in $OZOO"

log "building the aarch64 mote CLI (trixie Rust 1.85)"
# At opt-level 1, as scripts/test-aarch64.sh builds its tests (their dependencies' builds are shared).
"$HERE/in-trixie.sh" env CARGO_PROFILE_DEV_OPT_LEVEL=1 cargo build --locked --target aarch64-unknown-linux-gnu -p mote-cli >&2 \
  || die "aarch64 build of mote-cli failed"
MOTE_BIN="${MOTE_TRIXIE_TARGET:-$MOTE_CACHE/target-trixie}/aarch64-unknown-linux-gnu/debug/mote"
[ -x "$MOTE_BIN" ] || die "no $MOTE_BIN"

port=$("$venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
out=$(mktemp -d)
server_log="$out/server.log"
cleanup() {
  [ -n "${server_pid:-}" ] && kill -- -"$server_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$out"
}
trap cleanup EXIT

log "starting the aarch64 server under qemu on 127.0.0.1:$port (key 'phone')"
# setsid: the server (in-trixie.sh, unshare, qemu) gets a process group of its own to kill.
MOTE_LOG=info setsid "$HERE/in-trixie.sh" qemu-aarch64 -L /usr/aarch64-linux-gnu \
  -E LD_LIBRARY_PATH="/usr/lib/aarch64-linux-gnu:$(dirname "$ACL_PLUGIN")" \
  "$MOTE_BIN" rpc serve --host 127.0.0.1 --port "$port" --key phone >"$server_log" 2>&1 &
server_pid=$!
for _ in $(seq 120); do
  "$venv/bin/python" -c "import socket; socket.create_connection(('127.0.0.1',$port),0.5)" 2>/dev/null && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$server_log" >&2; die "the server exited"; }
  sleep 0.5
done

pass=0; fail=0
log "TVM's client runs $models on the 'phone'"
if "$venv/bin/python" "$ROOT/python/rpc_zoo_client.py" --port "$port" --key phone --zoo "$OZOO" \
     --only "$models" | tee "$out/client.log"; then :; fi
read -r p f < <(grep -E '^rpc zoo:' "$out/client.log" | awk '{print $3+0, $5+0}') || { p=0; f=1; }
pass=$((pass + p)); fail=$((fail + f))
[ "$p" -gt 0 ] || { fail=$((fail + 1)); log "the client ran nothing"; }

# The server logs each loaded model's plan: "... subgraph mote_acl_0: 5 of 5 nodes on acl".
# Every node runs in ACL except the three tanh-form GELUs of onnx_gelu_tanh_acl, which ACL
# 24.11 lacks: that model's plan must be exactly "4 of 7 nodes on acl (3 on cpu)"; and the one
# reshape of qdq_ops_acl that requantizes, which ACL 24.11's reshape refuses (1 on cpu).
IFS=, read -ra names <<<"$models"
for m in "${names[@]}"; do
  lines=$(grep -F "load_module \"$m.so\": subgraph" "$server_log" || true)
  if [ "$m" = onnx_gelu_tanh_acl ]; then
    want='subgraph mote_acl_0: 4 of 7 nodes on acl \(3 on cpu\)$'
  elif [ "$m" = qdq_ops_acl ]; then
    want='subgraph mote_acl_0: [0-9]+ of [0-9]+ nodes on acl \(1 on cpu\)$'
  else
    want=' ([0-9]+) of \1 nodes on acl'
  fi
  if [ -z "$lines" ]; then
    fail=$((fail + 1)); log "FAIL $m: no plan line in the server log"
  elif echo "$lines" | grep -Eq "$want" && ! echo "$lines" | grep -Eqv "$want"; then
    pass=$((pass + 1)); echo "ok   $m: $(echo "$lines" | sed -E 's/.*(subgraph)/\1/' | paste -sd ';')"
  else
    fail=$((fail + 1)); log "FAIL $m: not the expected nodes on acl: $lines"
  fi
done

if [ "$fail" -ne 0 ]; then
  log "server log:"; tail -n 40 "$server_log" >&2
fi
echo "rpc phone checks: $pass passed, $fail failed"
[ "$fail" -eq 0 ]

#!/usr/bin/env bash
# The main job, end to end on a fresh machine: build a small model with TVM 0.27, run it with
# Mote, and print Mote's outputs beside TVM's, with both runtimes' latency.
#
#   scripts/demo.sh [MODEL]      (default: mlp; any zoo model name, e.g. cnn, transformer, gemm)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
model="${1:-mlp}"
export MOTE_CACHE="${MOTE_CACHE:-$HOME/.cache/mote}"

echo "== building the model zoo with TVM 0.27 (cached) ==" >&2
zoo="$(scripts/zoo.sh | tail -n 1)"
venv="$(scripts/venv.sh | tail -n 1)"
echo "== building mote (release) ==" >&2
cargo build --release --locked -q -p mote-cli
mote="$root/target/release/mote"

case_file="$("$venv/bin/python" -c "
import json,sys
m=[m for m in json.load(open('$zoo/manifest.json'))['models'] if m['name']=='$model']
if not m: sys.exit('no zoo model named $model')
c=[c for c in m[0]['cases'] if c['mode'] in ('call', 'kernel') and not c['expect_error']][0]
# A kernel case's outputs are the arguments it writes (kernel-only libraries).
print(c['function'], c['inputs'], c['expected'], ','.join(map(str, c.get('outputs') or [])) or '-')")"
read -r function inputs expected written <<<"$case_file"
out="$(mktemp -d)/out.npz"

echo
echo "== mote inspect $model.so =="
"$mote" inspect "$zoo/$model.so"
echo
echo "== mote run $model.so --function $function =="
"$mote" run "$zoo/$model.so" --function "$function" --inputs "$zoo/$inputs" --output "$out"
echo
echo "== Mote against TVM's own runtime =="
"$venv/bin/python" - "$out" "$zoo/$expected" "$written" <<'PY'
import sys, numpy as np
got, want = np.load(sys.argv[1]), np.load(sys.argv[2])
# `mote run` saves a kernel's arguments as argN: output k is argument written[k].
written = [] if sys.argv[3] == "-" else [int(i) for i in sys.argv[3].split(",")]
for i, k in enumerate(sorted(want.files, key=lambda k: int(k[3:]))):
    g, w = got[f"arg{written[i]}" if written else k], want[k]
    err = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)))) if w.size else 0.0
    print(f"{k}: shape {w.shape} {w.dtype}")
    print(f"  mote: {g.ravel()[:6]}")
    print(f"  tvm : {w.ravel()[:6]}")
    print(f"  max |mote - tvm| = {err:.3g}  {'MATCH' if np.allclose(g, w, rtol=1e-5, atol=1e-5) else 'DIFFER'}")
PY
echo
echo "== latency, 1 thread =="
"$mote" bench "$zoo/$model.so" --function "$function" --inputs "$zoo/$inputs" --threads 1 --runs 1000 --warmup 50 | sed 's/^/mote: /'
"$venv/bin/python" python/tvm_bench.py --zoo "$zoo" --only "$model" --threads 1 --json \
    | "$venv/bin/python" -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l); print(f\"tvm : {r['model']}.{r['case']} median {r['median_ms']:.4f} ms (time_evaluator)\")"

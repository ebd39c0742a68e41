#!/usr/bin/env python3
"""Real-architecture benchmark: python/onnx_archs.py's and onnx_archs_mobile.py's networks, and
onnx_archs_int8.py's int8 (QDQ) versions of some of them, ONNX Runtime vs TVM vs Mote.

    python bench_archs.py build --out DIR [--models a,b]
        For each architecture write NAME.onnx and NAME.inputs.npz (arg0), import it with TVM 0.27's
        ONNX frontend, and compile it untuned for this host ("llvm -mcpu=<host cpu>") three ways:
        unpartitioned (NAME.tvm.so), mote_tvm.partition_for_acl (NAME.acl.so) and
        mote_tvm.partition_for_bnns (NAME.bnns.so).  Checks that TVM unpartitioned agrees with ONNX
        Runtime, and records in DIR/NAME.json (and DIR/bench.json) the subgraph counts, the FLOPs
        offloaded vs total (docs/benchmarks.md gives the rule) and the ops that stayed in TVM.
        Each model is built in its own process; a failure (importer, partitioner, compiler) is
        recorded and the other models go on.  Models with a symbolic input dimension
        (onnx_archs_mobile.INPUT_SPECS "dynamic") are imported as they are (NAME_dyn: it stays
        symbolic through partitioning and compiling) or with the dimension pinned to the benchmark's
        value through from_onnx's shape_dict ("pin"); FLOPs are counted with it bound to that value.
        An int8 model (NAME_int8, onnx_archs_int8.INT8) also records its quantized ops: how many
        quantized conv2d/dense nodes each partition offloaded, and the output's quantization.

    python bench_archs.py run --dir DIR [--mote target/release/mote] [--threads 1,2] [--models a,b]
                              [--repeat N] [--skip tvm,bnns] [--json-out FILE]
        Time ONNX Runtime, TVM unpartitioned (one process per thread count) and `mote bench` on
        NAME.acl.so and NAME.bnns.so at each thread count; check `mote run`'s outputs against ONNX
        Runtime; read the time left in TVM kernels from `mote bench --profile --json`.  Prints the
        CPU and a markdown table on stdout (progress on stderr), and writes everything as JSON.
        `--skip tvm,bnns` leaves those columns out (n/a in the table): issue 31's goal lines need
        only ORT and the acl builds, and the untuned TVM timings are most of a whole-suite run.

Int8 models are checked against ONNX Runtime's QDQ execution in units of the output's
quantization step (INT8_LSB_TOL), with the top-1 class, and have goal lines of their own (issue
31: at least INT8_GOAL_MODELS of them within INT8_GOAL_RATIO x of ORT); the float goal lines
leave them out.

This is a benchmark, not a test: the figures depend on the machine and its load.  Exit status 1
if an output check failed or a model could not be built or run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_offload  # noqa: E402  (close, ort_session)

ORT_RTOL = 1e-3  # of the output's magnitude: ORT, TVM and Mote use different conv algorithms
MIN_RUNS = 10
# ORT and Mote are timed in this many interleaved rounds (see run()).
ROUNDS = 5
MIN_SECONDS = 2.0
MAX_RUNS = 500
SLOW_BUDGET_S = 20.0
SLOW_MIN_RUNS = 3
PARTITIONS = ("acl", "bnns")
# Int8 models: ORT's output is a multiple of the output's quantization step s.  TVM's
# unpartitioned QDQ graph (float convs between dequantize and quantize) lands within 1 LSB of ORT's
# integer kernels on resnet18_int8; a step of rounding that differs in one layer moves the
# values after it by an LSB or two, so the check allows a few, and the same top-1 class.
INT8_LSB_TOL = 4
INT8_GOAL_RATIO = 1.2
INT8_GOAL_MODELS = 3


def log(msg: str):
    print(f"bench-archs: {msg}", file=sys.stderr, flush=True)


def close(a: np.ndarray, b: np.ndarray, rtol: float = ORT_RTOL) -> tuple[bool, float]:
    """Agreement scaled by the output's magnitude (max |b|, at least 1), as bench_offload.py."""
    return bench_offload.close(a, b, rtol)


def close_int8(a: np.ndarray, b: np.ndarray, quant: dict) -> tuple[bool, float, dict]:
    """Agreement of a dequantized int8 output `a` with ORT's `b`: max |a - b| within INT8_LSB_TOL
    steps of the output's quantization scale, and (for a classifier's [1, N] logits) the same
    top-1 class unless that is a near-tie: ORT's own logit for `a`'s top class within
    INT8_LSB_TOL steps of ORT's top logit (random-weight logits can tie within a step or two,
    and argmax takes the first of equal values).  (ok, max abs, details: max and mean
    difference in LSB, elements off by more than one LSB, top-1 agreement, and for a differing
    top-1 ORT's lead over `a`'s top class in LSB)."""
    if a.shape != b.shape:
        return False, float("inf"), {"shape": [list(a.shape), list(b.shape)]}
    s = float(quant["output_scale"])
    d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    err = float(d.max()) if d.size else 0.0
    det = {"max_lsb": err / s, "mean_lsb": float(d.mean()) / s if d.size else 0.0,
           "off_by_more_than_1_lsb": int((d > 1.5 * s).sum())}
    ok = err <= INT8_LSB_TOL * s * (1 + 1e-5)
    if a.ndim == 2 and a.shape[0] == 1 and a.shape[1] > 1:
        ia, ib = int(np.argmax(a)), int(np.argmax(b))
        det["top1_agree"] = ia == ib
        if ia != ib:
            det["top1_ort_lead_lsb"] = float(b.reshape(-1)[ib] - b.reshape(-1)[ia]) / s
            ok = ok and det["top1_ort_lead_lsb"] <= INT8_LSB_TOL * (1 + 1e-5)
    return ok, err, det


ort_session = bench_offload.ort_session  # ORT_ENABLE_ALL, sequential, `threads` intra-op threads


def selected(names_arg: str | None) -> list[str]:
    import onnx_archs_int8 as onnx_archs  # onnx_archs.ARCHS, the issue-31 models and int8 versions

    if not names_arg:
        return list(onnx_archs.ARCHS)
    names = [n.strip() for n in names_arg.split(",") if n.strip()]
    unknown = [n for n in names if n not in onnx_archs.ARCHS]
    if unknown:
        raise SystemExit(f"bench-archs: unknown model(s) {unknown}; known: {', '.join(onnx_archs.ARCHS)}")
    return names


# --------------------------------------------------------------------------------------------
# FLOPs (docs/benchmarks.md, "FLOPs")
# --------------------------------------------------------------------------------------------

# Ops that only reinterpret a tensor's shape: TVM runs them as VM builtins (no kernel), so they
# count zero.  Everything else that is not conv2d/matmul/dense counts one FLOP per output element.
_VIEW_OPS = {"relax.reshape", "relax.squeeze", "relax.expand_dims", "relax.flatten"}


def _numel(shape) -> int:
    return int(np.prod([int(d) for d in shape])) if shape is not None else 0


def _tensor_shape(ty):
    """Static shape of a Relax type (TVM 0.27 writes an expression's type as `.ty`); the first
    field of a tuple (batch_norm returns (out, mean, var)); None if unknown."""
    from tvm import relax

    if isinstance(ty, relax.TupleType):
        return _tensor_shape(ty.fields[0]) if len(ty.fields) else None
    if isinstance(ty, relax.TensorType) and isinstance(ty.shape, relax.ShapeExpr):
        try:
            return [int(d) for d in ty.shape.values]
        except (TypeError, AttributeError):
            return None
    return None


def relax_flops(mod, skip_subgraphs: bool = False, skip_edge_transposes: bool = False) -> tuple[int, dict, dict]:
    """(FLOPs, FLOPs per op, calls per op) of the Relax functions of `mod`.

    conv2d: 2 x output elements x (C_in/groups x KH x KW); matmul: 2 x output elements x K;
    view ops (reshape...) 0; any other op: its output elements.  Calls whose arguments are all
    constants (or computed from constants only: weight transposes, bias reshapes) count zero,
    as TVM folds them or the partitioner absorbs them.  With `skip_subgraphs`, calls to
    mote.subgraph are left out (what stays in TVM after partitioning); with
    `skip_edge_transposes` also the permute_dims that read a mote.subgraph result or feed a
    mote.subgraph call (the layout changes a partitioner adds at a region's edge)."""
    import tvm
    from tvm import relax

    total, per_op, calls = 0, {}, {}
    for _, func in mod.functions.items():
        if not isinstance(func, relax.Function):
            continue
        if func.attrs is not None and any(k in func.attrs for k in ("Codegen", "Composite", "Primitive")):
            continue
        const_vars = set()

        def is_const(e):
            # Leaves other than variables (constants, shapes, strings, prim values) are literals.
            if isinstance(e, relax.Var):
                return e in const_vars
            if isinstance(e, relax.Tuple):
                return all(is_const(f) for f in e.fields)
            return not isinstance(e, (relax.Call, relax.TupleGetItem))

        body = func.body
        blocks = body.blocks if isinstance(body, relax.SeqExpr) else []
        # Variables a mote.subgraph call reads or writes (through its output tuple).
        sub_io = set()
        for block in blocks:
            for b in block.bindings:
                v = b.value
                if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op) and v.op.name == "relax.call_dps_packed":
                    sub_io.add(b.var)
                    sub_io.update(relax.analysis.free_vars(v))
                elif isinstance(v, relax.TupleGetItem) and isinstance(v.tuple_value, relax.Var) \
                        and v.tuple_value in sub_io:
                    sub_io.add(b.var)
        for block in blocks:
            for b in block.bindings:
                v = b.value
                if isinstance(v, relax.TupleGetItem):
                    if is_const(v.tuple_value):
                        const_vars.add(b.var)
                    continue
                if isinstance(v, (relax.Tuple, relax.Var, tvm.ir.Constant)):
                    if is_const(v):
                        const_vars.add(b.var)
                    continue
                if not isinstance(v, relax.Call) or not isinstance(v.op, tvm.ir.Op):
                    continue
                name = v.op.name
                if name == "relax.call_dps_packed":
                    if skip_subgraphs:
                        continue
                args = list(v.args)
                if args and all(is_const(a) for a in args):
                    const_vars.add(b.var)
                    continue
                if skip_edge_transposes and name == "relax.permute_dims" and \
                        (b.var in sub_io or (isinstance(args[0], relax.Var) and args[0] in sub_io)):
                    continue
                out = _tensor_shape(b.var.ty)
                n = _numel(out)
                if name == "relax.nn.conv2d":
                    w = _tensor_shape(args[1].ty)
                    f = 2 * n * _numel(w[1:])
                elif name == "relax.matmul":
                    a = _tensor_shape(args[0].ty)
                    f = 2 * n * int(a[-1])
                elif name in _VIEW_OPS:
                    f = 0
                else:
                    f = n
                short = name[len("relax."):] if name.startswith("relax.") else name
                total += f
                per_op[short] = per_op.get(short, 0) + f
                calls[short] = calls.get(short, 0) + 1
    return total, per_op, calls


def description_flops(desc: dict, dims: dict | None = None) -> int:
    """FLOPs of one mote.subgraph description, by the same rule as relax_flops.  An op folded
    into a node counts as it would have unfolded: a bias input adds one FLOP per output element,
    an activation other than "none" another.  A symbolic dimension (a name, format version 3)
    counts as its value in `dims`, as relax_flops counts the model with it bound."""
    dims = dims or {}
    shapes = [[dims[d] if isinstance(d, str) else d for d in t["shape"]] for t in desc["tensors"]]
    total = 0
    for node in desc["nodes"]:
        op = node["op"]
        n = _numel(shapes[node["outputs"][0]])
        attrs = node.get("attrs", {})
        extra = 0
        if op in ("conv2d", "dense") and len(node["inputs"]) > 2:
            extra += n
        act = attrs.get("activation", "none")
        if act not in ("none", None):
            extra += n
        if op == "conv2d":
            f = 2 * n * _numel(shapes[node["inputs"][1]][1:])
        elif op == "dense":
            f = 2 * n * int(shapes[node["inputs"][1]][-1])
        elif op == "matmul":
            f = 2 * n * int(shapes[node["inputs"][0]][-1])
        elif op == "reshape":
            f = 0
        else:
            f = n
        total += f + extra
    return total


# --------------------------------------------------------------------------------------------
# build
# --------------------------------------------------------------------------------------------


def host_target() -> dict:
    """The untuned LLVM target for this host's CPU.  TVM 0.27 takes targets as dicts (its old
    "llvm -mcpu=..." strings are refused); this is that string's equivalent."""
    import tvm

    return {"kind": "llvm", "mcpu": str(tvm.target.codegen.llvm_get_system_cpu())}


def build_one(name: str, out: str) -> dict:
    """Build one architecture into `out`; returns (and writes to NAME.json) its record."""
    import onnx
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    import mote_tvm
    import onnx_archs_int8 as onnx_archs  # onnx_archs.ARCHS, the issue-31 models and int8 versions

    builder, shape = onnx_archs.ARCHS[name]
    spec = onnx_archs.INPUT_SPECS.get(name, {})
    target = host_target()
    rec: dict = {"name": name, "input_shape": list(shape), "target": target, "errors": {},
                 "onnx": f"{name}.onnx", "inputs": f"{name}.inputs.npz", "times_s": {}}
    t0 = time.time()
    model = builder()
    onnx_path = os.path.join(out, f"{name}.onnx")
    onnx.save(model, onnx_path)
    seed = sum(map(ord, name))
    if spec.get("dtype", "float32") == "float32":
        x = np.random.default_rng(seed).standard_normal(shape).astype("float32")
    else:
        x = np.random.default_rng(seed).integers(0, spec["high"], shape).astype(spec["dtype"])
        rec["input_dtype"] = spec["dtype"]
    np.savez(os.path.join(out, f"{name}.inputs.npz"), arg0=x)
    # A symbolic input dimension: kept through import, partitioning and compiling, or pinned to
    # the benchmark's value at import ("pin").  FLOPs are counted with it bound to that value.
    dyn = spec.get("dynamic") or {}
    pin = bool(spec.get("pin"))
    if dyn:
        rec["dynamic"] = {"dims": dyn, "pinned_at_import": pin}

    def bound(m):
        return relax.transform.BindSymbolicVars(dyn)(m) if dyn and not pin else m
    ort_out = ort_session(onnx_path, 1).run(None, {"input": x})[0]
    rec["onnx_nodes"] = len(model.graph.node)
    rec["output_shape"] = list(ort_out.shape)
    rec["output_max_abs"] = float(np.max(np.abs(ort_out)))
    int8 = name in onnx_archs.INT8
    if int8:
        oq = onnx_archs.output_quant(model)
        ops: dict = {}
        for n in model.graph.node:
            ops[n.op_type] = ops.get(n.op_type, 0) + 1
        rec["int8"] = {"base": onnx_archs.INT8[name], "onnx_ops": ops,
                       "output_scale": oq[0] if oq else None, "output_zero_point": oq[1] if oq else None}
        if oq is None:
            rec["errors"]["int8"] = "no QuantizeLinear/DequantizeLinear pair writes the graph output"
    del model

    def agree(got, want):
        if int8 and rec["int8"]["output_scale"]:
            ok, err, det = close_int8(got, want, rec["int8"])
            return ok, err, det
        ok, err = close(got, want)
        return ok, err, {}

    t = time.time()
    try:
        mod = from_onnx(onnx.load(onnx_path), shape_dict={"input": list(shape)} if pin else None,
                        keep_params_in_input=False)
    except Exception as err:  # noqa: BLE001 - any importer failure is a finding to record
        rec["errors"]["import"] = f"{type(err).__name__}: {err}"[:2000]
        log(f"{name}: TVM's ONNX importer failed: {rec['errors']['import'][:300]}")
        return rec
    rec["times_s"]["import"] = round(time.time() - t, 1)
    if dyn:
        rec["dynamic"]["relax_input"] = str(mod["main"].params[0].ty)
    total, per_op, calls = relax_flops(bound(mod))
    rec["flops_total"] = total
    rec["relax_ops"] = calls
    rec["relax_flops_per_op"] = per_op
    log(f"{name}: imported ({total / 1e9:.3f} GFLOP) in {rec['times_s']['import']}s")

    dev = tvm.cpu(0)

    def compile_to(m, so):
        t = time.time()
        tvm.compile(m, target=tvm.target.Target(target)).export_library(os.path.join(out, so))
        return round(time.time() - t, 1)

    try:
        rec["times_s"]["compile_tvm"] = compile_to(mod, f"{name}.tvm.so")
        rec["tvm_so"] = f"{name}.tvm.so"
        vm = relax.VirtualMachine(tvm.runtime.load_module(os.path.join(out, f"{name}.tvm.so")), dev)
        got = vm["main"](tvm.runtime.tensor(x, dev)).numpy()
        ok, err, det = agree(got, ort_out)
        rec["tvm_vs_ort_max_abs"] = err
        rec["tvm_vs_ort_ok"] = ok
        if det:
            rec["tvm_vs_ort_int8"] = det
        log(f"{name}: TVM unpartitioned compiled in {rec['times_s']['compile_tvm']}s; vs ORT max abs {err:.3g} "
            f"({'ok' if ok else 'DISAGREE'})")
        if dyn and not pin:
            # The symbolic dimension is really dynamic: the same library at another length.
            other = {k: max(1, v // 2 - 1) for k, v in dyn.items()}
            x2 = x[tuple(slice(0, other[d.name]) if hasattr(d, "name") and d.name in other else slice(None)
                         for d in mod["main"].params[0].ty.shape.values)]
            ok2, err2 = close(vm["main"](tvm.runtime.tensor(x2, dev)).numpy(),
                              ort_session(onnx_path, 1).run(None, {"input": x2})[0])
            rec["dynamic"]["tvm_other_length"] = {"shape": list(x2.shape), "ok": ok2, "max_abs_vs_ort": err2}
            log(f"{name}: TVM unpartitioned at input shape {list(x2.shape)}: vs ORT max abs {err2:.3g} "
                f"({'ok' if ok2 else 'DISAGREE'})")
        del vm
    except Exception as err:  # noqa: BLE001
        rec["errors"]["tvm"] = f"{type(err).__name__}: {err}"[:2000]
        log(f"{name}: TVM unpartitioned failed: {rec['errors']['tvm'][:300]}")

    for part in PARTITIONS:
        fn = getattr(mote_tvm, f"partition_for_{part}")
        t = time.time()
        try:
            pmod = fn(mod)
        except Exception as err:  # noqa: BLE001 - partition.py is being rewritten elsewhere: record
            rec["errors"][f"partition_{part}"] = f"{type(err).__name__}: {err}"[:2000]
            log(f"{name}: partition_for_{part} failed: {rec['errors'][f'partition_{part}'][:300]}")
            continue
        rec["times_s"][f"partition_{part}"] = round(time.time() - t, 1)
        descs = mote_tvm.subgraph_descriptions(pmod)
        described = sum(description_flops(d, dyn) for d in descs)
        # Nodes by op, with "q" for those whose data input is int8/uint8 (quantized kernels).
        node_ops: dict = {}
        for desc in descs:
            for node in desc["nodes"]:
                dt = desc["tensors"][node["inputs"][0]].get("dtype", "float32") if node["inputs"] else "float32"
                key = node["op"] + (" q" if dt in ("int8", "uint8") else "")
                node_ops[key] = node_ops.get(key, 0) + 1
        left, left_per_op, left_calls = relax_flops(bound(pmod), skip_subgraphs=True)
        # What of the model's own compute stayed in TVM: everything outside the subgraph calls
        # but the layout transposes the partitioner added at region edges.
        left_own, _, _ = relax_flops(bound(pmod), skip_subgraphs=True, skip_edge_transposes=True)
        off = max(total - left_own, 0)
        residue: dict = {}
        for r in mote_tvm.tvm_residue(pmod):
            op = r.split(": ", 1)[1]
            op = op[len("relax."):] if op.startswith("relax.") else op
            residue[op] = residue.get(op, 0) + 1
        rec[part] = {
            "subgraphs": len(descs),
            "subgraph_nodes": sum(len(d["nodes"]) for d in descs),
            "flops_offloaded": off,
            "offloaded_pct": 100.0 * off / total if total else None,
            "flops_described": described,
            "described_pct": 100.0 * described / total if total else None,
            "flops_left_in_tvm": left,
            "left_in_tvm_pct": 100.0 * left / total if total else None,
            "tvm_ops": residue,
            "tvm_flops_per_op": left_per_op,
            "subgraph_ops": node_ops,
        }
        try:
            rec["times_s"][f"compile_{part}"] = compile_to(pmod, f"{name}.{part}.so")
            rec[part]["so"] = f"{name}.{part}.so"
        except Exception as err:  # noqa: BLE001
            rec["errors"][f"compile_{part}"] = f"{type(err).__name__}: {err}"[:2000]
            log(f"{name}: compiling the {part} partition failed: {rec['errors'][f'compile_{part}'][:300]}")
        log(f"{name}: {part}: {len(descs)} subgraph(s), {rec[part]['offloaded_pct']:.2f}% of FLOPs offloaded, "
            f"{rec[part]['left_in_tvm_pct']:.2f}% left in TVM ops; in TVM: "
            + ", ".join(f"{k} x{v}" for k, v in sorted(residue.items(), key=lambda kv: -kv[1]))
            + ("; offloaded nodes: " + ", ".join(f"{k} x{v}" for k, v in sorted(node_ops.items())) if int8 else ""))
        del pmod
    rec["times_s"]["total"] = round(time.time() - t0, 1)
    return rec


def build(out: str, models: list[str]) -> int:
    import onnx
    import onnxruntime
    import tvm

    os.makedirs(out, exist_ok=True)
    failures = 0
    for name in models:
        log(f"{name}: building (own process)")
        rec_path = os.path.join(out, f"{name}.json")
        if os.path.exists(rec_path):
            os.remove(rec_path)
        res = subprocess.run([sys.executable, os.path.abspath(__file__), "build-one", "--out", out, "--name", name])
        if res.returncode != 0 or not os.path.exists(rec_path):
            failures += 1
            rec = {"name": name, "errors": {"build": f"builder process exited with status {res.returncode}"}}
            with open(rec_path, "w") as f:
                json.dump(rec, f, indent=1)
            log(f"{name}: builder process failed (status {res.returncode})")
    meta = {"tvm_version": tvm.__version__, "onnx_version": onnx.__version__,
            "onnxruntime_version": onnxruntime.__version__, "target": host_target(), "models": []}
    for name in models:
        with open(os.path.join(out, f"{name}.json")) as f:
            rec = json.load(f)
        meta["models"].append(rec)
        if rec.get("errors"):
            failures += 1
    with open(os.path.join(out, "bench.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    return failures


# --------------------------------------------------------------------------------------------
# run
# --------------------------------------------------------------------------------------------


def cpu_info() -> dict:
    model, flags = "unknown", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, val = line.partition(":")
                key = key.strip()
                if key in ("model name", "Model", "CPU part") and model == "unknown":
                    model = val.strip()
                elif key in ("flags", "Features"):
                    flags |= set(val.split())
    except OSError:
        pass
    wanted = ["avx512f", "avx512bw", "avx512_vnni", "avx512vnni", "avx2", "fma", "asimd", "asimddp", "i8mm"]
    return {"model": model, "isa": [w for w in wanted if w in flags], "machine": os.uname().machine,
            "cpus": os.cpu_count()}


def n_runs(est_ms: float, repeat: int | None) -> int:
    """Enough runs for a stable median: at least MIN_RUNS and MIN_SECONDS, unless MIN_RUNS runs
    would take over SLOW_BUDGET_S (untuned TVM on the large models): then as many as fit in
    SLOW_BUDGET_S, at least SLOW_MIN_RUNS.  --repeat N overrides."""
    if repeat:
        return repeat
    est_ms = max(est_ms, 1e-3)
    runs = int(min(MAX_RUNS, max(MIN_RUNS, math.ceil(1000.0 * MIN_SECONDS / est_ms))))
    if runs * est_ms > 1000.0 * SLOW_BUDGET_S:
        runs = max(SLOW_MIN_RUNS, int(1000.0 * SLOW_BUDGET_S / est_ms))
    return runs


def ort_timer(path: str, x: np.ndarray, threads: int, repeat: int | None):
    """An ONNX Runtime session warmed up: returns (its output, the run count for a stable median,
    a function timing that many runs and returning their median in ms)."""
    sess = ort_session(path, threads)
    t = time.perf_counter()
    out = sess.run(None, {"input": x})[0]
    first = time.perf_counter() - t
    sess.run(None, {"input": x})
    runs = n_runs(1000.0 * first, repeat)

    def timed(n: int) -> float:
        times = []
        for _ in range(n):
            t = time.perf_counter()
            sess.run(None, {"input": x})
            times.append(time.perf_counter() - t)
        return 1000.0 * statistics.median(times)
    return out, runs, timed


def tvm_times(d: str, items: list[tuple[str, str, str]], repeat: int | None) -> dict:
    """In this process (TVM_NUM_THREADS already set by the parent): {name: (median ms, runs)}."""
    import tvm
    from tvm import relax

    dev = tvm.cpu(0)
    res = {}
    for name, so, npz in items:
        x = np.load(os.path.join(d, npz))["arg0"]
        vm = relax.VirtualMachine(tvm.runtime.load_module(os.path.join(d, so)), dev)
        arg = tvm.runtime.tensor(x, dev)
        t = time.perf_counter()
        vm["main"](arg)  # warm-up, and the estimate
        runs = n_runs(1000.0 * (time.perf_counter() - t), repeat)
        timer = vm.time_evaluator("main", dev, number=1, repeat=runs)
        res[name] = (1000.0 * float(np.median(timer(arg).results)), runs)
        log(f"  TVM {name}: {res[name][0]:.2f} ms ({runs} runs, TVM_NUM_THREADS={os.environ.get('TVM_NUM_THREADS')})")
        del vm
    return res


def run_tvm_process(d: str, threads: int, names: list[str], meta_by_name: dict, repeat: int | None) -> dict:
    items = [n for n in names if meta_by_name[n].get("tvm_so")]
    if not items:
        return {}
    env = dict(os.environ, TVM_NUM_THREADS=str(threads))
    cmd = [sys.executable, os.path.abspath(__file__), "tvm-time", "--dir", d, "--models", ",".join(items)]
    if repeat:
        cmd += ["--repeat", str(repeat)]
    res = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True)
    if res.returncode != 0:
        log(f"TVM timing process at {threads} thread(s) failed with status {res.returncode}")
    try:
        return {k: tuple(v) for k, v in json.loads(res.stdout.strip().splitlines()[-1]).items()}
    except (ValueError, IndexError):
        return {}


def mote(argv: list[str], timeout: int = 1800) -> tuple[dict | None, str]:
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, str(err)
    if res.returncode != 0:
        return None, f"exit {res.returncode}: {res.stderr.strip()[-600:]}"
    for line in reversed(res.stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line), ""
            except ValueError:
                break
    return None, f"no JSON in its output: {res.stdout.strip()[-300:]}"


def mote_output(mote_bin: str, so: str, npz: str, threads: int, tmpdir: str,
                extra: tuple[str, ...] = ()) -> tuple[np.ndarray | None, str]:
    out = os.path.join(tmpdir, f".mote-out-{os.getpid()}.npz")
    try:
        res = subprocess.run([mote_bin, "run", so, *extra, "--inputs", npz, "--output", out,
                              "--threads", str(threads)],
                             capture_output=True, text=True, timeout=1800)
        if res.returncode != 0:
            return None, f"exit {res.returncode}: {res.stderr.strip()[-600:]}"
        return np.load(out)["out0"], ""
    except (OSError, subprocess.TimeoutExpired, KeyError, ValueError) as err:
        return None, str(err)
    finally:
        if os.path.exists(out):
            os.remove(out)


def tvm_kernel_share(profile: dict) -> tuple[float | None, dict]:
    """% of a profiled run spent in compiled TVM kernels (profile entries of kind "kernel": not
    mote.subgraph, not VM builtins), and ms per run by kernel name."""
    prof = profile.get("profile") or []
    mean = profile.get("mean_ms") or profile.get("median_ms")
    kernels = {e["name"]: e["ms_per_run"] for e in prof if e.get("kind") == "kernel"}
    if not mean:
        return None, kernels
    return 100.0 * sum(kernels.values()) / mean, kernels


def geomean(vals):
    vals = [v for v in vals if v is not None and v > 0]
    return math.exp(sum(map(math.log, vals)) / len(vals)) if vals else None


def f2(v, digits=2):
    return "n/a" if v is None else f"{v:.{digits}f}"


def run(d: str, mote_bin: str | None, threads_list: list[int], names_arg: str | None, repeat: int | None,
        json_out: str | None, skip: frozenset = frozenset()) -> int:
    with open(os.path.join(d, "bench.json")) as f:
        meta = json.load(f)
    by_name = {m["name"]: m for m in meta["models"]}
    names = [n for n in selected(names_arg) if n in by_name]
    missing = [n for n in selected(names_arg) if n not in by_name]
    failures = len(missing)
    for n in missing:
        log(f"{n}: not in {d}/bench.json (build it)")
    cpu = cpu_info()
    isa = " ".join(cpu["isa"]) or "none of avx512f/avx512bw/avx512vnni/avx2/fma/asimd/asimddp/i8mm"
    print(f"CPU: {cpu['model']} ({cpu['machine']}, {cpu['cpus']} logical CPUs); ISA flags: {isa}", flush=True)
    results: dict = {n: {"threads": {}} for n in names}

    for th in threads_list:
        if "tvm" in skip:
            tvm_res = {}
        else:
            log(f"TVM unpartitioned, {th} thread(s), in its own process")
            tvm_res = run_tvm_process(d, th, names, by_name, repeat)
        for name in names:
            m = by_name[name]
            r = results[name]["threads"].setdefault(str(th), {})
            r["tvm_ms"], r["tvm_runs"] = tvm_res.get(name, (None, None))
            if not os.path.exists(os.path.join(d, m.get("onnx", "-"))):
                failures += 1
                continue
            x = np.load(os.path.join(d, m["inputs"]))["arg0"]
            ort_out, runs, ort_timed = ort_timer(os.path.join(d, m["onnx"]), x, th, repeat)
            # Outputs first; then ORT and Mote on each partition timed in ROUNDS interleaved
            # rounds of runs / ROUNDS each, and each reported time is its fastest round's median:
            # on a shared machine the speed drifts over seconds (something else on the host can
            # halve the second core's speed for several rounds), measuring one after the other
            # put that drift into the ratios, and what it adds is never less than nothing.
            parts: dict = {}
            for part in [p for p in PARTITIONS if p not in skip] if mote_bin else []:
                so = (m.get(part) or {}).get("so")
                if not so:
                    why = "; ".join(f"{k}: {v[:200]}" for k, v in m.get("errors", {}).items())
                    r[part] = {"error": f"not built: {why}"}
                    failures += 1
                    continue
                so, npz = os.path.join(d, so), os.path.join(d, m["inputs"])
                pr: dict = {}
                got, why = mote_output(mote_bin, so, npz, th, d)
                if got is None:
                    failures += 1
                    pr["error"] = f"mote run: {why}"
                    log(f"{name}: mote run on {part} failed: {why}")
                else:
                    if m.get("int8", {}).get("output_scale"):
                        ok, err, det = close_int8(got, ort_out, m["int8"])
                        pr["int8_check"] = det
                    else:
                        ok, err = close(got, ort_out)
                    pr["ok"], pr["max_abs_vs_ort"] = ok, err
                    if not ok:
                        failures += 1
                        log(f"{name}: Mote ({part}) and ONNX Runtime DISAGREE (max abs {err:g}, "
                            f"output max {float(np.max(np.abs(ort_out))):g})")
                parts[part] = (so, npz, pr, [])
                r[part] = pr
            per_round = max(1, math.ceil(runs / ROUNDS))
            ort_rounds = []
            for _ in range(ROUNDS):
                ort_rounds.append(ort_timed(per_round))
                for part, (so, npz, pr, rounds) in parts.items():
                    if "bench_error" in pr:
                        continue
                    j, why = mote([mote_bin, "bench", so, "--inputs", npz, "--json", "--threads", str(th),
                                   "--warmup", "2", "--runs", str(per_round)])
                    if j is None:
                        failures += 1
                        pr["bench_error"] = True
                        pr.setdefault("error", f"mote bench: {why}")
                        log(f"{name}: mote bench on {part} failed: {why}")
                    else:
                        rounds.append(j["median_ms"])
            r["ort_ms"], r["ort_runs"] = min(ort_rounds), per_round * ROUNDS
            log(f"{name}: ORT {r['ort_ms']:.2f} ms (rounds {', '.join(f'{v:.2f}' for v in ort_rounds)}; "
                f"{r['ort_runs']} runs, {th} thread(s))")
            for part, (so, npz, pr, rounds) in parts.items():
                pr.pop("bench_error", None)
                if not rounds:
                    continue
                pr["ms"], pr["runs"] = min(rounds), per_round * len(rounds)
                prof_runs = max(3, min(runs, n_runs(pr["ms"], None) // 4))
                pj, why = mote([mote_bin, "bench", so, "--inputs", npz, "--json", "--threads", str(th),
                                "--warmup", "1", "--runs", str(prof_runs), "--profile"])
                if pj is not None:
                    pct, kernels = tvm_kernel_share(pj)
                    pr["tvm_kernel_pct"] = pct
                    pr["tvm_kernels_ms"] = dict(sorted(kernels.items(), key=lambda kv: -kv[1])[:10])
                else:
                    log(f"{name}: mote bench --profile on {part} failed: {why}")
                q = pr.get("int8_check")
                log(f"{name}: Mote {part} {pr['ms']:.2f} ms (rounds {', '.join(f'{v:.2f}' for v in rounds)}; "
                    f"{pr['runs']} runs, {th} thread(s)), TVM kernels {f2(pr.get('tvm_kernel_pct'), 1)}% , "
                    f"output {'ok' if pr.get('ok') else 'NOT ok'}"
                    + (f" (max {q['max_lsb']:.1f} LSB of the output scale, mean {q['mean_lsb']:.2f}, "
                       f"{q['off_by_more_than_1_lsb']} element(s) off by > 1 LSB, top-1 "
                       + ("same" if q.get("top1_agree", True) else
                          f"DIFFERENT, ORT's lead {q['top1_ort_lead_lsb']:.0f} LSB") + ")" if q else ""))

    # ---- table ----
    th1, th2 = (str(threads_list[0]), str(threads_list[1]) if len(threads_list) > 1 else None)
    print(f"\nbatch 1; TVM {meta['tvm_version']} untuned, target {json.dumps(meta['target'])}; ONNX Runtime "
          f"{meta['onnxruntime_version']} (ORT_ENABLE_ALL, sequential); Mote `mote bench` (cpu backend for "
          f"the subgraphs); medians of >= {MIN_RUNS} runs and >= {MIN_SECONDS:g} s (>= {SLOW_MIN_RUNS} runs "
          f"and ~{SLOW_BUDGET_S:g} s when {MIN_RUNS} runs take longer), ORT and Mote in {ROUNDS} interleaved "
          f"rounds (the fastest round's median)"
          f"{'' if not repeat else f' (--repeat {repeat})'}; ms at {'/'.join(map(str, threads_list))} thread(s)\n")
    ts = "/".join(f"{t}t" for t in threads_list)
    print(f"| model | GFLOP | ORT ms ({ts}) | TVM ms ({ts}) | Mote acl ms ({ts}) | Mote bnns ms ({ts}) "
          f"| Mote/ORT acl ({ts}) | Mote/ORT bnns ({ts}) | offloaded FLOP % (acl/bnns) | subgraphs (acl/bnns) "
          f"| TVM-kernel time % (acl/bnns, {threads_list[0]}t) | outputs ok |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    ratios: dict = {t: [] for t in map(str, threads_list)}
    ratios_bnns: dict = {t: [] for t in map(str, threads_list)}
    worst: list = []
    bnns_vs_acl = []
    int8_rows: list = []  # (name, acl ratios, bnns ratios): kept out of the float goal lines
    for name in names:
        m, res = by_name[name], results[name]["threads"]

        def per_t(key, sub=None):
            vals = []
            for t in map(str, threads_list):
                r = res.get(t, {})
                v = (r.get(sub) or {}).get(key) if sub else r.get(key)
                vals.append(v)
            return vals

        ort = per_t("ort_ms")
        tvm_ = per_t("tvm_ms")
        acl = per_t("ms", "acl")
        bnns = per_t("ms", "bnns")
        ra = [None if (a is None or o is None) else a / o for a, o in zip(acl, ort)]
        rb = [None if (b is None or o is None) else b / o for b, o in zip(bnns, ort)]
        results[name]["ratios_acl"], results[name]["ratios_bnns"] = ra, rb
        if "int8" in m:
            int8_rows.append((name, ra, rb))
        else:
            for t, v in zip(map(str, threads_list), ra):
                if v is not None:
                    ratios[t].append(v)
            for t, v in zip(map(str, threads_list), rb):
                if v is not None:
                    ratios_bnns[t].append(v)
            for a, b in zip(acl, bnns):
                if a and b:
                    bnns_vs_acl.append((name, b / a))
            worst.append((name, max([v for v in ra if v is not None], default=None)))
        okays = []
        for part in PARTITIONS:
            flags = [(res.get(t, {}).get(part) or {}).get("ok") for t in map(str, threads_list)]
            okays.append("ok" if all(flags) else ("FAIL" if any(f is False for f in flags) else "n/a"))
        off = "/".join(f2((m.get(p) or {}).get("offloaded_pct"), 1) for p in PARTITIONS)
        sg = "/".join(str((m.get(p) or {}).get("subgraphs", "err")) for p in PARTITIONS)
        kp = "/".join(f2((res.get(th1, {}).get(p) or {}).get("tvm_kernel_pct"), 0) for p in PARTITIONS)
        gf = f2(m.get("flops_total", 0) / 1e9 if m.get("flops_total") else None, 2)
        j = lambda vals, d=1: " / ".join(f2(v, d) for v in vals)  # noqa: E731
        jr = lambda vals: " / ".join("n/a" if v is None else f"{v:.2f}x" for v in vals)  # noqa: E731
        print(f"| {name} | {gf} | {j(ort)} | {j(tvm_)} | {j(acl)} | {j(bnns)} | {jr(ra)} | {jr(rb)} | {off} | {sg} "
              f"| {kp} | acl {okays[0]}, bnns {okays[1]} |")

    summary: dict = {"cpu": cpu}
    if worst:  # float models (an int8-only run has none: their lines follow)
        print()
        for t in map(str, threads_list):
            g, gb = geomean(ratios[t]), geomean(ratios_bnns[t])
            summary[f"geomean_acl_{t}t"], summary[f"geomean_bnns_{t}t"] = g, gb
            print(f"- geomean Mote/ORT at {t} thread(s): acl {f2(g)}x over {len(ratios[t])} models, "
                  f"bnns {f2(gb)}x over {len(ratios_bnns[t])} models")
        bad = [(n, v) for n, v in worst if v is not None and v > 1.5]
        summary["worse_than_1_5"] = bad
        print(f"- models with Mote (acl) / ORT worse than 1.5x at any thread count: {len(bad)} of {len(worst)}"
              + (": " + ", ".join(f"{n} {v:.2f}x" for n, v in bad) if bad else ""))

        def goal(text, val, limit, fmt="{:.2f}x"):
            if val is None:
                return f"- goal {text}: n/a"
            return f"- goal {text}: {'met' if val <= limit else 'MISSED'} ({fmt.format(val)})"

        print(f"\nIssue 13 goals (item 4){'; float models only' if int8_rows else ''}:")
        print(goal(f"geomean Mote/ORT <= 1.2 at {th1} thread", summary.get(f"geomean_acl_{th1}t"), 1.2))
        if th2:
            print(goal(f"geomean Mote/ORT <= 1.3 at {th2} threads", summary.get(f"geomean_acl_{th2}t"), 1.3))
        worst_all = max((v for _, v in worst if v is not None), default=None)
        print(goal("no model worse than 1.5x (worst model)", worst_all, 1.5))
        mv2 = [v for v in results.get("mobilenet_v2", {}).get("ratios_acl", []) if v is not None]
        print(goal("MobileNetV2 <= 1.2x (worst thread count)", max(mv2) if mv2 else None, 1.2))
        offs = [((by_name[n].get("acl") or {}).get("offloaded_pct"), n) for n in names if "int8" not in by_name[n]]
        offs = [o for o in offs if o[0] is not None]
        lo = min(offs) if offs else None
        if lo is None:
            print("- goal >= 99% of FLOPs offloaded on every model: n/a")
        else:
            print(f"- goal >= 99% of FLOPs offloaded on every model (acl): {'met' if lo[0] >= 99 else 'MISSED'} "
                  f"(lowest {lo[0]:.1f}%, {lo[1]}; {sum(1 for o in offs if o[0] < 99)} model(s) below 99%)")
        wb = max(bnns_vs_acl, key=lambda kv: kv[1]) if bnns_vs_acl else None
        gb = geomean([v for _, v in bnns_vs_acl])
        if wb is None:
            print("- goal BNNS-style partition within 1.2x of the ACL-style one: n/a")
        else:
            print(f"- goal BNNS-style partition within 1.2x of the ACL-style one (cpu backend): "
                  f"{'met' if wb[1] <= 1.2 else 'MISSED'} (worst {wb[0]} {wb[1]:.2f}x, geomean {gb:.2f}x)")
        summary["bnns_over_acl_worst"], summary["bnns_over_acl_geomean"] = wb, gb
        worst_name = max(((n, v) for n, v in worst if v is not None), key=lambda nv: nv[1], default=None)
        print("\nIssue 31 goals (item 2, float models):")
        for t in map(str, threads_list):
            print(goal(f"geomean Mote/ORT <= 1.0 at {t} thread(s) over the whole suite",
                       summary.get(f"geomean_acl_{t}t"), 1.0))
        print(goal("no model worse than 1.3x" + (f" (worst: {worst_name[0]})" if worst_name else ""),
                   worst_all, 1.3))
    if int8_rows:
        int8_summary(int8_rows, by_name, results, threads_list, summary)
    if failures:
        print(f"\n{failures} failure(s): see stderr and the JSON")
    if json_out:
        with open(json_out, "w") as f:
            json.dump({"build": meta, "results": results, "summary": summary, "threads": threads_list}, f, indent=1)
            f.write("\n")
    return 1 if failures else 0


def int8_summary(rows, by_name, results, threads_list, summary):
    """Issue 31's int8 goal (item 2): at least INT8_GOAL_MODELS int8 models within INT8_GOAL_RATIO
    of ORT's QDQ execution, acl partition, at every thread count.  One line per model first: its
    ratios, what its quantized convs/denses ran on, and the output check."""
    ts = "/".join(f"{t}t" for t in threads_list)
    print(f"\nInt8 (QDQ) models, Mote acl / ORT ({ts}):")
    within, worst_by = [], []
    for name, ra, rb in rows:
        m = by_name[name]
        acl = m.get("acl") or {}
        ops = acl.get("subgraph_ops") or {}
        # Only convolutions and dense layers: quantized adds, pools and concatenations are
        # 8-bit nodes of the region too since the partitioner takes them.
        q = sum(v for k, v in ops.items() if k.endswith(" q") and k.split()[0] in ("conv2d", "dense"))
        qf = sum(v for k, v in ops.items() if not k.endswith(" q") and k.split()[0] in ("conv2d", "dense"))
        n_conv = sum(v for k, v in (m.get("relax_ops") or {}).items() if k in ("nn.conv2d", "matmul"))
        left = acl.get("tvm_ops") or {}
        checks = []
        for t in map(str, threads_list):
            d = ((results[name]["threads"].get(t) or {}).get("acl") or {}).get("int8_check") or {}
            if d:
                checks.append(f"{d['max_lsb']:.0f} LSB" + ("" if d.get("top1_agree", True) else
                                                           f" top-1 differs (near-tie: ORT leads by "
                                                           f"{d['top1_ort_lead_lsb']:.0f} LSB)"))
        w = max([v for v in ra if v is not None], default=None)
        worst_by.append((name, w))
        if w is not None and w <= INT8_GOAL_RATIO:
            within.append(name)
        print(f"- {name}: {' / '.join('n/a' if v is None else f'{v:.2f}x' for v in ra)} (bnns "
              f"{' / '.join('n/a' if v is None else f'{v:.2f}x' for v in rb)}); acl: {q} of {n_conv} conv2d/matmul "
              f"as quantized Mote nodes, {qf} float, {acl.get('subgraphs', 'err')} subgraph(s), left in TVM: "
              + (", ".join(f"{k} x{v}" for k, v in sorted(left.items(), key=lambda kv: -kv[1])) or "nothing")
              + f"; output vs ORT max {', '.join(checks) or 'n/a'}")
    summary["int8_within_goal"] = within
    summary["int8_worst"] = worst_by
    for t in map(str, threads_list):
        summary[f"geomean_int8_acl_{t}t"] = geomean([r[1][threads_list.index(int(t))] for r in rows])
    print("- geomean int8 Mote/ORT (acl): "
          + ", ".join(f"{f2(summary[f'geomean_int8_acl_{t}t'])}x at {t}t" for t in map(str, threads_list)))
    print("\nIssue 31 goal (item 2, int8):")
    print(f"- goal int8 versions of at least {INT8_GOAL_MODELS} models within {INT8_GOAL_RATIO}x of ORT's QDQ "
          f"execution (acl, every thread count): {'met' if len(within) >= INT8_GOAL_MODELS else 'MISSED'} "
          f"({len(within)} of {len(rows)} within"
          + (": " + ", ".join(within) if within else "") + "; "
          + ", ".join(f"{n} {'n/a' if v is None else f'{v:.2f}x'}"
                      for n, v in sorted(worst_by, key=lambda kv: kv[1] or 0))
          + ")")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the models into a folder")
    b.add_argument("--out", required=True)
    b.add_argument("--models", default=None, help="comma-separated subset (default: all)")
    b1 = sub.add_parser("build-one", help=argparse.SUPPRESS)
    b1.add_argument("--out", required=True)
    b1.add_argument("--name", required=True)
    tt = sub.add_parser("tvm-time", help=argparse.SUPPRESS)
    tt.add_argument("--dir", required=True)
    tt.add_argument("--models", required=True)
    tt.add_argument("--repeat", type=int, default=None)
    r = sub.add_parser("run", help="time the built models")
    r.add_argument("--dir", required=True)
    r.add_argument("--mote", default=None, help="path of the mote binary (without it, only ORT and TVM)")
    r.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    r.add_argument("--models", default=None, help="comma-separated subset (default: all)")
    r.add_argument("--repeat", type=int, default=None,
                   help=f"timed runs per measurement (default: >= {MIN_RUNS} runs and >= {MIN_SECONDS:g} s)")
    r.add_argument("--json-out", default=None, help="write the table's numbers and raw results here")
    r.add_argument("--skip", default="", help="comma-separated columns not to time: tvm, bnns, acl")
    args = ap.parse_args(argv)
    if args.cmd == "build":
        return 1 if build(args.out, selected(args.models)) else 0
    if args.cmd == "build-one":
        rec = build_one(args.name, args.out)
        with open(os.path.join(args.out, f"{args.name}.json"), "w") as f:
            json.dump(rec, f, indent=1)
        return 0
    if args.cmd == "tvm-time":
        names = [n for n in args.models.split(",") if n]
        with open(os.path.join(args.dir, "bench.json")) as f:
            by_name = {m["name"]: m for m in json.load(f)["models"]}
        items = [(n, by_name[n]["tvm_so"], by_name[n]["inputs"]) for n in names]
        print(json.dumps({k: list(v) for k, v in tvm_times(args.dir, items, args.repeat).items()}))
        return 0
    threads = [int(t) for t in args.threads.split(",") if t.strip()]
    if not threads or any(t < 1 for t in threads):
        raise SystemExit("bench-archs: --threads takes positive integers, e.g. 1,2")
    if args.mote and not os.access(args.mote, os.X_OK):
        raise SystemExit(f"bench-archs: --mote {args.mote} is not an executable")
    skip = frozenset(s.strip() for s in args.skip.split(",") if s.strip())
    if skip - {"tvm", *PARTITIONS}:
        raise SystemExit(f"bench-archs: --skip takes tvm, {', '.join(PARTITIONS)}; got {args.skip}")
    return run(args.dir, args.mote, threads, args.models, args.repeat, args.json_out, skip)


if __name__ == "__main__":
    sys.exit(main())

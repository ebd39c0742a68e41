#!/usr/bin/env python3
"""Offload benchmark: MobileNetV2 (224x224, batch 1) and the small CNN, TVM vs ONNX Runtime vs Mote.

    python bench_offload.py build --out DIR
        Build python/onnx_models.py's networks as ONNX, import them with TVM 0.27's ONNX frontend,
        compile them unpartitioned (NAME.tvm.so) and partitioned by mote_tvm.partition_for_acl
        (NAME.acl.so), and write NAME.onnx, NAME.inputs.npz (arg0) and NAME.expected.npz (out0,
        TVM's unpartitioned output).  Fails unless ONNX Runtime and TVM agree, and unless TVM
        running NAME.acl.so with the numpy reference of mote.subgraph agrees with TVM unpartitioned.

    python bench_offload.py run --dir DIR [--mote CMD] [--mote-run CMD] [--repeat N] [--threads 1]
        Time TVM unpartitioned (VirtualMachine.time_evaluator), ONNX Runtime
        (intra_op_num_threads=1) and, if given, a Mote command run once per library and model:
        CMD is formatted with {so} (library path), {npz} (inputs), {onnx}, {name} and {dir}, and
        must print JSON with "median_ms", e.g.
            --mote "target/release/mote bench {so} --inputs {npz} --json --threads 1"
        --mote-run CMD (same fields plus {out}) must write the outputs to the .npz {out}, e.g.
            --mote-run "target/release/mote run {so} --inputs {npz} --output {out}"
        and Mote's output on each library is compared with ONNX Runtime's (a mismatch beyond
        the ORT/TVM tolerance fails the run).
        Prints a markdown table with ratios on stdout.

This is a benchmark, not a test: numbers depend on the machine.  Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

# The TVM thread pool reads TVM_NUM_THREADS once, at start-up: set it before importing tvm.
if __name__ == "__main__":
    for i, a in enumerate(sys.argv):
        if a == "--threads" and i + 1 < len(sys.argv):
            os.environ["TVM_NUM_THREADS"] = sys.argv[i + 1]
        elif a.startswith("--threads="):
            os.environ["TVM_NUM_THREADS"] = a.split("=", 1)[1]
    os.environ.setdefault("TVM_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

MODELS = [("mobilenet_v2", (1, 3, 224, 224), 2025), ("small_cnn", (1, 3, 16, 16), 2026)]
F32_RTOL = 1e-4  # docs/subgraph-format.md numerics, relative to the output's magnitude
ORT_RTOL = 1e-3  # ORT and TVM use different conv algorithms over ~50 layers


def log(msg: str):
    print(f"bench-offload: {msg}", file=sys.stderr, flush=True)


def close(a: np.ndarray, b: np.ndarray, rtol: float) -> tuple[bool, float]:
    """Agreement scaled by the output's magnitude (random-weight logits can be large)."""
    if a.shape != b.shape:
        return False, float("inf")
    err = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
    scale = max(1.0, float(np.max(np.abs(b))))
    return err <= rtol * scale, err


def ort_session(path: str, threads: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL  # the default, said
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


# --------------------------------------------------------------------------------------------
# build
# --------------------------------------------------------------------------------------------


def build(out: str):
    import onnx
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    import mote_tvm
    import onnx_models

    os.makedirs(out, exist_ok=True)
    mote_tvm.register_reference()
    meta = {"tvm_version": tvm.__version__, "onnx_version": onnx.__version__, "models": []}
    for name, shape, seed in MODELS:
        t0 = time.time()
        model = onnx_models.MODELS[name]()
        onnx_path = os.path.join(out, f"{name}.onnx")
        onnx.save(model, onnx_path)
        x = np.random.default_rng(seed).standard_normal(shape).astype("float32")
        np.savez(os.path.join(out, f"{name}.inputs.npz"), arg0=x)

        mod = from_onnx(model)
        pmod = mote_tvm.partition_for_acl(mod)
        descs = mote_tvm.subgraph_descriptions(pmod)
        if not descs:
            raise SystemExit(f"bench-offload: {name}: partition_for_acl offloaded nothing")
        plain_so = os.path.join(out, f"{name}.tvm.so")
        acl_so = os.path.join(out, f"{name}.acl.so")
        tvm.compile(mod, target="llvm").export_library(plain_so)
        tvm.compile(pmod, target="llvm").export_library(acl_so)
        log(f"{name}: imported, partitioned ({len(descs)} subgraph(s), "
            f"{sum(len(d['nodes']) for d in descs)} nodes) and compiled in {time.time() - t0:.1f}s")

        dev = tvm.cpu(0)
        ref = relax.VirtualMachine(tvm.runtime.load_module(plain_so), dev)["main"](tvm.runtime.tensor(x)).numpy()
        np.savez(os.path.join(out, f"{name}.expected.npz"), out0=ref)
        ort_out = ort_session(onnx_path, 1).run(None, {"input": x})[0]
        ok, err_ort = close(ort_out, ref, ORT_RTOL)
        if not ok:
            raise SystemExit(f"bench-offload: {name}: ONNX Runtime and TVM disagree (max abs {err_ort:g})")
        t1 = time.time()
        got = relax.VirtualMachine(tvm.runtime.load_module(acl_so), dev)["main"](tvm.runtime.tensor(x)).numpy()
        ok, err_ref = close(got, ref, F32_RTOL)
        if not ok:
            raise SystemExit(f"bench-offload: {name}: partitioned (numpy reference) and unpartitioned TVM "
                             f"disagree (max abs {err_ref:g})")
        log(f"{name}: ORT vs TVM max abs {err_ort:.3g}; partitioned+reference vs TVM max abs {err_ref:.3g} "
            f"(reference run {time.time() - t1:.1f}s)")
        meta["models"].append({
            "name": name, "onnx": f"{name}.onnx", "inputs": f"{name}.inputs.npz",
            "expected": f"{name}.expected.npz", "tvm_so": f"{name}.tvm.so", "acl_so": f"{name}.acl.so",
            "subgraphs": len(descs), "subgraph_nodes": sum(len(d["nodes"]) for d in descs),
            "ort_max_abs": err_ort, "reference_max_abs": err_ref,
        })
    with open(os.path.join(out, "bench.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


# --------------------------------------------------------------------------------------------
# run
# --------------------------------------------------------------------------------------------


def time_tvm(so: str, x: np.ndarray, repeat: int) -> float:
    import tvm
    from tvm import relax

    dev = tvm.cpu(0)
    vm = relax.VirtualMachine(tvm.runtime.load_module(so), dev)
    arg = tvm.runtime.tensor(x, dev)
    vm["main"](arg)  # warm-up
    timer = vm.time_evaluator("main", dev, number=1, repeat=repeat)
    return 1000.0 * float(np.median(timer(arg).results))


def time_ort(path: str, x: np.ndarray, repeat: int, threads: int) -> tuple[float, np.ndarray]:
    sess = ort_session(path, threads)
    out = sess.run(None, {"input": x})[0]
    for _ in range(2):
        sess.run(None, {"input": x})
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        sess.run(None, {"input": x})
        times.append(time.perf_counter() - t)
    return 1000.0 * statistics.median(times), out


def find_median_ms(text: str) -> float | None:
    """The "median_ms" of the last JSON object in `text` that has one (searched recursively)."""

    def search(obj):
        if isinstance(obj, dict):
            if isinstance(obj.get("median_ms"), (int, float)):
                return float(obj["median_ms"])
            for v in obj.values():
                r = search(v)
                if r is not None:
                    return r
        if isinstance(obj, list):
            for v in obj:
                r = search(v)
                if r is not None:
                    return r
        return None

    candidates = [text] + [ln for ln in reversed(text.splitlines()) if ln.strip().startswith(("{", "["))]
    for c in candidates:
        try:
            r = search(json.loads(c))
        except ValueError:
            continue
        if r is not None:
            return r
    return None


def time_mote(cmd: str, fields: dict) -> tuple[float | None, str]:
    argv = [a.format(**fields) for a in shlex.split(cmd)]
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, str(err)
    if res.returncode != 0:
        return None, f"exit {res.returncode}: {res.stderr.strip()[-400:]}"
    ms = find_median_ms(res.stdout)
    if ms is None:
        return None, f"no median_ms in its output: {res.stdout.strip()[-300:]}"
    return ms, ""


def fmt(v):
    return "n/a" if v is None else f"{v:.3f}"


def ratio(a, b):
    return "n/a" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


def mote_output(cmd: str, fields: dict) -> tuple[np.ndarray | None, str]:
    out = os.path.join(fields["dir"], f".mote-out-{os.getpid()}.npz")
    argv = [a.format(out=out, **fields) for a in shlex.split(cmd)]
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=900)
        if res.returncode != 0:
            return None, f"exit {res.returncode}: {res.stderr.strip()[-400:]}"
        return np.load(out)["out0"], ""
    except (OSError, subprocess.TimeoutExpired, KeyError, ValueError) as err:
        return None, str(err)
    finally:
        if os.path.exists(out):
            os.remove(out)


def run(d: str, mote: str | None, repeat: int, threads: int, mote_run: str | None = None) -> int:
    with open(os.path.join(d, "bench.json")) as f:
        meta = json.load(f)
    rows, failures = [], 0
    for m in meta["models"]:
        name = m["name"]
        x = np.load(os.path.join(d, m["inputs"]))["arg0"]
        ref = np.load(os.path.join(d, m["expected"]))["out0"]
        log(f"{name}: timing TVM (unpartitioned, {threads} thread(s), {repeat} runs)")
        t_tvm = time_tvm(os.path.join(d, m["tvm_so"]), x, repeat)
        log(f"{name}: timing ONNX Runtime (intra_op_num_threads={threads})")
        t_ort, ort_out = time_ort(os.path.join(d, m["onnx"]), x, repeat, threads)
        ok, err = close(ort_out, ref, ORT_RTOL)
        if not ok:
            failures += 1
            log(f"{name}: ONNX Runtime and TVM DISAGREE (max abs {err:g})")
        t_plain = t_acl = None
        mote_err = None
        if mote:
            for key in ("tvm_so", "acl_so"):
                fields = {"so": os.path.join(d, m[key]), "npz": os.path.join(d, m["inputs"]),
                          "onnx": os.path.join(d, m["onnx"]), "name": name, "dir": d}
                if mote_run:
                    got, why = mote_output(mote_run, fields)
                    if got is None:
                        failures += 1
                        log(f"{name}: Mote run on {m[key]} failed: {why}")
                    else:
                        ok, e = close(got, ort_out, ORT_RTOL)
                        mote_err = e if mote_err is None else max(mote_err, e)
                        if not ok:
                            failures += 1
                            log(f"{name}: Mote on {m[key]} and ONNX Runtime DISAGREE (max abs {e:g})")
                log(f"{name}: timing Mote on {m[key]}")
                ms, why = time_mote(mote, fields)
                if ms is None:
                    failures += 1
                    log(f"{name}: Mote on {m[key]} failed: {why}")
                if key == "tvm_so":
                    t_plain = ms
                else:
                    t_acl = ms
        rows.append((name, m["subgraphs"], m["subgraph_nodes"], t_tvm, t_ort, t_plain, t_acl, err, mote_err))

    print(f"\nbatch 1, {threads} thread(s), median of {repeat} runs; TVM {meta['tvm_version']}\n")
    print("| model | subgraphs (nodes) | TVM unpartitioned ms | ONNX Runtime ms | Mote .tvm.so ms "
          "| Mote .acl.so ms | Mote acl / TVM | Mote acl / ORT | Mote acl / Mote tvm | ORT vs TVM max abs "
          "| Mote vs ORT max abs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, ns, nn, t_tvm, t_ort, t_plain, t_acl, err, mote_err in rows:
        merr = "n/a" if mote_err is None else f"{mote_err:.2g}"
        print(f"| {name} | {ns} ({nn}) | {fmt(t_tvm)} | {fmt(t_ort)} | {fmt(t_plain)} | {fmt(t_acl)} | "
              f"{ratio(t_acl, t_tvm)} | {ratio(t_acl, t_ort)} | {ratio(t_acl, t_plain)} | {err:.2g} | {merr} |")
    if not mote:
        print("\n(no --mote command given: the Mote columns are empty)")
    return 1 if failures else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the models into a folder")
    b.add_argument("--out", required=True)
    r = sub.add_parser("run", help="time the built models")
    r.add_argument("--dir", required=True)
    r.add_argument("--mote", default=None, help="Mote command template ({so} {npz} {onnx} {name} {dir})")
    r.add_argument("--mote-run", default=None,
                   help="Mote command writing outputs to {out} (.npz), checked against ONNX Runtime")
    r.add_argument("--repeat", type=int, default=20)
    r.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    if args.cmd == "build":
        build(args.out)
        return 0
    return run(args.dir, args.mote, args.repeat, args.threads, args.mote_run)


if __name__ == "__main__":
    sys.exit(main())

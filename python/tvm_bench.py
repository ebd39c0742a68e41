#!/usr/bin/env python3
"""Time TVM's own Relax VM on every zoo model, as the baseline for Mote.

    python tvm_bench.py --zoo DIR [--threads N] [--runs N] [--json] [--only m1,m2]

For each case with mode "call" and no expect_error, loads DIR/NAME.so with
tvm.runtime.load_module, makes relax.VirtualMachine(mod, tvm.cpu()), feeds the
case's inputs.npz and times the function with vm.time_evaluator (each of the
--runs repeats lasts at least --min-repeat-ms; TVM grows `number` until it does).

--json prints one JSON object per line:
  {"model", "case", "function", "median_ms", "min_ms", "mean_ms", "runs", "threads"}
otherwise a table.  TVM_NUM_THREADS is set from --threads before tvm is imported.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zoo", required=True, help="zoo folder (with manifest.json)")
    ap.add_argument("--threads", type=int, default=None, help="TVM_NUM_THREADS (default: TVM's choice)")
    ap.add_argument("--runs", type=int, default=10, help="timed repeats per case (default 10)")
    ap.add_argument("--min-repeat-ms", type=int, default=50, help="minimum length of one repeat")
    ap.add_argument("--json", action="store_true", help="one JSON object per line")
    ap.add_argument("--only", default="", help="comma-separated model names (default: all)")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.threads is not None:
        if args.threads < 1:
            raise SystemExit("tvm_bench.py: --threads must be >= 1")
        # Must happen before TVM's thread pool exists, i.e. before importing tvm.
        os.environ["TVM_NUM_THREADS"] = str(args.threads)
    threads = int(os.environ.get("TVM_NUM_THREADS") or os.cpu_count() or 1)

    import numpy as np
    import tvm

    # The zoo registers the global functions its models call by name (e.g. the 'packed' model).
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import zoo  # noqa: F401
    from tvm import relax

    with open(os.path.join(args.zoo, "manifest.json")) as f:
        manifest = json.load(f)
    if manifest.get("target") not in (None, "x86_64"):
        raise SystemExit(f"tvm_bench.py: the zoo is for {manifest['target']}; TVM here can only run x86_64")

    only = {s for s in args.only.split(",") if s}
    dev = tvm.cpu(0)
    if not args.json:
        print(f"{'model':16s} {'case':16s} {'function':10s} {'median ms':>10s} {'min ms':>10s} "
              f"{'mean ms':>10s}  runs threads")
    for model in manifest["models"]:
        if only and model["name"] not in only:
            continue
        lib = tvm.runtime.load_module(os.path.join(args.zoo, model["file"]))
        # A kernel-only library is timed directly: its kernels are the library's functions.
        vm = lib if model.get("kind") == "kernels" else relax.VirtualMachine(lib, dev)
        for case in model["cases"]:
            if case.get("mode", "call") not in ("call", "kernel") or case.get("expect_error"):
                continue
            with np.load(os.path.join(args.zoo, case["inputs"])) as npz:
                arrays = [npz[f"arg{i}"] for i in range(len(npz.files))]
            scalars = case.get("scalars", [])
            inputs = [a.item() if i in scalars else tvm.runtime.tensor(a, dev) for i, a in enumerate(arrays)]
            timer = vm.time_evaluator(
                case["function"], dev, number=1, repeat=args.runs, min_repeat_ms=args.min_repeat_ms
            )
            res = timer(*inputs)
            row = {
                "model": model["name"],
                "case": case["case"],
                "function": case["function"],
                "median_ms": res.median * 1e3,
                "min_ms": res.min * 1e3,
                "mean_ms": res.mean * 1e3,
                "runs": args.runs,
                "threads": threads,
            }
            if args.json:
                print(json.dumps(row), flush=True)
            else:
                print(f"{row['model']:16s} {row['case']:16s} {row['function']:10s} {row['median_ms']:10.4f} "
                      f"{row['min_ms']:10.4f} {row['mean_ms']:10.4f}  {row['runs']:4d} {row['threads']:7d}",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

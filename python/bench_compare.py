"""Mote beside TVM's own runtime on every zoo model: one table, median latency and ratio.

Usage: bench_compare.py --zoo DIR --mote PATH/TO/mote [--threads N] [--runs N]
Mote is timed with `mote bench --json`; TVM with python/tvm_bench.py (time_evaluator), on the
same .so files, inputs and thread count. Each runtime runs in its own process.
"""
import argparse
import json
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zoo", required=True)
    ap.add_argument("--mote", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=2000)
    args = ap.parse_args()

    here = os.path.dirname(os.path.abspath(__file__))
    tvm = subprocess.run(
        [sys.executable, os.path.join(here, "tvm_bench.py"), "--zoo", args.zoo,
         "--threads", str(args.threads), "--json"],
        check=True, capture_output=True, text=True).stdout
    tvm_ms = {}
    for line in tvm.splitlines():
        if line.strip().startswith("{"):
            r = json.loads(line)
            tvm_ms[(r["model"], r["case"])] = r["median_ms"]

    manifest = json.load(open(os.path.join(args.zoo, "manifest.json")))
    rows = []
    for m in manifest["models"]:
        for c in m["cases"]:
            if c["mode"] not in ("call", "kernel") or c.get("expect_error"):
                continue
            proc = subprocess.run(
                [args.mote, "bench", os.path.join(args.zoo, m["file"]), "--function", c["function"],
                 "--inputs", os.path.join(args.zoo, c["inputs"]), "--threads", str(args.threads),
                 "--runs", str(args.runs), "--warmup", "20", "--json"],
                capture_output=True, text=True)
            if proc.returncode != 0:
                # e.g. 'packed' calls a function only the test suite registers with Mote.
                print(f"{m['name']}.{c['case']}: mote bench failed: {proc.stderr.strip()}", file=sys.stderr)
                rows.append((f'{m["name"]}.{c["case"]}', None, tvm_ms.get((m["name"], c["case"]))))
                continue
            mote = json.loads(proc.stdout)["median_ms"]
            t = tvm_ms.get((m["name"], c["case"]))
            rows.append((f'{m["name"]}.{c["case"]}', mote, t))

    print(f"threads: {args.threads}; median latency per call")
    print(f"| {'model.case':24} | {'Mote ms':>10} | {'TVM ms':>10} | {'Mote/TVM':>8} |")
    print(f"|{'-' * 26}|{'-' * 12}|{'-' * 12}|{'-' * 10}|")
    for name, mote, t in rows:
        ratio = f"{mote / t:.2f}" if t and mote else "n/a"
        ts = f"{t:.4f}" if t else "n/a"
        ms = f"{mote:.4f}" if mote else "n/a"
        print(f"| {name:24} | {ms:>10} | {ts:>10} | {ratio:>8} |")


if __name__ == "__main__":
    main()

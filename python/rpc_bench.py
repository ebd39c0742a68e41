#!/usr/bin/env python3
"""RPC throughput and latency, measured with TVM's own Python client against running servers.

    python rpc_bench.py --server NAME=HOST:PORT [--server ...] [--upload-mb 50] [--copy-mb 50]
                        [--calls 2000] [--repeat 5] [--json]

For every server, over one session each:
  upload     remote.upload of an --upload-mb file of random bytes (MB/s, best of --repeat)
  to-remote  tvm.runtime.tensor(np_array, remote.cpu()): allocation and copy of --copy-mb float32
  from-remote .numpy() of that remote tensor (MB/s, best of --repeat; the bytes are checked)
  call       round trip of a tiny kernel (one float32 plus one) called on remote tensors,
             microseconds per call, median of --repeat loops of --calls calls; the result is
             checked once per loop
The tiny kernel is built here with stock TVM (tvm.compile of a TIR function, export_library) and
uploaded to each server, so both servers run the same file.  Progress goes to stderr; the table
(or one JSON object per server with --json) to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

MB = 1 << 20


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", action="append", required=True, help="NAME=HOST:PORT (repeatable)")
    ap.add_argument("--upload-mb", type=int, default=50)
    ap.add_argument("--copy-mb", type=int, default=50)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    for name, bound in (("--upload-mb", (1, 4096)), ("--copy-mb", (1, 4096)), ("--calls", (1, 10**7)), ("--repeat", (1, 1000))):
        v = getattr(args, name[2:].replace("-", "_"))
        if not bound[0] <= v <= bound[1]:
            ap.error(f"{name} must be in {bound[0]}..{bound[1]}, got {v}")
    return args


def build_tiny_kernel(out_dir: str) -> str:
    """One kernel, add_one(A: float32[1], B: float32[1]): B[0] = A[0] + 1."""
    import tvm
    from tvm.script import tirx as T

    @T.prim_func
    def add_one(A: T.Buffer((1,), "float32"), B: T.Buffer((1,), "float32")):
        T.func_attr({"global_symbol": "add_one", "tir.noalias": True})
        B[0] = A[0] + T.float32(1)

    lib = tvm.compile(tvm.IRModule({"add_one": add_one}), target="llvm")
    path = os.path.join(out_dir, "add_one.so")
    lib.export_library(path)
    return path


def bench_server(name: str, addr: str, kernel_path: str, args) -> dict:
    import numpy as np
    import tvm
    from tvm import rpc

    host, port = addr.rsplit(":", 1)
    remote = rpc.connect(host, int(port))
    dev = remote.cpu()
    out = {"server": name}

    blob = os.urandom(args.upload_mb * MB)
    times = []
    for i in range(args.repeat):
        t0 = time.perf_counter()
        remote.upload(bytearray(blob), f"blob{i}.bin")
        times.append(time.perf_counter() - t0)
        remote.remove(f"blob{i}.bin")
    out["upload_mb_s"] = args.upload_mb / min(times)
    print(f"rpc_bench: {name}: upload {out['upload_mb_s']:.0f} MB/s", file=sys.stderr)

    n = args.copy_mb * MB // 4
    host_array = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    to_times, from_times = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        remote_array = tvm.runtime.tensor(host_array, dev)
        to_times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        back = remote_array.numpy()
        from_times.append(time.perf_counter() - t0)
        if not np.array_equal(back, host_array):
            raise SystemExit(f"rpc_bench: {name}: the tensor came back different")
        del remote_array
    out["to_remote_mb_s"] = args.copy_mb / min(to_times)
    out["from_remote_mb_s"] = args.copy_mb / min(from_times)
    print(f"rpc_bench: {name}: copies {out['to_remote_mb_s']:.0f} / {out['from_remote_mb_s']:.0f} MB/s", file=sys.stderr)

    remote.upload(kernel_path, "add_one.so")
    f = remote.load_module("add_one.so")["add_one"]
    a = tvm.runtime.tensor(np.array([41.0], dtype=np.float32), dev)
    b = tvm.runtime.tensor(np.array([np.nan], dtype=np.float32), dev)
    per_call = []
    for _ in range(args.repeat):
        b.copyfrom(np.array([np.nan], dtype=np.float32))
        t0 = time.perf_counter()
        for _ in range(args.calls):
            f(a, b)
        per_call.append((time.perf_counter() - t0) / args.calls)
        got = b.numpy()[0]
        if got != 42.0:
            raise SystemExit(f"rpc_bench: {name}: add_one gave {got}, expected 42")
    out["call_us"] = statistics.median(per_call) * 1e6
    print(f"rpc_bench: {name}: call {out['call_us']:.1f} us", file=sys.stderr)
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        kernel = build_tiny_kernel(tmp)
        results = []
        for spec in args.server:
            if "=" not in spec:
                raise SystemExit(f"rpc_bench: --server wants NAME=HOST:PORT, got {spec!r}")
            name, addr = spec.split("=", 1)
            results.append(bench_server(name, addr, kernel, args))
    if args.json:
        for r in results:
            print(json.dumps(r))
        return 0
    base = results[0]
    print(f"upload {args.upload_mb} MB, copies of {args.copy_mb} MB float32, best of {args.repeat}; "
          f"call: median of {args.repeat} loops of {args.calls} calls")
    print()
    head = "| server | upload MB/s | to remote MB/s | from remote MB/s | call us |"
    if len(results) > 1:
        head += f" upload vs {base['server']} | to vs {base['server']} | from vs {base['server']} | call vs {base['server']} |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for r in results:
        row = f"| {r['server']} | {r['upload_mb_s']:.0f} | {r['to_remote_mb_s']:.0f} | {r['from_remote_mb_s']:.0f} | {r['call_us']:.1f} |"
        if len(results) > 1:
            row += (f" {r['upload_mb_s'] / base['upload_mb_s']:.2f}x | {r['to_remote_mb_s'] / base['to_remote_mb_s']:.2f}x |"
                    f" {r['from_remote_mb_s'] / base['from_remote_mb_s']:.2f}x | {base['call_us'] / r['call_us']:.2f}x |")
        print(row)
    if len(results) > 1:
        print()
        print(f"Ratios > 1 mean faster than {base['server']} (for calls: {base['server']}'s time / this server's).")
    return 0


if __name__ == "__main__":
    sys.exit(main())

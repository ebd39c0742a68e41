#!/usr/bin/env python3
"""Load + first-run time and peak resident memory: Mote beside TVM's runtime and ONNX Runtime.

    python footprint.py run --dir DIR --mote MOTE [--models a,b] [--reps N] [--threads T]
                            [--json-out FILE]

DIR is a folder built by bench_archs.py (NAME.onnx, NAME.inputs.npz, NAME.tvm.so, NAME.acl.so,
NAME.bnns.so).
Each measurement is a fresh process that reads its inputs, then loads the model and runs it once:

- TVM: `tvm.runtime.load_module` + `relax.VirtualMachine` on NAME.tvm.so, then `main` once;
- Mote on the same NAME.tvm.so (TVM's kernels: the same work, so the difference is the
  runtime's), and on NAME.acl.so (partition_for_acl, subgraphs on Mote's cpu backend: what a
  Mote user ships), and on NAME.bnns.so loaded code-free (`--code-free`: mapped as data, as
  every load is on iOS; its regions run on the cpu backend here), all through
  `mote bench --runs 1 --warmup 0 --json`;
- ONNX Runtime: `InferenceSession` on NAME.onnx (ORT_ENABLE_ALL, sequential), then `run` once.

"load" is model and session/VM creation, "first run" the first call; their sum is the figure
compared. Memory: the process's peak resident set (`VmHWM`) and, the figure compared, its growth
over the resident set just before loading (Python processes reset the peak there through
/proc/self/clear_refs, so interpreter start-up and imports do not count; `mote` is a small
native process whose peak before loading is its resident set then). Medians over --reps
processes. One output per file is checked against ONNX Runtime (bench_archs.close). Prints a
markdown table on stdout; exit status 1 if a check failed or a process failed.

This is a benchmark, not a test: the figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_archs  # noqa: E402  (close, ort_session, cpu_info)


def log(msg: str):
    print(f"footprint: {msg}", file=sys.stderr, flush=True)


def status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak():
    """Make VmHWM the current VmRSS (Linux >= 4.0, proc(5) `clear_refs` value 5)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def probe(kind: str, path: str, npz: str, out: str | None) -> dict:
    """Runs in a child process: load `path` with `kind` (tvm or ort), run once, report."""
    x = np.load(npz)["arg0"]
    if kind == "tvm":
        import tvm
        from tvm import relax
        dev = tvm.cpu(0)
        arg = tvm.runtime.tensor(x, dev)
    else:
        import onnxruntime  # noqa: F401  (imported before the peak is reset)
    before = status_kib("VmRSS")
    reset_peak()
    t0 = time.perf_counter()
    if kind == "tvm":
        vm = relax.VirtualMachine(tvm.runtime.load_module(path), dev)
        t1 = time.perf_counter()
        y = vm["main"](arg)
        t2 = time.perf_counter()
        y = y.numpy() if hasattr(y, "numpy") else y[0].numpy()
    else:
        sess = bench_archs.ort_session(path, int(os.environ.get("FOOTPRINT_THREADS", "1")))
        t1 = time.perf_counter()
        y = sess.run(None, {"input": x})[0]
        t2 = time.perf_counter()
    peak = status_kib("VmHWM")
    if out:
        np.savez(out, out0=y)
    return {"load_ms": 1e3 * (t1 - t0), "first_run_ms": 1e3 * (t2 - t1),
            "rss_before_load_kib": before, "peak_rss_kib": peak}


def child(kind: str, path: str, npz: str, threads: int, out: str | None = None) -> dict:
    env = dict(os.environ, TVM_NUM_THREADS=str(threads), FOOTPRINT_THREADS=str(threads))
    cmd = [sys.executable, os.path.abspath(__file__), "probe", kind, path, npz] + ([out] if out else [])
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if res.returncode != 0:
        raise RuntimeError(f"{kind} probe on {path} failed (exit {res.returncode}): {res.stderr.strip()[-600:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def mote_child(mote: str, path: str, npz: str, threads: int, extra: tuple[str, ...] = ()) -> dict:
    cmd = [mote, "bench", path, *extra, "--inputs", npz, "--runs", "1", "--warmup", "0",
           "--threads", str(threads), "--json"]
    j, err = bench_archs.mote(cmd)
    if j is None:
        raise RuntimeError(f"mote bench on {path}: {err}")
    for k in ("load_ms", "first_run_ms", "rss_before_load_kib", "peak_rss_kib"):
        if j.get(k) is None:
            raise RuntimeError(f"mote bench on {path} did not report {k}")
    return j


def summarize(rows: list[dict]) -> dict:
    med = lambda k: statistics.median(r[k] for r in rows)  # noqa: E731
    return {
        "load_ms": med("load_ms"),
        "first_run_ms": med("first_run_ms"),
        "total_ms": statistics.median(r["load_ms"] + r["first_run_ms"] for r in rows),
        "peak_mib": med("peak_rss_kib") / 1024.0,
        "growth_mib": statistics.median(r["peak_rss_kib"] - r["rss_before_load_kib"] for r in rows) / 1024.0,
        "reps": len(rows),
    }


RUNNERS = ("tvm", "mote_tvm", "mote_acl", "mote_bnns", "ort")
LABELS = {"tvm": "TVM (tvm.so)", "mote_tvm": "Mote (tvm.so)", "mote_acl": "Mote (acl.so)",
          "mote_bnns": "Mote (bnns.so, code-free)", "ort": "ORT (onnx)"}
# Extra `mote` flags of each Mote runner: the BNNS-partitioned file is loaded code-free (mapped
# as data), as every load is on iOS; its regions run on the cpu backend here.
MOTE_FLAGS = {"mote_tvm": (), "mote_acl": (), "mote_bnns": ("--code-free",)}


def run(d: str, mote: str, models: list[str], reps: int, threads: int) -> tuple[dict, bool]:
    ok = True
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in models:
            files = {"tvm": f"{name}.tvm.so", "mote_tvm": f"{name}.tvm.so", "mote_acl": f"{name}.acl.so",
                     "mote_bnns": f"{name}.bnns.so", "ort": f"{name}.onnx"}
            npz = os.path.join(d, f"{name}.inputs.npz")
            missing = [f for f in set(files.values()) | {f"{name}.inputs.npz"} if not os.path.exists(os.path.join(d, f))]
            if missing:
                log(f"{name}: missing {', '.join(sorted(missing))}")
                results[name] = {"error": f"missing {missing}"}
                ok = False
                continue
            # Outputs once per runner (not timed): everything against ONNX Runtime.
            ref_path = os.path.join(tmp, "ort.npz")
            child("ort", os.path.join(d, files["ort"]), npz, threads, ref_path)
            ref = np.load(ref_path)["out0"]
            checks = {}
            tvm_path = os.path.join(tmp, "tvm.npz")
            child("tvm", os.path.join(d, files["tvm"]), npz, threads, tvm_path)
            checks["tvm"] = bench_archs.close(np.load(tvm_path)["out0"], ref)
            for r in MOTE_FLAGS:
                y, err = bench_archs.mote_output(mote, os.path.join(d, files[r]), npz, threads, tmp,
                                                 MOTE_FLAGS[r])
                checks[r] = bench_archs.close(y, ref) if y is not None else (False, float("nan"))
                if err:
                    log(f"{name} {r}: {err}")
            for r, (good, dev) in checks.items():
                log(f"{name} {LABELS[r]} vs ORT: {'ok' if good else 'MISMATCH'} (scaled max deviation {dev:.2e})")
                ok &= bool(good)
            # Interleave the runners so a change of machine load hits all of them alike.
            rows = {r: [] for r in RUNNERS}
            for rep in range(reps):
                for r in RUNNERS:
                    path = os.path.join(d, files[r])
                    if r == "tvm" or r == "ort":
                        rows[r].append(child(r, path, npz, threads))
                    else:
                        rows[r].append(mote_child(mote, path, npz, threads, MOTE_FLAGS[r]))
                log(f"{name}: round {rep + 1}/{reps}: " + ", ".join(
                    f"{r} {rows[r][-1]['load_ms'] + rows[r][-1]['first_run_ms']:.1f} ms "
                    f"+{(rows[r][-1]['peak_rss_kib'] - rows[r][-1]['rss_before_load_kib']) / 1024:.1f} MiB"
                    for r in RUNNERS))
            results[name] = {
                "file_mib": {r: os.path.getsize(os.path.join(d, files[r])) / 2**20 for r in RUNNERS},
                "checks": {r: {"ok": bool(c[0]), "deviation": float(c[1])} for r, c in checks.items()},
                **{r: summarize(rows[r]) for r in RUNNERS},
                "raw": rows,
            }
    return results, ok


def table(results: dict, threads: int) -> tuple[list[str], list[str], bool]:
    lines = [
        f"load + first run (ms, median of processes; load / first run in brackets) and memory at {threads} thread(s)",
        "",
        "| model | " + " | ".join(f"{LABELS[r]} ms" for r in RUNNERS) + " | "
        + " | ".join(f"{LABELS[r]} peak MiB (growth)" for r in RUNNERS) + " | outputs vs ORT |",
        "|---|" + "---|" * (2 * len(RUNNERS) + 1),
    ]
    goals = []
    all_met = True
    for name, res in results.items():
        if "error" in res:
            lines.append(f"| {name} | {res['error']} |")
            all_met = False
            continue
        ms = [f"{res[r]['total_ms']:.1f} ({res[r]['load_ms']:.1f} / {res[r]['first_run_ms']:.1f})" for r in RUNNERS]
        mem = [f"{res[r]['peak_mib']:.1f} (+{res[r]['growth_mib']:.1f})" for r in RUNNERS]
        chk = ", ".join(f"{r} {'ok' if c['ok'] else 'BAD'}" for r, c in res["checks"].items())
        lines.append(f"| {name} | " + " | ".join(ms) + " | " + " | ".join(mem) + f" | {chk} |")
        t_ok = res["mote_tvm"]["total_ms"] <= res["tvm"]["total_ms"]
        m_ok = res["mote_acl"]["growth_mib"] <= res["ort"]["growth_mib"]
        all_met &= t_ok and m_ok
        goals.append(f"- {name}: load + first run, Mote {res['mote_tvm']['total_ms']:.1f} ms vs TVM "
                     f"{res['tvm']['total_ms']:.1f} ms on the same file: {'met' if t_ok else 'NOT met'}; "
                     f"memory growth, Mote (acl.so) {res['mote_acl']['growth_mib']:.1f} MiB vs ORT "
                     f"{res['ort']['growth_mib']:.1f} MiB: {'met' if m_ok else 'NOT met'}")
    return lines, goals, all_met


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--dir", required=True)
    r.add_argument("--mote", required=True)
    r.add_argument("--models", default="mobilenet_v2,resnet50,transformer_encoder")
    r.add_argument("--reps", type=int, default=5)
    r.add_argument("--threads", type=int, default=1)
    r.add_argument("--json-out")
    p = sub.add_parser("probe")
    p.add_argument("kind", choices=("tvm", "ort"))
    p.add_argument("path")
    p.add_argument("npz")
    p.add_argument("out", nargs="?")
    a = ap.parse_args(argv)
    if a.cmd == "probe":
        print(json.dumps(probe(a.kind, a.path, a.npz, a.out)))
        return 0
    if a.reps < 1:
        ap.error("--reps must be at least 1")
    models = [m for m in a.models.split(",") if m]
    results, ok = run(a.dir, a.mote, models, a.reps, a.threads)
    lines, goals, met = table(results, a.threads)
    cpu = bench_archs.cpu_info()
    print(f"CPU: {cpu['model']} ({cpu['machine']}, {cpu['cpus']} logical CPUs); "
          f"ISA flags: {' '.join(cpu['isa']) or 'none of interest'}")
    print()
    print("\n".join(lines))
    print()
    print("Goals (issue 14, item 4):")
    print("\n".join(goals))
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"cpu": cpu, "threads": a.threads, "reps": a.reps, "results": results, "goals_met": met},
                      f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

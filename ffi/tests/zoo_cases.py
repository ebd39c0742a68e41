#!/usr/bin/env python3
"""Flatten the model zoo's manifest and .npz files into what a C test can read without a JSON
or .npy parser: raw little-endian tensor files plus one text file of cases.

    python zoo_cases.py ZOO_DIR OUT_DIR [--system-lib]   -> OUT_DIR/cases.txt, OUT_DIR/*.bin

With --system-lib, only the models the zoo also built as system libraries, with the library
path "syslib:PREFIX": test_zoo.c then loads them by prefix from the program itself.

cases.txt, one block per case:
    case <model>.<case> <library path> <function> <call|stateful|kernel> <rtol> <atol> <n_in> <n_out> <expected error text, to the end of the line, or ->
    in  <dtype code> <bits> <ndim> <dims...> <file>          (n_in lines)
    out <dtype code> <bits> <ndim> <dims...> <file>          (n_out lines)
    written <n_out> <index...>                               (kernel cases only)
The expected outputs are TVM's (the zoo's oracle); the C test never sees Mote's own results.

A kernel case calls a kernel of a kernel-only library: the `in` tensors are every argument,
output buffers included, and output k is what the kernel leaves in argument `written[k]`.
Kernel cases with scalar arguments are left out: mote_session_run passes tensors only (the
Rust zoo test runs them). They are named, with the reason, one a line in OUT_DIR/excluded.txt
(`<model>.<case> <reason>`): scripts/test-ffi.sh compares that list with the cases it expects
to be excluded, so no case drops out silently.
"""

import json
import os
import sys

import numpy as np

CODES = {"i": 0, "u": 1, "f": 2, "b": 6}


def describe(arr: np.ndarray, path: str) -> str:
    if arr.dtype.kind == "V" and arr.dtype.itemsize == 2:  # bfloat16 stored as <V2
        code, bits = 4, 16
    else:
        code, bits = CODES[arr.dtype.kind], arr.dtype.itemsize * 8
    np.ascontiguousarray(arr).tofile(path)
    dims = " ".join(str(d) for d in arr.shape)
    return f"{code} {bits} {arr.ndim} {dims} {path}".replace("  ", " ")


def main() -> None:
    zoo, out = sys.argv[1], sys.argv[2]
    system_lib = sys.argv[3:] == ["--system-lib"]
    if len(sys.argv) > 3 and not system_lib:
        raise SystemExit(f"zoo_cases.py: unknown arguments {sys.argv[3:]}")
    os.makedirs(out, exist_ok=True)
    manifest = json.load(open(os.path.join(zoo, "manifest.json")))
    lines = []
    excluded = []
    for model in manifest["models"]:
        if system_lib and "system_lib" not in model:
            continue
        library = f"syslib:{model['system_lib']['prefix']}" if system_lib else os.path.join(zoo, model["file"])
        for case in model["cases"]:
            stem = f"{model['name']}.{case['case']}"
            if case.get("scalars"):
                excluded.append(f"{stem} scalar kernel argument(s) {case['scalars']}: mote_session_run passes tensors only")
                continue
            ins = np.load(os.path.join(zoo, case["inputs"]))
            ins = [ins[f"arg{i}"] for i in range(len(ins.files))]
            outs = []
            if case["expected"]:
                e = np.load(os.path.join(zoo, case["expected"]))
                outs = [e[f"out{i}"] for i in range(len(e.files))]
            tol = case.get("tolerance") or {"rtol": 0, "atol": 0}
            err = case["expect_error"] or "-"
            lines.append(
                f"case {stem} {library} {case['function']} {case['mode']} "
                f"{tol['rtol']} {tol['atol']} {len(ins)} {len(outs)} {err}"
            )
            for i, a in enumerate(ins):
                lines.append("in " + describe(a, os.path.join(out, f"{stem}.in{i}.bin")))
            for i, a in enumerate(outs):
                lines.append("out " + describe(a, os.path.join(out, f"{stem}.out{i}.bin")))
            if case["mode"] == "kernel":
                written = case["outputs"]
                if len(written) != len(outs):
                    raise SystemExit(f"{stem}: {len(outs)} expected outputs for {len(written)} written arguments")
                lines.append(" ".join(["written", str(len(written))] + [str(i) for i in written]))
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out, "excluded.txt"), "w") as f:
        f.write("".join(e + "\n" for e in excluded))
    print(
        f"zoo_cases: {sum(1 for l in lines if l.startswith('case'))} cases -> {out}, "
        f"{len(excluded)} excluded: " + ("; ".join(excluded) or "none"),
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()

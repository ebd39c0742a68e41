"""What python/zoo.py and python/offload_zoo.py share: targets, seeded generators, the export of
a model for the target (plus the host build the oracle runs), kernel names, the manifest's case
records and the manifest itself.

Both zoo scripts hash this file into their cache folder names (scripts/lib/zoo-common.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tarfile

import numpy as np

import tvm

HOST_TARGET = "llvm"


def rng_for(seed: int, stream: int) -> np.random.Generator:
    """A fixed generator per (model seed, stream): stream 0 = weights, 1.. = inputs / cases."""
    return np.random.default_rng([seed, stream])


def target_for(arch: str):
    if arch == "x86_64":
        return HOST_TARGET
    if arch == "aarch64":
        # A Target object, not a dict: a plain dict trips a bug in 0.27's relax.build.
        return tvm.target.Target({"kind": "llvm", "mtriple": "aarch64-linux-gnu"})
    raise ValueError(f"unknown target {arch!r}")


def flatten_outputs(value) -> list[np.ndarray]:
    """Depth-first flattening of a VM return value (Tensor or nested Array of Tensors)."""
    if isinstance(value, tvm.runtime.Tensor):
        return [value.numpy()]
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, (list, tuple)) or (hasattr(value, "__len__") and hasattr(value, "__getitem__")):
        out = []
        for item in value:
            out.extend(flatten_outputs(item))
        return out
    raise TypeError(f"unsupported VM return value of type {type(value).__name__}: {value!r}")


def kernel_names(path: str, dynamic: bool) -> list[str] | None:
    """Names X of the global code symbols __tvm_ffi_X (context slots and weak aliases excluded),
    or None when nm fails."""
    cmd = ["nm", "--defined-only"] + (["-D"] if dynamic else ["-g"]) + [path]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    names = []
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue
        _, kind, sym = parts
        if kind != "T" or not sym.startswith("__tvm_ffi_") or sym.startswith("__tvm_ffi__"):
            continue
        names.append(sym[len("__tvm_ffi_"):])
    return sorted(names)


def export_model(mod: tvm.IRModule, arch: str, name: str, entry: dict, out_dir: str, scratch: str,
                 allow_c: bool = False, kernels_only: bool = False) -> tuple[str, str | None]:
    """Compile `mod` for `arch` and export it: OUT/NAME.so (x86_64) or OUT/NAME.tar (aarch64,
    lib0.o + devc.o, or lib0.o alone with `kernels_only`: a TIR-only module has no module blob;
    recorded as entry["archive"]).

    Returns (host_lib, obj): host_lib is a host shared library of `mod` for the oracle (the
    exported NAME.so itself on x86_64, a build in `scratch` otherwise); obj is the archive's
    lib0.o extracted into `scratch`, or None on x86_64 and for an archive of C sources
    (lib0.c + devc.c, accepted with `allow_c`: what TVM emits when no TVM kernel is left).
    """
    ex = tvm.compile(mod, target=target_for(arch))
    if arch == "x86_64":
        host_lib = os.path.join(out_dir, f"{name}.so")
        ex.export_library(host_lib)
        return host_lib, None
    tar_path = os.path.join(out_dir, f"{name}.tar")
    ex.export_library(tar_path)
    obj = None
    with tarfile.open(tar_path) as tf:
        members = set(tf.getnames())
        if {"lib0.o", "devc.o"} <= members or (kernels_only and members == {"lib0.o"}):
            objdir = os.path.join(scratch, f"{name}.objs")
            os.makedirs(objdir, exist_ok=True)
            tf.extract("lib0.o", objdir)
            obj = os.path.join(objdir, "lib0.o")
        elif not (allow_c and {"lib0.c", "devc.c"} <= members):
            want = "lib0.o+devc.o or lib0.c+devc.c" if allow_c else "lib0.o alone" if kernels_only else "lib0.o and devc.o"
            raise RuntimeError(f"{tar_path}: expected {want}, found {sorted(members)}")
    entry["archive"] = f"{name}.tar"
    host_lib = os.path.join(scratch, f"{name}.so")
    tvm.compile(mod, target=HOST_TARGET).export_library(host_lib)
    return host_lib, obj


def case_record(out_dir: str, stem: str, case: str, function: str, inputs: list, mode: str = "call",
                expect_error: str | None = None) -> dict:
    """Write STEM.inputs.npz (arg0, arg1, ...) and return the manifest record of the case, with
    no expected outputs yet (see `record_outputs`)."""
    inputs_file = f"{stem}.inputs.npz"
    np.savez(os.path.join(out_dir, inputs_file), **{f"arg{i}": a for i, a in enumerate(inputs)})
    return {
        "case": case,
        "function": function,
        "inputs": inputs_file,
        "expected": None,
        "mode": mode,
        "expect_error": expect_error,
        "input_shapes": [list(a.shape) for a in inputs],
        "input_dtypes": [str(a.dtype) for a in inputs],
    }


def record_outputs(rec: dict, out_dir: str, stem: str, outs: list, tolerance) -> None:
    """Write STEM.expected.npz (out0, out1, ...) and complete `rec`; `tolerance` maps the
    outputs' one dtype to the case's tolerance."""
    expected_file = f"{stem}.expected.npz"
    np.savez(os.path.join(out_dir, expected_file), **{f"out{i}": o for i, o in enumerate(outs)})
    dtypes = [str(o.dtype) for o in outs]
    if len(set(dtypes)) > 1:
        raise RuntimeError(f"{stem}: mixed output dtypes {dtypes}; one tolerance per case")
    rec["expected"] = expected_file
    rec["output_dtypes"] = dtypes
    rec["output_shapes"] = [list(o.shape) for o in outs]
    rec["tolerance"] = tolerance(dtypes[0])


def parse_args(doc: str, only_help: str, argv=None) -> argparse.Namespace:
    """The zoo scripts' command line: --target, --out (created) and --only (a set of names)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", choices=["x86_64", "aarch64"], default="x86_64")
    ap.add_argument("--out", required=True, help="output folder (created if missing)")
    ap.add_argument("--only", default="", help=only_help)
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    args.only = {s for s in args.only.split(",") if s}
    return args


def write_manifest(out_dir: str, manifest: dict) -> None:
    """OUT/manifest.json, written whole or not at all."""
    tmp = os.path.join(out_dir, "manifest.json.tmp")
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    os.replace(tmp, os.path.join(out_dir, "manifest.json"))

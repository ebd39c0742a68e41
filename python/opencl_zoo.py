#!/usr/bin/env python3
"""Build Mote's OpenCL test zoo with Apache TVM 0.27 and record TVM's reference outputs.

    python opencl_zoo.py --target x86_64  --out DIR    # DIR/NAME.so (host code: x86_64)
    python opencl_zoo.py --target aarch64 --out DIR    # DIR/NAME.tar (lib0.o + devc.o; link them yourself)

Every model is compiled with ``tvm.target.Target("opencl", host=<llvm for the target>)``: TVM
splits it into host code (LLVM, in the library as usual) and OpenCL C kernels, kept in a module
of kind ``opencl`` in the library's blob (docs/tvm-format.md §10).  The wheel has no OpenCL
runtime and cannot run these files, so the reference outputs (the oracle) come from the same
computation compiled for ``llvm`` and run by TVM on this host's CPU:

- kernel-only libraries: each is a TIR module written without threads (the computation), which
  is the oracle's module, and a GPU schedule (``tvm.s_tir.Schedule``: split, bind to
  blockIdx/threadIdx, shared-memory staging) applied to it for the OpenCL build; thread
  bindings cannot be compiled for ``llvm``, so the schedule is the one thing the oracle skips;
- Relax models: the same module (same bound weights) through ``relax.get_pipeline("zero")``,
  then dlight's default GPU schedules inside ``with target:`` for OpenCL, and without dlight
  for ``llvm``, run by ``relax.VirtualMachine`` on ``tvm.cpu()``.

A float64 numpy computation checks each oracle loosely as well.

Output layout (manifest.json; the format of python/zoo.py, so Mote's zoo harness reads it):
    manifest.json
    NAME.so or NAME.tar                 one per model
    NAME.CASE.inputs.npz                arg0, arg1, ... in parameter order
    NAME.CASE.expected.npz              out0, out1, ...

Every model entry has "device": "opencl", a description, "kernels" (the host functions
__tvm_ffi_<name>, as nm reads them) and "opencl_kernels" (the OpenCL kernels, the names of the
opencl module's function map). Kernel-only libraries (kind "kernels") have cases of mode
"kernel" as in zoo.py: the inputs are every argument of the host function, outputs included (as
NaN buffers), "outputs" lists the indices of the arguments it writes and "scalars" those of
scalar parameters (0-d arrays); "functions" lists every __tvm_ffi_<name> the library exports
(the weak __tvm_ffi_main alias included). Relax models (kind "relax") have cases of mode "call".

Progress goes to stderr, one summary line per model, and the total time.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import tvm
import tvm.s_tir.dlight as dl
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from zoo_common import HOST_TARGET, case_record, flatten_outputs, kernel_names
from zoo_common import parse_args, record_outputs, rng_for, target_for, write_manifest

DEVICE = "opencl"


def opencl_target(arch: str) -> tvm.target.Target:
    """OpenCL kernels, host code for `arch` (zoo_common's CPU target)."""
    host = target_for(arch)
    if not isinstance(host, tvm.target.Target):
        host = tvm.target.Target(host)
    return tvm.target.Target(DEVICE, host=host)


# --------------------------------------------------------------------------------------
# Model descriptions
# --------------------------------------------------------------------------------------


@dataclass
class Case:
    case: str  # case name, unique within a model
    function: str  # host function (kernel-only library) or Relax function to call
    inputs: list  # numpy arrays, one per parameter, in order
    mode: str = "call"  # "call" (Relax) or "kernel" (a kernel-only library's function)
    expect_error: str | None = None  # substring of TVM's error message, if the call must fail
    # "kernel" mode only: `inputs` are every argument, outputs included (NaN); `outputs` are the
    # indices of the arguments the function writes, `scalars` those of scalar parameters.
    outputs: list[int] = field(default_factory=list)
    scalars: list[int] = field(default_factory=list)


@dataclass
class Model:
    name: str
    kind: str  # "kernels" or "relax"
    description: str
    # kernels: a TIR module without thread bindings (the computation; the oracle builds it);
    # relax: a Relax module with its weights bound as constants.
    mod: tvm.IRModule
    cases: list[Case]
    # kernels only: the GPU schedule, mod -> scheduled mod (the OpenCL build's module).
    schedule: Callable[[tvm.IRModule], tvm.IRModule] | None = None
    # An independent float64 check of the oracle: case -> list of outputs, within check_tol.
    numpy_ref: Callable[[Case], list] | None = None
    check_tol: float = 1e-4
    # rtol = atol of the float32 outputs (the CPU zoo's 1e-5 unless a description says why not).
    tol: float = 1e-5


def _nan(shape) -> np.ndarray:
    return np.full(shape, np.nan, dtype="float32")


# ---- gemm_cl -----------------------------------------------------------------------------

GEMM_N = 256
GEMM_TILE = 64


@I.ir_module
class _Gemm:
    @T.prim_func(s_tir=True)
    def gemm_gpu(
        A: T.Buffer((256, 256), "float32"),
        B: T.Buffer((256, 256), "float32"),
        C: T.Buffer((256, 256), "float32"),
    ):
        T.func_attr({"global_symbol": "gemm_gpu", "tirx.noalias": True})
        for i, j, k in T.grid(256, 256, 256):
            with T.sblock("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


def _gemm_schedule(mod: tvm.IRModule) -> tvm.IRModule:
    """The seed's schedule (TVM's Android RPC tutorial): i and j split by 64, the inner parts
    bound to blockIdx.x and threadIdx.x, the outer ones left serial on the host."""
    sch = tvm.s_tir.Schedule(mod)
    blk = sch.get_sblock("C", func_name="gemm_gpu")
    i, j, k = sch.get_loops(blk)
    io, ii = sch.split(i, factors=[None, GEMM_TILE])
    jo, ji = sch.split(j, factors=[None, GEMM_TILE])
    sch.reorder(io, jo, ii, ji, k)
    sch.bind(ii, "blockIdx.x")
    sch.bind(ji, "threadIdx.x")
    return sch.mod


def model_gemm_cl() -> Model:
    """The seed's flow: one host function that launches its kernel 16 times from host loops,
    passing the loop indices as scalar kernel arguments (what Mote's profiling test counts), and
    the host code's own argument checks, whose messages Mote must pass on."""
    r = rng_for(201, 1)
    a = r.standard_normal((GEMM_N, GEMM_N)).astype("float32")
    b = r.standard_normal((GEMM_N, GEMM_N)).astype("float32")
    c = _nan((GEMM_N, GEMM_N))
    return Model(
        name="gemm_cl",
        kind="kernels",
        description="kernel-only OpenCL library, the seed's GEMM (TVM's Android RPC tutorial flow) at "
        "N=256: gemm_gpu(A[256,256], B[256,256], C[256,256]) f32, C = A @ B; i and j split by 64, "
        "inner parts bound to blockIdx.x / threadIdx.x, outer parts serial on the host, so one call "
        "launches gemm_gpu_kernel 16 times (4 x 4) with the loop indices i_0, j_0 as int32 kernel "
        "arguments; __tvm_ffi_main is the weak alias of the single function. Cases gemm_gpu and "
        "main fill a NaN C; 'arity' (2 arguments) and 'shape' (A[255,256]) fail in the host code's "
        "own checks: the expected texts come from the llvm build, and the OpenCL build's host code "
        "has the same checks and texts (one pass writes both), except that it first requires "
        "device_type opencl, so a host tensor there gets 'Mismatched A.device_type' instead. "
        "Tolerance 1e-4: 256-term dot products up to ~80, which the OpenCL compiler may contract to "
        "fma (POCL differs from the oracle by up to 1.5e-5)",
        mod=_Gemm,
        schedule=_gemm_schedule,
        cases=[
            Case("gemm_gpu", "gemm_gpu", [a, b, c], mode="kernel", outputs=[2]),
            Case("main", "main", [a, b, c], mode="kernel", outputs=[2]),
            Case("arity", "gemm_gpu", [a, b], mode="kernel", expect_error="Expected 3 arguments"),
            Case(
                "shape", "gemm_gpu", [a[:-1].copy(), b, c], mode="kernel",
                expect_error="Invalid A.shape[0] on argument #0",
            ),
        ],
        numpy_ref=lambda c: [c.inputs[0].astype(np.float64) @ c.inputs[1].astype(np.float64)],
        tol=1e-4,
    )


# ---- vadd_cl -----------------------------------------------------------------------------


@I.ir_module
class _Vadd:
    @T.prim_func(s_tir=True)
    def vadd(a: T.handle, b: T.handle, c: T.handle, alpha: T.float32):
        T.func_attr({"global_symbol": "vadd", "tirx.noalias": True})
        n = T.int64()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        C = T.match_buffer(c, (n,), "float32")
        for i in range(n):
            with T.sblock("C"):
                vi = T.axis.spatial(n, i)
                C[vi] = A[vi] + B[vi] * alpha


def _vadd_schedule(mod: tvm.IRModule) -> tvm.IRModule:
    sch = tvm.s_tir.Schedule(mod)
    (i,) = sch.get_loops(sch.get_sblock("C", func_name="vadd"))
    bx, tx = sch.split(i, factors=[None, 64])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch.mod


VADD_ALPHA = -1.375


def model_vadd_cl() -> Model:
    """A float32 parameter (widened to a Float by the host, narrowed for the kernel), a symbolic
    int64 length passed both as a kernel argument and inside a launch extent (ceil(n/64)), and a
    guarded tail; n=64 fills one work-group exactly, n=1 leaves 63 work-items idle."""
    cases = []
    for s, n in enumerate([1000, 64, 1]):
        r = rng_for(202, 1 + s)
        a = r.standard_normal(n).astype("float32")
        b = r.standard_normal(n).astype("float32")
        cases.append(Case(f"n{n}", "vadd", [a, b, _nan(n), np.array(VADD_ALPHA, dtype="float32")],
                          mode="kernel", outputs=[2], scalars=[3]))
    return Model(
        name="vadd_cl",
        kind="kernels",
        description="kernel-only OpenCL library: vadd(A[n], B[n], C[n], alpha: float32) f32, "
        "C = A + B * alpha with n symbolic (int64), split by 64 (blockIdx.x = ceil(n/64), "
        "threadIdx.x = 64, the tail guarded by i < n); the kernel takes alpha as a float and n as a "
        f"long; cases n=1000, 64 and 1 on the same library, alpha={VADD_ALPHA}",
        mod=_Vadd,
        schedule=_vadd_schedule,
        cases=cases,
        numpy_ref=lambda c: [c.inputs[0].astype(np.float64) + c.inputs[1].astype(np.float64) * float(c.inputs[3])],
    )


# ---- scale2d_cl --------------------------------------------------------------------------


@I.ir_module
class _Scale2d:
    @T.prim_func(s_tir=True)
    def scale2d(a: T.handle, k: T.int32, c: T.handle):
        T.func_attr({"global_symbol": "scale2d", "tirx.noalias": True})
        m = T.int64()
        n = T.int64()
        A = T.match_buffer(a, (m, n), "float32")
        C = T.match_buffer(c, (m, n), "float32")
        for i, j in T.grid(m, n):
            with T.sblock("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] * T.Cast("float32", k) + T.Cast("float32", vi) - T.Cast("float32", vj)


def _scale2d_schedule(mod: tvm.IRModule) -> tvm.IRModule:
    """8 x 16 work-groups over a 2-D grid: blockIdx.y/x, threadIdx.y/x."""
    sch = tvm.s_tir.Schedule(mod)
    i, j = sch.get_loops(sch.get_sblock("C", func_name="scale2d"))
    bi, ti = sch.split(i, factors=[None, 8])
    bj, tj = sch.split(j, factors=[None, 16])
    sch.reorder(bi, bj, ti, tj)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    sch.bind(ti, "threadIdx.y")
    sch.bind(tj, "threadIdx.x")
    return sch.mod


def _scale2d_np(c: Case) -> list:
    a, k = c.inputs[0].astype(np.float64), int(c.inputs[1])
    m, n = a.shape
    return [a * k + np.arange(m)[:, None] - np.arange(n)[None, :]]


def model_scale2d_cl() -> Model:
    """A 2-D NDRange: launch tags in first-use order (y before x), work_dim 2, ragged edges in
    both dimensions, and an int32 scalar between two buffers in the host function's parameters."""
    cases = []
    for s, (m, n, k) in enumerate([(37, 50, 3), (8, 16, -7)]):
        a = rng_for(203, 1 + s).standard_normal((m, n)).astype("float32")
        cases.append(Case(f"m{m}_n{n}", "scale2d", [a, np.array(k, dtype="int32"), _nan((m, n))],
                          mode="kernel", outputs=[2], scalars=[1]))
    return Model(
        name="scale2d_cl",
        kind="kernels",
        description="kernel-only OpenCL library with a 2-D launch: scale2d(A[m,n], k: int32, C[m,n]) "
        "f32, C[i,j] = A[i,j] * k + i - j, m and n symbolic (int64); 8 x 16 work-groups "
        "(blockIdx.y/x = ceil(m/8), ceil(n/16); threadIdx.y/x = 8, 16; tags in first-use order y, x), "
        "the kernel's scalars int k, long m, long n; cases m=37,n=50 (ragged edges, k=3) and "
        "m=8,n=16 (one work-group, k=-7)",
        mod=_Scale2d,
        schedule=_scale2d_schedule,
        cases=cases,
        numpy_ref=_scale2d_np,
    )


# ---- rowsum_cl ---------------------------------------------------------------------------

ROWS, COLS = 128, 64


@I.ir_module
class _Rowsum:
    @T.prim_func(s_tir=True)
    def rowsum(x: T.Buffer((128, 64), "float32"), out: T.Buffer((128,), "float32")):
        T.func_attr({"global_symbol": "rowsum", "tirx.noalias": True})
        for r, k in T.grid(128, 64):
            with T.sblock("sum"):
                vr, vk = T.axis.remap("SR", [r, k])
                with T.init():
                    out[vr] = T.float32(0)
                out[vr] = out[vr] + x[vr, vk]


def _rowsum_schedule(mod: tvm.IRModule) -> tvm.IRModule:
    """One work-group of 64 per row: the row is staged in a scope="shared" buffer (cache_read),
    then summed by TVM's cross-thread reduction (k bound to threadIdx.x)."""
    sch = tvm.s_tir.Schedule(mod)
    blk = sch.get_sblock("sum", func_name="rowsum")
    r, k = sch.get_loops(blk)
    sch.bind(r, "blockIdx.x")
    staged = sch.cache_read(blk, 0, "shared")
    sch.compute_at(staged, r)
    sch.bind(sch.get_loops(staged)[-1], "threadIdx.x")
    sch.bind(k, "threadIdx.x")
    return sch.mod


def model_rowsum_cl() -> Model:
    """__local memory and barriers: correct only when the runtime launches work-groups of exactly
    the size the host code passes (64) and the device honours barrier(CLK_LOCAL_MEM_FENCE)."""
    x = rng_for(204, 1).standard_normal((ROWS, COLS)).astype("float32")
    return Model(
        name="rowsum_cl",
        kind="kernels",
        description="kernel-only OpenCL library with __local memory and barriers: rowsum(x[128,64], "
        "out[128]) f32, out[r] = sum_k x[r,k]; one work-group of 64 work-items per row (kernel "
        "parameters out_ptr, x_ptr: buffers sorted by name): the row is staged in a scope=\"shared\" "
        "buffer (__local float x_shared[64]), then a barrier, then TVM's cross-thread reduction (a "
        "second __local buffer halved 6 times, a barrier after each step). Tolerance 1e-5 holds: "
        "the tree order differs from the oracle's serial sum by a few ulps of sums below 21 "
        "(POCL: up to 4e-6)",
        mod=_Rowsum,
        schedule=_rowsum_schedule,
        cases=[Case("rowsum", "rowsum", [x, _nan(ROWS)], mode="kernel", outputs=[1])],
        numpy_ref=lambda c: [c.inputs[0].astype(np.float64).sum(axis=1)],
    )


# ---- twostage_cl -------------------------------------------------------------------------

TWOSTAGE_N = 1024


@I.ir_module
class _Twostage:
    @T.prim_func(s_tir=True)
    def twostage(a: T.Buffer((1024,), "float32"), c: T.Buffer((1024,), "float32")):
        T.func_attr({"global_symbol": "twostage", "tirx.noalias": True})
        tmp = T.sblock_alloc_buffer((1024,), "float32")
        for i in range(1024):
            with T.sblock("s1"):
                v = T.axis.spatial(1024, i)
                tmp[v] = a[v] * T.float32(2)
        for i in range(1024):
            with T.sblock("s2"):
                v = T.axis.spatial(1024, i)
                c[v] = tmp[1023 - v] + T.float32(1)


def _twostage_schedule(mod: tvm.IRModule) -> tvm.IRModule:
    """Each stage its own 16 x 64 launch; `tmp` stays a global buffer between them."""
    sch = tvm.s_tir.Schedule(mod)
    for name in ("s1", "s2"):
        (i,) = sch.get_loops(sch.get_sblock(name, func_name="twostage"))
        bx, tx = sch.split(i, factors=[None, 64])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
    return sch.mod


def model_twostage_cl() -> Model:
    """Two kernels in one host function with a device workspace between them: the runtime must
    route TVMBackendAllocWorkspace(4, ...) to device memory and keep the launches in order."""
    a = rng_for(205, 1).standard_normal(TWOSTAGE_N).astype("float32")
    return Model(
        name="twostage_cl",
        kind="kernels",
        description="kernel-only OpenCL library, one function with two kernels joined by a device "
        "workspace: twostage(a[1024], c[1024]) f32, tmp = a * 2 (twostage_kernel), then "
        "c[i] = tmp[1023 - i] + 1 (twostage_kernel_1: reversed, so each work-item reads what another "
        "work-group wrote); the host code takes tmp from TVMBackendAllocWorkspace(4, dev_id, 4096, "
        "float, 32) and frees it after both launches",
        mod=_Twostage,
        schedule=_twostage_schedule,
        cases=[Case("twostage", "twostage", [a, _nan(TWOSTAGE_N)], mode="kernel", outputs=[1])],
        numpy_ref=lambda c: [c.inputs[0].astype(np.float64)[::-1] * 2 + 1],
    )


# ---- mlp_cl (Relax) ----------------------------------------------------------------------


@I.ir_module
class _Mlp:
    @R.function
    def main(
        x: R.Tensor((1, 16), "float32"),
        w1: R.Tensor((16, 32), "float32"),
        b1: R.Tensor((32,), "float32"),
        w2: R.Tensor((32, 8), "float32"),
        b2: R.Tensor((8,), "float32"),
    ) -> R.Tensor((1, 8), "float32"):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            h = R.nn.relu(R.add(R.matmul(x, w1), b1))
            y = R.add(R.matmul(h, w2), b2)
            R.output(y)
        return y


def _bind(mod: tvm.IRModule, weights: dict[str, np.ndarray]) -> tvm.IRModule:
    """Bind `weights` into main as constants (relax.transform.BindParams), leaving main(x)."""
    return relax.transform.BindParams("main", {k: tvm.runtime.tensor(v) for k, v in weights.items()})(mod)


def model_mlp_cl() -> Model:
    """The smallest Relax model for OpenCL (tree [relax.VMExecutable, _lib, opencl]): what
    Mote refuses today naming its kernels, and the oracle for when its VM runs on devices."""
    seed = 206
    r = rng_for(seed, 0)
    w = {
        "w1": (r.standard_normal((16, 32)) / np.sqrt(16)).astype("float32"),
        "b1": (0.1 * r.standard_normal(32)).astype("float32"),
        "w2": (r.standard_normal((32, 8)) / np.sqrt(32)).astype("float32"),
        "b2": (0.1 * r.standard_normal(8)).astype("float32"),
    }
    x = rng_for(seed, 1).standard_normal((1, 16)).astype("float32")
    f = {k: v.astype(np.float64) for k, v in w.items()}
    return Model(
        name="mlp_cl",
        kind="relax",
        description="Relax MLP for OpenCL: main(x[1,16]) -> [1,8] f32 = relu(x @ w1[16,32] + b1) @ "
        "w2[32,8] + b2, weights bound as constants; zero pipeline + dlight's default GPU schedules "
        "(two fused kernels); oracle: the same module through the zero pipeline for llvm, "
        "run by TVM's VM on the CPU. Tolerance 1e-5: dot products of 16 and 32 terms of size ~1",
        mod=_bind(_Mlp, w),
        cases=[Case("main", "main", [x])],
        numpy_ref=lambda c: [np.maximum(c.inputs[0] @ f["w1"] + f["b1"], 0) @ f["w2"] + f["b2"]],
    )


# ---- cnn_cl (Relax) ----------------------------------------------------------------------


@I.ir_module
class _Cnn:
    @R.function
    def main(
        x: R.Tensor((1, 3, 16, 16), "float32"),
        wc: R.Tensor((8, 3, 3, 3), "float32"),
        bc: R.Tensor((1, 8, 1, 1), "float32"),
        wd: R.Tensor((8, 10), "float32"),
        bd: R.Tensor((10,), "float32"),
    ) -> R.Tensor((1, 10), "float32"):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            c = R.nn.relu(R.add(R.nn.conv2d(x, wc, padding=(1, 1)), bc))
            p = R.nn.adaptive_avg_pool2d(c, output_size=(1, 1))
            y = R.add(R.matmul(R.reshape(p, (1, 8)), wd), bd)
            R.output(y)
        return y


def _cnn_np(x: np.ndarray, w: dict[str, np.ndarray]) -> list:
    x = x.astype(np.float64)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    k = w["wc"].astype(np.float64)
    conv = np.zeros((1, 8, 16, 16))
    for dy in range(3):
        for dx in range(3):
            conv += np.einsum("nchw,oc->nohw", xp[:, :, dy : dy + 16, dx : dx + 16], k[:, :, dy, dx])
    act = np.maximum(conv + w["bc"].astype(np.float64), 0)
    pooled = act.mean(axis=(2, 3))  # [1,8]
    return [pooled @ w["wd"].astype(np.float64) + w["bd"]]


def model_cnn_cl() -> Model:
    """A Relax model with four kinds of dlight kernel in one opencl module: a convolution, a
    pooling reduction over 256 values (cross-thread), a reshape and a dense layer."""
    seed = 207
    r = rng_for(seed, 0)
    w = {
        "wc": (r.standard_normal((8, 3, 3, 3)) / np.sqrt(27)).astype("float32"),
        "bc": (0.1 * r.standard_normal((1, 8, 1, 1))).astype("float32"),
        "wd": (r.standard_normal((8, 10)) / np.sqrt(8)).astype("float32"),
        "bd": (0.1 * r.standard_normal(10)).astype("float32"),
    }
    x = rng_for(seed, 1).standard_normal((1, 3, 16, 16)).astype("float32")
    return Model(
        name="cnn_cl",
        kind="relax",
        description="Relax CNN for OpenCL: main(x[1,3,16,16]) -> [1,10] f32 = conv2d(3->8, 3x3, pad 1) "
        "+ bias + relu, global average pool (adaptive_avg_pool2d to 1x1), reshape [1,8], dense "
        "8->10 + bias; weights bound as constants; zero pipeline + dlight's default GPU schedules; "
        "oracle: the same module through the zero pipeline for llvm, run by TVM's VM on the CPU. "
        "Tolerance 1e-5: 27-term convolutions, a 256-term mean of values ~1 and an 8-term dense",
        mod=_bind(_Cnn, w),
        cases=[Case("main", "main", [x])],
        numpy_ref=lambda c: _cnn_np(c.inputs[0], w),
    )


# ---- mlp_dyn_cl (Relax, symbolic batch) ---------------------------------------------------


@I.ir_module
class _MlpDyn:
    @R.function
    def main(
        x: R.Tensor(("n", 16), "float32"),
        w1: R.Tensor((16, 32), "float32"),
        b1: R.Tensor((32,), "float32"),
        w2: R.Tensor((32, 8), "float32"),
    ) -> R.Tensor(("n", 8), "float32"):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            h = R.nn.relu(R.add(R.matmul(x, w1), b1))
            y = R.matmul(h, w2)
            R.output(y)
        return y


def model_mlp_dyn_cl() -> Model:
    """A Relax model for OpenCL with a symbolic batch: its program keeps a shape heap on the
    host, matches n from the input, computes storage sizes with a host shape function, and
    passes n to the kernels as an int64 argument; two cases, n = 1 and n = 5."""
    seed = 208
    r = rng_for(seed, 0)
    w = {
        "w1": (r.standard_normal((16, 32)) / np.sqrt(16)).astype("float32"),
        "b1": (0.1 * r.standard_normal(32)).astype("float32"),
        "w2": (r.standard_normal((32, 8)) / np.sqrt(32)).astype("float32"),
    }
    f = {k: v.astype(np.float64) for k, v in w.items()}
    return Model(
        name="mlp_dyn_cl",
        kind="relax",
        description="Relax MLP for OpenCL with a symbolic batch: main(x[n,16]) -> [n,8] f32 = "
        "relu(x @ w1[16,32] + b1) @ w2[32,8], weights bound as constants; the shape heap and the "
        "shape function run on the host, n reaches the kernels as an int64 argument; zero "
        "pipeline + dlight's default GPU schedules; oracle: the same module through the zero "
        "pipeline for llvm, run by TVM's VM on the CPU. Tolerance 1e-5: dot products of 16 and "
        "32 terms of size ~1",
        mod=_bind(_MlpDyn, w),
        cases=[
            Case("n1", "main", [rng_for(seed, 1).standard_normal((1, 16)).astype("float32")]),
            Case("n5", "main", [rng_for(seed, 2).standard_normal((5, 16)).astype("float32")]),
        ],
        numpy_ref=lambda c: [np.maximum(c.inputs[0] @ f["w1"] + f["b1"], 0) @ f["w2"]],
    )


MODELS: list[Callable[[], Model]] = [
    model_gemm_cl,
    model_vadd_cl,
    model_scale2d_cl,
    model_rowsum_cl,
    model_twostage_cl,
    model_mlp_cl,
    model_cnn_cl,
    model_mlp_dyn_cl,
]

# --------------------------------------------------------------------------------------
# Building, running, recording
# --------------------------------------------------------------------------------------


def compile_device(model: Model, target: tvm.target.Target):
    """The OpenCL build: the kernels' GPU schedule, or for Relax the zero pipeline and dlight's
    default GPU schedules, applied under the target."""
    if model.kind == "kernels":
        return tvm.compile(model.schedule(model.mod), target=target)
    with target:
        mod = relax.get_pipeline("zero")(model.mod)
        mod = dl.ApplyDefaultSchedule(
            dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(), dl.gpu.GeneralReduction(), dl.gpu.Fallback()
        )(mod)
    return tvm.compile(mod, target=target)


def compile_oracle(model: Model):
    """The same computation for the host CPU: the unscheduled TIR module, or the Relax module
    through the zero pipeline (no dlight)."""
    target = tvm.target.Target(HOST_TARGET)
    if model.kind == "kernels":
        return tvm.compile(model.mod, target=target)
    with target:
        mod = relax.get_pipeline("zero")(model.mod)
    return tvm.compile(mod, target=target)


def opencl_kernels(ex) -> list[str]:
    """Names of the kernels in the executable's opencl module(s): its source's chunk headers
    ("// Function: NAME", one per entry of the function map)."""
    found, stack = [], [ex.mod]
    while stack:
        m = stack.pop()
        if m.kind == DEVICE:
            found += re.findall(r"^// Function: (\S+)$", m.inspect_source(), flags=re.M)
        stack.extend(m.imports)
    return sorted(found)


def _defined_symbols(path: str, dynamic: bool) -> set[str]:
    """Defined global symbols: the dynamic table of a shared library, or an object's symbols."""
    cmd = ["nm", "--defined-only"] + (["-D"] if dynamic else ["-g"]) + [path]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in res.stdout.splitlines() if line.split()}


def defined_functions(path: str, dynamic: bool) -> list[str]:
    """Every defined __tvm_ffi_<name> (weak aliases included, the blob and the slots excluded)."""
    return sorted(
        s[len("__tvm_ffi_"):] for s in _defined_symbols(path, dynamic)
        if s.startswith("__tvm_ffi_") and not s.startswith("__tvm_ffi__")
    )


def export_device(ex, arch: str, name: str, entry: dict, out_dir: str, scratch: str) -> tuple[str, str, bool]:
    """Export the OpenCL build: OUT/NAME.so on x86_64, OUT/NAME.tar (lib0.o, the host code, and
    devc.o, the blob holding the opencl module) on aarch64, recorded as entry["archive"].

    Returns (code, blob, dynamic): the files nm reads for the host functions and for the blob,
    and whether they are shared libraries (the .so twice) or objects (lib0.o, devc.o).
    """
    if arch == "x86_64":
        path = os.path.join(out_dir, f"{name}.so")
        ex.export_library(path)
        return path, path, True
    tar_path = os.path.join(out_dir, f"{name}.tar")
    ex.export_library(tar_path)
    with tarfile.open(tar_path) as tf:
        members = set(tf.getnames())
        if members != {"lib0.o", "devc.o"}:
            raise RuntimeError(f"{tar_path}: expected lib0.o and devc.o, found {sorted(members)}")
        objdir = os.path.join(scratch, f"{name}.objs")
        tf.extractall(objdir)
    entry["archive"] = f"{name}.tar"
    return os.path.join(objdir, "lib0.o"), os.path.join(objdir, "devc.o"), False


def tolerance(dtype: str, tol: float) -> dict:
    if dtype == "float32":
        return {"rtol": tol, "atol": tol}
    raise ValueError(f"no tolerance rule for dtype {dtype}")


def check_inputs(model: Model, case: Case):
    """Relax cases: inputs must match main's parameters (count, dtype, shape)."""
    if model.kind == "kernels":
        if case.mode != "kernel":
            raise ValueError(f"{model.name}.{case.case}: mode {case.mode} in a kernel-only library")
        return
    if case.mode != "call":
        raise ValueError(f"{model.name}.{case.case}: mode {case.mode} in a Relax model")
    params = list(model.mod[case.function].params)
    if len(params) != len(case.inputs):
        raise ValueError(f"{model.name}.{case.case}: {len(case.inputs)} inputs for {len(params)} parameters")
    for p, a in zip(params, case.inputs):
        # A symbolic dimension (a tir.Var) matches any size.
        want = [int(d) if type(d).__name__ == "IntImm" else None for d in p.ty.shape.values]
        shape = [None if w is None else d for w, d in zip(want, a.shape)]
        if str(p.ty.dtype) != str(a.dtype) or want != shape or len(want) != a.ndim:
            raise ValueError(f"{model.name}.{case.case}: {p.name} is {a.dtype}{list(a.shape)}, "
                             f"expected {p.ty.dtype}{want}")


def run_case(fns, case: Case) -> list[np.ndarray]:
    """Run one case on the CPU oracle: a kernel library's function called as lib[name](args...)
    (scalars as Python numbers), or the Relax VM's function."""
    dev = tvm.cpu(0)
    if case.mode == "kernel":
        args = [a.item() if i in case.scalars else tvm.runtime.tensor(a, dev) for i, a in enumerate(case.inputs)]
        result = fns[case.function](*args)
        if result is not None:
            raise RuntimeError(f"{case.function} returned {result!r}, expected None")
        return [args[i].numpy() for i in case.outputs]
    return flatten_outputs(fns[case.function](*[tvm.runtime.tensor(a, dev) for a in case.inputs]))


def build_model(model: Model, arch: str, out_dir: str, scratch: str) -> dict:
    t0 = time.time()
    name = model.name
    for case in model.cases:
        check_inputs(model, case)
    entry = {"name": name, "file": f"{name}.so", "device": DEVICE, "description": model.description, "kind": model.kind}

    ex = compile_device(model, opencl_target(arch))
    entry["opencl_kernels"] = opencl_kernels(ex)
    if not entry["opencl_kernels"]:
        raise RuntimeError(f"{name}: the OpenCL build has no OpenCL kernel")
    code, blob, dynamic = export_device(ex, arch, name, entry, out_dir, scratch)
    t_device = time.time() - t0

    oracle_lib = os.path.join(scratch, f"{name}.host.so")
    compile_oracle(model).export_library(oracle_lib)
    t_oracle = time.time() - t0 - t_device

    # The OpenCL build's host code has a module blob (with the opencl module) and, for a kernel
    # library, exactly the oracle's functions: the device kernels live in the blob only.
    if "__tvm_ffi__library_bin" not in _defined_symbols(blob, dynamic):
        raise RuntimeError(f"{name}: the OpenCL build has no module blob")
    kernels = kernel_names(code, dynamic)
    if kernels is None:
        raise RuntimeError(f"{name}: nm cannot read {code}")
    entry["kernels"] = kernels
    if model.kind == "kernels":
        entry["functions"] = defined_functions(code, dynamic)
        if entry["functions"] != defined_functions(oracle_lib, True):
            raise RuntimeError(f"{name}: host functions {entry['functions']} differ from the oracle's "
                               f"{defined_functions(oracle_lib, True)}")

    lib = tvm.runtime.load_module(oracle_lib)
    fns = lib if model.kind == "kernels" else relax.VirtualMachine(lib, tvm.cpu(0))
    cases_out = []
    for case in model.cases:
        stem = f"{name}.{case.case}"
        rec = case_record(out_dir, stem, case.case, case.function, case.inputs, case.mode, case.expect_error)
        if case.mode == "kernel":
            rec["outputs"] = case.outputs
            rec["scalars"] = case.scalars
        if case.expect_error is not None:
            try:
                run_case(fns, case)
            except Exception as err:  # noqa: BLE001 - TVM raises several Python error types
                if case.expect_error not in str(err):
                    raise RuntimeError(f"{stem}: TVM raised {type(err).__name__} {str(err)!r}, "
                                       f"which lacks {case.expect_error!r}") from err
                rec["error_kind"] = type(err).__name__
            else:
                raise RuntimeError(f"{stem}: expected TVM to raise {case.expect_error!r}, but it returned")
            rec["output_dtypes"] = []
            rec["output_shapes"] = []
            rec["tolerance"] = None
        else:
            outs = run_case(fns, case)
            if any(np.isnan(o).any() for o in outs):
                raise RuntimeError(f"{stem}: the oracle left NaN in an output")
            if model.numpy_ref is not None:
                ref = model.numpy_ref(case)
                if len(ref) != len(outs):
                    raise RuntimeError(f"{stem}: numpy check has {len(ref)} outputs, TVM {len(outs)}")
                for i, (o, r) in enumerate(zip(outs, ref)):
                    if o.shape != r.shape or not np.allclose(o.astype(np.float64), r, rtol=model.check_tol,
                                                             atol=model.check_tol):
                        err = np.max(np.abs(o.astype(np.float64) - r)) if o.shape == r.shape else "shape"
                        raise RuntimeError(f"{stem}: TVM out{i} disagrees with the numpy check ({err})")
            record_outputs(rec, out_dir, stem, outs, lambda dt: tolerance(dt, model.tol))
        cases_out.append(rec)
    entry["cases"] = cases_out

    made = entry.get("archive", entry["file"])
    size = os.path.getsize(os.path.join(out_dir, made))
    print(
        f"opencl-zoo[{arch}]: {name:12s} {made:16s} {size:8d} B  {len(entry['opencl_kernels']):2d} OpenCL "
        f"kernel(s)  {len(cases_out)} case(s): {', '.join(c['case'] for c in cases_out)}  "
        f"(OpenCL build {t_device:.1f}s, oracle build {t_oracle:.1f}s, total {time.time() - t0:.1f}s)",
        file=sys.stderr,
        flush=True,
    )
    return entry


def main(argv=None) -> int:
    args = parse_args(__doc__, "comma-separated model names (default: all)", argv)
    t0 = time.time()
    manifest = {"tvm_version": tvm.__version__, "target": args.target, "device": DEVICE, "models": []}
    with tempfile.TemporaryDirectory(prefix="mote-opencl-zoo-") as scratch:
        for make in MODELS:
            model = make()
            if args.only and model.name not in args.only:
                continue
            manifest["models"].append(build_model(model, args.target, args.out, scratch))
    if args.only and len(manifest["models"]) != len(args.only):
        found = {m["name"] for m in manifest["models"]}
        raise SystemExit(f"opencl_zoo.py: unknown model(s): {sorted(args.only - found)}")
    write_manifest(args.out, manifest)
    print(
        f"opencl-zoo[{args.target}]: {len(manifest['models'])} models in {time.time() - t0:.1f}s -> {args.out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

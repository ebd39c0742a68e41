#!/usr/bin/env python3
"""Build Mote's test model zoo with Apache TVM 0.27 and record TVM's reference outputs.

    python zoo.py --target x86_64  --out DIR    # DIR/NAME.so (host shared libraries)
    python zoo.py --target aarch64 --out DIR    # DIR/NAME.tar (lib0.o + devc.o; link them yourself)

Whatever the target, the reference outputs (the oracle) come from TVM's own
``relax.VirtualMachine`` running an x86_64 build of the same IRModule on this
host, fed with fixed, seeded inputs.  For x86_64 that build is the exported
NAME.so itself; for aarch64 it is a throw-away build in a temporary folder.

Output layout (see manifest.json):
    manifest.json
    NAME.so or NAME.tar                 one per model
    NAME.CASE.inputs.npz                arg0, arg1, ... in parameter order
    NAME.CASE.expected.npz              out0, out1, ... (tuples flattened depth-first)
    syslib/NAME.tar                     a system-library build (SYSTEM_LIB_MODELS only)
    compiled/NAME.so (or .tar)          an exec_mode="compiled" build (Relax models)

Models in SYSTEM_LIB_MODELS are also built as a "system library" (docs/system-lib.md): the
same IRModule with the attribute system_lib_prefix "NAME_", exported to syslib/NAME.tar
(lib0.o + NAME_devc.o, objects to link into a program). The model's entry records it as
"system_lib": {"prefix", "archive", "undefined"} ("undefined": what lib0.o needs from the
program, as nm reads it); its cases apply unchanged, since the weights are the same.

Every Relax model is also built with ``relax.build(..., exec_mode="compiled")`` (the VM program
as native code, docs/tvm-format.md section 3.6) into compiled/NAME.so (aarch64: compiled/NAME.tar,
linked into compiled/NAME.so like the others), recorded as "compiled": {"file", "undefined"}
("undefined": the TVM functions the x86_64 build imports, as nm reads them). TVM's VM runs every
case on the x86_64 build too, and its outputs must equal the bytecode build's bit for bit (the
same kernels run in the same order), so the cases apply unchanged.

Models of kind "kernels" are kernel-only libraries (a TIR module exported on its own). Their
cases have mode "kernel": the inputs are every argument of the kernel, outputs included (as NaN
buffers), "outputs" lists the indices of the arguments the kernel writes and "scalars" those of
scalar parameters (0-d arrays); the expected outputs are those arguments after TVM's
lib[kernel](...) call, in "outputs" order. "functions" lists every __tvm_ffi_<name> function
the library exports, as nm reads it.

Progress goes to stderr, one summary line per model.
"""

from __future__ import annotations

import ctypes
import math
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import tvm
from tvm import relax
from tvm.relax.frontend import nn
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from zoo_common import case_record, export_model, flatten_outputs, kernel_names
from zoo_common import HOST_TARGET, parse_args, record_outputs, rng_for, target_for, write_manifest

# --------------------------------------------------------------------------------------
# Model descriptions
# --------------------------------------------------------------------------------------


@dataclass
class Case:
    case: str  # case name, unique within a model
    function: str  # Relax function to call
    inputs: list  # numpy arrays, one per function parameter, in order
    mode: str = "call"  # "call", "stateful", or "kernel" (a kernel-only library's kernel)
    expect_error: str | None = None  # substring of TVM's error message, if the call must fail
    # "kernel" mode only: `inputs` are every argument of the kernel in order, outputs included;
    # `outputs` are the indices of the arguments the kernel writes (their stored contents are
    # NaN), `scalars` the indices of scalar parameters (stored as 0-d arrays).
    outputs: list[int] = field(default_factory=list)
    scalars: list[int] = field(default_factory=list)


@dataclass
class Model:
    name: str
    description: str
    mod: tvm.IRModule
    cases: list[Case]
    # Optional independent check: case -> list of numpy outputs (a loose sanity check
    # of the TVM oracle itself, with tolerance check_tol).
    numpy_ref: Callable[[Case], list] | None = None
    check_tol: float = 1e-4
    # Extra looseness factor for the aarch64 tolerances (deep float models).
    aarch64_loosen: float = 1.0
    notes: list[str] = field(default_factory=list)
    # "relax": a Relax module (a relax.VMExecutable export). "kernels": a TIR-only module,
    # exported with no module blob; TVM runs it as lib[kernel](args...) (see Case.outputs).
    kind: str = "relax"


def init_weights(params, rng: np.random.Generator, overrides=None) -> dict[str, np.ndarray]:
    """Deterministic weights for the parameters of an exported nn.Module.

    Matrices/kernels: normal scaled by 1/sqrt(fan_in); 1-d '*weight' (norm gains): 1 + 0.1 N;
    biases: 0.1 N.  `overrides` maps a parameter name to a function(shape, rng) -> array.
    """
    overrides = overrides or {}
    out = {}
    for name, p in params:
        shape = tuple(int(s) for s in p.shape)
        dtype = str(p.dtype)
        if name in overrides:
            arr = overrides[name](shape, rng)
        elif len(shape) >= 2:
            fan_in = int(np.prod(shape[1:]))
            arr = rng.standard_normal(shape) / math.sqrt(fan_in)
        elif name.endswith("weight"):
            arr = 1.0 + 0.1 * rng.standard_normal(shape)
        else:
            arr = 0.1 * rng.standard_normal(shape)
        out[name] = np.asarray(arr, dtype=dtype)
    return out


def bind_weights(mod: tvm.IRModule, weights: dict[str, np.ndarray]) -> tvm.IRModule:
    """Bind weights as constants into every Relax function of `mod` (relax.transform.BindParams)."""
    consts = {k: tvm.runtime.tensor(v) for k, v in weights.items()}
    for gv, func in mod.functions.items():
        if isinstance(func, relax.Function):
            names = {p.name for p in func.params}
            sub = {k: v for k, v in consts.items() if k in names}
            if sub:
                mod = relax.transform.BindParams(gv.name_hint, sub)(mod)
    return mod


def np_gelu(x):
    # exact (erf) GELU, computed in float64
    from math import erf

    verf = np.vectorize(erf)
    return 0.5 * x * (1.0 + verf(x / math.sqrt(2.0)))


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_layer_norm(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


# ---- mlp ---------------------------------------------------------------------------------


class _MLP(nn.Module):
    def __init__(self, d_in=16, d_hidden=32, d_out=8):
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.fc2(nn.op.relu(self.fc1(x)))


def _mlp_np(args):
    x, w1, b1, w2, b2 = [a.astype(np.float64) for a in args]
    return [np.maximum(x @ w1.T + b1, 0) @ w2.T + b2]


def model_mlp() -> Model:
    seed = 101
    mod, params = _MLP().export_tvm(spec={"forward": {"x": nn.spec.Tensor((2, 16), "float32")}})
    w = init_weights(params, rng_for(seed, 0))
    x = rng_for(seed, 1).standard_normal((2, 16)).astype("float32")
    return Model(
        name="mlp",
        description="nn.Module Linear(16,32)+ReLU+Linear(32,8); forward(x[2,16], fc1.weight[32,16], "
        "fc1.bias[32], fc2.weight[8,32], fc2.bias[8]) -> [2,8] f32; weights are function "
        "parameters (export_tvm default, num_input=1)",
        mod=mod,
        cases=[Case("forward", "forward", [x] + [w[n] for n, _ in params])],
        numpy_ref=lambda c: _mlp_np(c.inputs),
    )


# ---- mlp_dyn -----------------------------------------------------------------------------


def model_mlp_dyn() -> Model:
    seed = 102
    mod, params = _MLP().export_tvm(spec={"forward": {"x": nn.spec.Tensor(("n", 16), "float32")}})
    w = init_weights(params, rng_for(seed, 0))
    ws = [w[n] for n, _ in params]
    cases = []
    for i, n in enumerate([1, 5]):
        x = rng_for(seed, 1 + i).standard_normal((n, 16)).astype("float32")
        cases.append(Case(f"n{n}", "forward", [x] + ws))
    return Model(
        name="mlp_dyn",
        description="mlp with a symbolic batch dimension: forward(x[n,16], fc1.weight[32,16], "
        "fc1.bias[32], fc2.weight[8,32], fc2.bias[8]) -> [n,8] f32; cases n=1 and n=5 on the same .so",
        mod=mod,
        cases=cases,
        numpy_ref=lambda c: _mlp_np(c.inputs),
    )


# ---- cnn ---------------------------------------------------------------------------------


class _CNN(nn.Module):
    def __init__(self):
        self.conv = nn.Conv2D(3, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        y = nn.op.relu(self.conv(x))  # [1,8,16,16]
        y = nn.op.wrap_nested(
            relax.op.nn.max_pool2d(y._expr, pool_size=(2, 2), strides=(2, 2)), name="pool"
        )  # [1,8,8,8]
        y = nn.op.reshape(y, (1, 8 * 8 * 8))
        return nn.op.softmax(self.fc(y), axis=-1)


def _cnn_np(x, w):
    x = x.astype(np.float64)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    k = w["conv.weight"].astype(np.float64)
    out = np.zeros((1, 8, 16, 16))
    for dy in range(3):
        for dx in range(3):
            patch = xp[:, :, dy : dy + 16, dx : dx + 16]  # [1,3,16,16]
            out += np.einsum("nchw,oc->nohw", patch, k[:, :, dy, dx])
    out += w["conv.bias"].reshape(1, 8, 1, 1)
    out = np.maximum(out, 0)
    out = out.reshape(1, 8, 8, 2, 8, 2).max(axis=(3, 5))
    logits = out.reshape(1, 512) @ w["fc.weight"].T.astype(np.float64) + w["fc.bias"]
    return [np_softmax(logits)]


def model_cnn() -> Model:
    seed = 103
    mod, params = _CNN().export_tvm(spec={"forward": {"x": nn.spec.Tensor((1, 3, 16, 16), "float32")}})
    w = init_weights(params, rng_for(seed, 0))
    mod = bind_weights(mod, w)
    x = rng_for(seed, 1).standard_normal((1, 3, 16, 16)).astype("float32")
    return Model(
        name="cnn",
        description="conv2d(3->8,3x3,pad 1)+bias+relu+max_pool2d(2)+reshape+dense(512->10)+softmax; "
        "forward(x[1,3,16,16]) -> [1,10] f32; weights bound as constants (BindParams)",
        mod=mod,
        cases=[Case("forward", "forward", [x])],
        numpy_ref=lambda c: _cnn_np(c.inputs[0], w),
    )


# ---- mobilenet_block ---------------------------------------------------------------------


class _MobileNetBlock(nn.Module):
    def __init__(self, c_in=8, c_out=16):
        self.dw = nn.Conv2D(c_in, c_in, 3, padding=1, groups=c_in, bias=False)
        self.bn_scale = nn.Parameter((c_in, 1, 1), "float32")
        self.bn_shift = nn.Parameter((c_in, 1, 1), "float32")
        self.pw = nn.Conv2D(c_in, c_out, 1, bias=True)

    def forward(self, x):
        y = self.dw(x) * self.bn_scale + self.bn_shift
        y = nn.op.relu6(y)
        return nn.op.relu6(self.pw(y))


def _mobilenet_np(x, w):
    x = x.astype(np.float64)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    k = w["dw.weight"].astype(np.float64)  # [8,1,3,3]
    y = np.zeros((1, 8, 16, 16))
    for dy in range(3):
        for dx in range(3):
            y += xp[:, :, dy : dy + 16, dx : dx + 16] * k[:, 0, dy, dx].reshape(1, 8, 1, 1)
    y = y * w["bn_scale"] + w["bn_shift"]
    y = np.clip(y, 0, 6)
    z = np.einsum("nchw,oc->nohw", y, w["pw.weight"][:, :, 0, 0].astype(np.float64))
    z += w["pw.bias"].reshape(1, 16, 1, 1)
    return [np.clip(z, 0, 6)]


def model_mobilenet_block() -> Model:
    seed = 104
    mod, params = _MobileNetBlock().export_tvm(
        spec={"forward": {"x": nn.spec.Tensor((1, 8, 16, 16), "float32")}}
    )
    w = init_weights(
        params,
        rng_for(seed, 0),
        overrides={
            # larger depthwise weights so that relu6 actually clips at 6 somewhere
            "dw.weight": lambda s, r: 1.2 * r.standard_normal(s),
            "bn_scale": lambda s, r: 1.0 + 0.2 * r.standard_normal(s),
            "bn_shift": lambda s, r: 0.5 * r.standard_normal(s),
        },
    )
    mod = bind_weights(mod, w)
    x = (2.0 * rng_for(seed, 1).standard_normal((1, 8, 16, 16))).astype("float32")
    return Model(
        name="mobilenet_block",
        description="depthwise-separable block: depthwise conv2d 3x3 (groups=8, pad 1) * scale + "
        "shift (folded batch norm) + relu6, pointwise 1x1 conv 8->16 + bias + relu6; "
        "forward(x[1,8,16,16]) -> [1,16,16,16] f32; weights bound as constants",
        mod=mod,
        cases=[Case("forward", "forward", [x])],
        numpy_ref=lambda c: _mobilenet_np(c.inputs[0], w),
    )


# ---- transformer -------------------------------------------------------------------------


class _Encoder(nn.Module):
    def __init__(self, d=32, heads=4, d_ff=64):
        self.d, self.heads = d, heads
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.o = nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d)
        self.ff1 = nn.Linear(d, d_ff)
        self.ff2 = nn.Linear(d_ff, d)
        self.ln2 = nn.LayerNorm(d)

    def forward(self, x):
        b, s, d = (int(v) for v in x.shape)
        h = self.heads
        hd = d // h

        def heads(t):  # [b,s,d] -> [b,h,s,hd]
            return nn.op.permute_dims(nn.op.reshape(t, (b, s, h, hd)), [0, 2, 1, 3])

        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        scores = nn.op.matmul(q, nn.op.permute_dims(k, [0, 1, 3, 2])) * (1.0 / math.sqrt(hd))
        att = nn.op.softmax(scores, axis=-1)
        ctx = nn.op.matmul(att, v)  # [b,h,s,hd]
        ctx = nn.op.reshape(nn.op.permute_dims(ctx, [0, 2, 1, 3]), (b, s, d))
        x = self.ln1(x + self.o(ctx))
        y = self.ff2(nn.op.gelu(self.ff1(x)))
        return self.ln2(x + y)


def _encoder_np(x, w, heads=4):
    f = {k: v.astype(np.float64) for k, v in w.items()}
    x = x.astype(np.float64)
    b, s, d = x.shape
    hd = d // heads

    def lin(t, n):
        return t @ f[n + ".weight"].T + f[n + ".bias"]

    def split(t):
        return t.reshape(b, s, heads, hd).transpose(0, 2, 1, 3)

    q, k, v = split(lin(x, "q")), split(lin(x, "k")), split(lin(x, "v"))
    att = np_softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd))
    ctx = (att @ v).transpose(0, 2, 1, 3).reshape(b, s, d)
    x = np_layer_norm(x + lin(ctx, "o"), f["ln1.weight"], f["ln1.bias"])
    y = lin(np_gelu(lin(x, "ff1")), "ff2")
    return [np_layer_norm(x + y, f["ln2.weight"], f["ln2.bias"])]


def model_transformer() -> Model:
    seed = 105
    mod, params = _Encoder().export_tvm(spec={"forward": {"x": nn.spec.Tensor((1, 16, 32), "float32")}})
    w = init_weights(params, rng_for(seed, 0))
    mod = bind_weights(mod, w)
    x = rng_for(seed, 1).standard_normal((1, 16, 32)).astype("float32")
    return Model(
        name="transformer",
        description="one post-norm encoder block: 4-head self-attention (q/k/v/o Linear 32->32, "
        "matmul, 1/sqrt(8) scaling, softmax), residual + layer norm, FFN 32->64 gelu(erf) ->32, "
        "residual + layer norm; forward(x[1,16,32]) -> [1,16,32] f32; weights bound as constants",
        mod=mod,
        cases=[Case("forward", "forward", [x])],
        numpy_ref=lambda c: _encoder_np(c.inputs[0], w),
        check_tol=1e-3,
    )


# ---- multi -------------------------------------------------------------------------------


class _Multi(nn.Module):
    def __init__(self):
        self.proj = nn.Linear(8, 8)

    def embed(self, a, c):
        return (self.proj(a) + c, nn.op.relu(a - c) * 2.0)

    def forward(self, x):
        return nn.op.relu(self.proj(x))


def _multi_np(case):
    if case.function == "embed":
        a, c, w, b = [t.astype(np.float64) for t in case.inputs]
        return [a @ w.T + b + c, np.maximum(a - c, 0) * 2.0]
    x, w, b = [t.astype(np.float64) for t in case.inputs]
    return [np.maximum(x @ w.T + b, 0)]


def model_multi() -> Model:
    seed = 106
    mod, params = _Multi().export_tvm(
        spec={
            "embed": {"a": nn.spec.Tensor((2, 8), "float32"), "c": nn.spec.Tensor((2, 8), "float32")},
            "forward": {"x": nn.spec.Tensor((3, 8), "float32")},
        }
    )
    w = init_weights(params, rng_for(seed, 0))
    ws = [w[n] for n, _ in params]
    r1, r2 = rng_for(seed, 1), rng_for(seed, 2)
    a, c = r1.standard_normal((2, 8)).astype("float32"), r1.standard_normal((2, 8)).astype("float32")
    x = r2.standard_normal((3, 8)).astype("float32")
    return Model(
        name="multi",
        description="nn.Module with two methods sharing weights: embed(a[2,8], c[2,8], proj.weight[8,8], "
        "proj.bias[8]) -> (proj(a)+c [2,8], relu(a-c)*2 [2,8]) and forward(x[3,8], proj.weight[8,8], "
        "proj.bias[8]) -> relu(proj(x)) [3,8], all f32; 'embed_stateful' runs embed through "
        "set_input/invoke_stateful/get_outputs",
        mod=mod,
        cases=[
            Case("embed", "embed", [a, c] + ws),
            Case("forward", "forward", [x] + ws),
            Case("embed_stateful", "embed", [a, c] + ws, mode="stateful"),
        ],
        numpy_ref=_multi_np,
    )


# ---- ctrl --------------------------------------------------------------------------------


@I.ir_module
class _Ctrl:
    @R.function
    def helper(x: R.Tensor((4, 4), "float32")) -> R.Tensor((4, 4), "float32"):
        y = R.add(x, x)
        z = R.nn.relu(y)
        return z

    @R.function
    def main(cond: R.Tensor((), "bool"), x: R.Tensor((4, 4), "float32")) -> R.Tensor((4, 4), "float32"):
        cls = _Ctrl
        if cond:
            r = cls.helper(x)
        else:
            r = R.multiply(x, x)
        return r


def _ctrl_np(case):
    cond, x = case.inputs
    x = x.astype(np.float64)
    return [np.maximum(2 * x, 0) if bool(cond) else x * x]


def model_ctrl() -> Model:
    seed = 107
    x = rng_for(seed, 1).standard_normal((4, 4)).astype("float32")
    return Model(
        name="ctrl",
        description="Relax control flow: main(cond[] bool, x[4,4] f32) -> [4,4] f32 = "
        "if cond: helper(x) (another Relax function: relu(x+x)) else x*x; "
        "case 'then' has cond=True, case 'else' cond=False",
        mod=_Ctrl,
        cases=[
            Case("then", "main", [np.array(True), x]),
            Case("else", "main", [np.array(False), x]),
        ],
        numpy_ref=_ctrl_np,
    )


# ---- par ---------------------------------------------------------------------------------

PAR_N = 128


@I.ir_module
class _Par:
    @T.prim_func(private=True)
    def mm2(
        A: T.Buffer((128, 128), "float32"),
        B: T.Buffer((128, 128), "float32"),
        C: T.Buffer((128, 128), "float32"),
    ):
        T.func_attr({"tir.noalias": True})
        # 64 KiB intermediate: too big for the stack (> 1024 B), so it goes through
        # TVMBackendAllocWorkspace; the T.parallel loops go through TVMBackendParallelLaunch.
        acc = T.alloc_buffer((128, 128), "float32")
        for i in T.parallel(128):
            for j in range(128):
                acc[i, j] = T.float32(0)
                for k in range(128):
                    acc[i, j] = acc[i, j] + A[i, k] * B[k, j]
        for i in T.parallel(128):
            for j in range(128):
                C[i, j] = acc[i, j] * T.float32(2)

    @R.function
    def main(a: R.Tensor((128, 128), "float32"), b: R.Tensor((128, 128), "float32")) -> R.Tensor(
        (128, 128), "float32"
    ):
        cls = _Par
        c = R.call_tir(cls.mm2, (a, b), out_ty=R.Tensor((128, 128), "float32"))
        return c


def model_par() -> Model:
    seed = 108
    r = rng_for(seed, 1)
    a = r.standard_normal((PAR_N, PAR_N)).astype("float32")
    b = r.standard_normal((PAR_N, PAR_N)).astype("float32")
    return Model(
        name="par",
        description="hand-written TIR kernel 'mm2' with two T.parallel loops and a 64 KiB intermediate "
        "buffer (uses TVMBackendParallelLaunch and TVMBackendAllocWorkspace), called via call_tir: "
        "main(a[128,128], b[128,128]) -> 2*a@b [128,128] f32",
        mod=_Par,
        cases=[Case("main", "main", [a, b])],
        numpy_ref=lambda c: [2.0 * c.inputs[0].astype(np.float64) @ c.inputs[1].astype(np.float64)],
    )


# ---- quant -------------------------------------------------------------------------------

QUANT_ZP = 128  # input zero point
QUANT_MULT = 77  # requantisation multiplier
QUANT_SHIFT = 15  # ... and right shift (with rounding)


@I.ir_module
class _Quant:
    @R.function
    def main(
        x: R.Tensor((4, 16), "uint8"), w: R.Tensor((16, 8), "int8"), bias: R.Tensor((8,), "int32")
    ) -> R.Tensor((4, 8), "int8"):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            xi = R.subtract(R.astype(x, "int32"), R.const(128, "int32"))
            wi = R.astype(w, "int32")
            acc = R.add(R.matmul(xi, wi, out_dtype="int32"), bias)
            scaled = R.multiply(acc, R.const(77, "int32"))
            rounded = R.right_shift(R.add(scaled, R.const(16384, "int32")), R.const(15, "int32"))
            clipped = R.clip(rounded, -128, 127)
            y = R.astype(clipped, "int8")
            R.output(y)
        return y


def _quant_np(x, w, bias):
    acc = (x.astype(np.int64) - QUANT_ZP) @ w.astype(np.int64) + bias
    r = (acc * QUANT_MULT + (1 << (QUANT_SHIFT - 1))) >> QUANT_SHIFT
    return [np.clip(r, -128, 127).astype(np.int8)]


def model_quant() -> Model:
    seed = 109
    r = rng_for(seed, 0)
    w = r.integers(-128, 128, size=(16, 8), dtype=np.int8)
    bias = r.integers(-2000, 2000, size=(8,), dtype=np.int32)
    mod = bind_weights(_Quant, {"w": w, "bias": bias})
    x = rng_for(seed, 1).integers(0, 256, size=(4, 16), dtype=np.uint8)
    return Model(
        name="quant",
        description="integer requantised dense: main(x[4,16] uint8) -> [4,8] int8 = "
        "clip(((x-128) @ w + bias) * 77 + 16384 >> 15, -128, 127) in int32, with w[16,8] int8 and "
        "bias[8] int32 bound as constants; compare exactly",
        mod=mod,
        cases=[Case("main", "main", [x])],
        numpy_ref=lambda c: _quant_np(c.inputs[0], w, bias),
        check_tol=0.0,
    )


# ---- half --------------------------------------------------------------------------------


@I.ir_module
class _Half:
    @R.function
    def main(
        x: R.Tensor((4, 16), "float16"), w: R.Tensor((16, 8), "float16"), b: R.Tensor((8,), "float16")
    ) -> R.Tensor((4, 8), "float16"):
        with R.dataflow():
            y = R.matmul(x, w)
            z = R.add(y, b)
            r = R.nn.relu(z)
            R.output(r)
        return r


def model_half() -> Model:
    seed = 110
    r = rng_for(seed, 1)
    x = r.uniform(-1, 1, size=(4, 16)).astype("float16")
    w = (0.5 * r.standard_normal((16, 8))).astype("float16")
    b = (0.3 + 0.2 * r.standard_normal((8,))).astype("float16")
    return Model(
        name="half",
        description="float16 throughout: main(x[4,16], w[16,8], b[8]) -> relu(x@w+b) [4,8] f16",
        mod=_Half,
        cases=[Case("main", "main", [x, w, b])],
        numpy_ref=lambda c: [
            np.maximum(c.inputs[0].astype(np.float64) @ c.inputs[1].astype(np.float64) + c.inputs[2], 0)
        ],
        check_tol=2e-2,
    )


# ---- raise -------------------------------------------------------------------------------

RAISE_MSG = "mote-zoo: first element must be non-negative"


@I.ir_module
class _Raise:
    @T.prim_func(private=True)
    def checked_scale(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        T.func_attr({"tir.noalias": True})
        assert A[0] >= T.float32(0), "mote-zoo: first element must be non-negative"
        for i in range(8):
            B[i] = A[i] * T.float32(3)

    @R.function
    def main(x: R.Tensor((8,), "float32")) -> R.Tensor((8,), "float32"):
        cls = _Raise
        y = R.call_tir(cls.checked_scale, (x,), out_ty=R.Tensor((8,), "float32"))
        return y


def model_raise() -> Model:
    seed = 111
    good = np.abs(rng_for(seed, 1).standard_normal(8)).astype("float32")
    bad = rng_for(seed, 2).standard_normal(8).astype("float32")
    bad[0] = -abs(bad[0]) - 0.5
    return Model(
        name="raise",
        description="TIR kernel 'checked_scale' with an assert on the first input element, called via "
        "call_tir: main(x[8] f32) -> 3*x [8] f32; case 'ok' passes, case 'negative' (x[0] < 0) makes "
        f"the generated code raise RuntimeError '{RAISE_MSG}'",
        mod=_Raise,
        cases=[
            Case("ok", "main", [good]),
            Case("negative", "main", [bad], expect_error=RAISE_MSG),
        ],
        numpy_ref=lambda c: [3.0 * c.inputs[0].astype(np.float64)],
    )


PACKED_FN = "mote.zoo.scale_shift"


@tvm.register_global_func(PACKED_FN)
def _scale_shift(src, dst, n):
    """dst[i] = 2 * src[i] + 1 on raw float32 pointers (what the kernel passes). Mote's tests
    register their own implementation under the same name."""
    addr = lambda p: p if isinstance(p, int) else (p.value or 0)  # noqa: E731
    a = (ctypes.c_float * n).from_address(addr(src))
    b = (ctypes.c_float * n).from_address(addr(dst))
    for i in range(n):
        b[i] = a[i] * 2.0 + 1.0


@I.ir_module
class _Packed:
    @T.prim_func(private=True)
    def via_packed(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        T.func_attr({"tir.noalias": True})
        T.evaluate(T.call_packed("mote.zoo.scale_shift", A.data, B.data, 8))

    @R.function
    def main(x: R.Tensor((8,), "float32")) -> R.Tensor((8,), "float32"):
        cls = _Packed
        y = R.call_tir(cls.via_packed, (x,), out_ty=R.Tensor((8,), "float32"))
        return y


def model_packed() -> Model:
    x = rng_for(121, 1).standard_normal(8).astype("float32")
    return Model(
        name="packed",
        description=f"TIR kernel 'via_packed' calling the global function '{PACKED_FN}' through "
        "T.call_packed (env-function lookup, HandleInitOnce, FunctionCall): main(x[8] f32) -> 2x+1; "
        "the runtime must provide the function (Python here, registered in Rust by Mote's tests)",
        mod=_Packed,
        cases=[Case("main", "main", [x])],
        numpy_ref=lambda c: [2.0 * c.inputs[0].astype(np.float64) + 1.0],
    )


# ---- gemm, kernels: kernel-only libraries ------------------------------------------------
#
# A TIR module compiled on its own (tvm.compile(tir_mod, target="llvm").export_library) has
# __tvm_ffi_<name> kernel symbols but no __tvm_ffi__library_bin blob. TVM runs it as
# lib["gemm"](a, b, c): destination-passing, the caller allocates the output `c`.

GEMM_M, GEMM_K, GEMM_N = 64, 32, 48


@I.ir_module
class _Gemm:
    @T.prim_func
    def gemm(
        A: T.Buffer((64, 32), "float32"),
        B: T.Buffer((32, 48), "float32"),
        C: T.Buffer((64, 48), "float32"),
    ):
        T.func_attr({"tir.noalias": True})
        # T.parallel: the kernel goes through the __TVMBackendParallelLaunch slot.
        for i in T.parallel(64):
            for j in range(48):
                C[i, j] = T.float32(0)
                for k in range(32):
                    C[i, j] = C[i, j] + A[i, k] * B[k, j]


@I.ir_module
class _Kernels:
    @T.prim_func
    def gemm(
        A: T.Buffer((64, 32), "float32"),
        B: T.Buffer((32, 48), "float32"),
        C: T.Buffer((64, 48), "float32"),
    ):
        T.func_attr({"tir.noalias": True})
        for i, j in T.grid(64, 48):
            C[i, j] = T.float32(0)
            for k in range(32):
                C[i, j] = C[i, j] + A[i, k] * B[k, j]

    @T.prim_func
    def scaled_gemm(
        A: T.Buffer((64, 32), "float32"),
        B: T.Buffer((32, 48), "float32"),
        alpha: T.float32,
        C: T.Buffer((64, 48), "float32"),
    ):
        T.func_attr({"tir.noalias": True})
        # A 12 KiB intermediate (a workspace allocation) and two parallel loops.
        acc = T.alloc_buffer((64, 48), "float32")
        for i in T.parallel(64):
            for j in range(48):
                acc[i, j] = T.float32(0)
                for k in range(32):
                    acc[i, j] = acc[i, j] + A[i, k] * B[k, j]
        for i in T.parallel(64):
            for j in range(48):
                C[i, j] = acc[i, j] * alpha

    @T.prim_func
    def shift(X: T.Buffer((16,), "int32"), n: T.int32, Y: T.Buffer((16,), "int32")):
        T.func_attr({"tir.noalias": True})
        for i in range(16):
            Y[i] = X[i] + n


def _nan_buffer(shape) -> np.ndarray:
    return np.full(shape, np.nan, dtype="float32")


def _gemm_np(case: Case) -> list:
    a, b = case.inputs[0].astype(np.float64), case.inputs[1].astype(np.float64)
    if case.function == "scaled_gemm":
        return [float(case.inputs[2]) * (a @ b)]
    if case.function == "shift":
        return [case.inputs[0].astype(np.int64) + int(case.inputs[1])]
    return [a @ b]


def model_gemm() -> Model:
    seed = 131
    r = rng_for(seed, 1)
    a = r.standard_normal((GEMM_M, GEMM_K)).astype("float32")
    b = r.standard_normal((GEMM_K, GEMM_N)).astype("float32")
    c = _nan_buffer((GEMM_M, GEMM_N))
    return Model(
        name="gemm",
        kind="kernels",
        description="kernel-only library (TIR module, no Relax, no module blob): one kernel "
        "gemm(A[64,32], B[32,48], C[64,48]) f32, C = A @ B with a T.parallel loop, and the weak "
        "alias __tvm_ffi_main TVM emits for a single kernel; cases call gemm and main with a NaN "
        "output buffer, then the wrong arity and a wrong shape, which the kernel's own checks raise",
        mod=_Gemm,
        cases=[
            Case("gemm", "gemm", [a, b, c], mode="kernel", outputs=[2]),
            Case("main", "main", [a, b, c], mode="kernel", outputs=[2]),
            Case("arity", "gemm", [a, b], mode="kernel", expect_error="Expected 3 arguments"),
            Case(
                "shape", "gemm", [a[:63].copy(), b, c], mode="kernel",
                expect_error="Invalid A.shape[0] on argument #0",
            ),
        ],
        numpy_ref=lambda c: [c.inputs[0].astype(np.float64) @ c.inputs[1].astype(np.float64)],
    )


def model_kernels() -> Model:
    seed = 132
    r = rng_for(seed, 1)
    a = r.standard_normal((GEMM_M, GEMM_K)).astype("float32")
    b = r.standard_normal((GEMM_K, GEMM_N)).astype("float32")
    x = r.integers(-1000, 1000, size=(16,), dtype=np.int32)
    return Model(
        name="kernels",
        kind="kernels",
        description="kernel-only library with three kernels and so no main alias: "
        "gemm(A[64,32], B[32,48], C[64,48]) f32; scaled_gemm(A, B, alpha: float32, C) = alpha * A @ B "
        "through a 12 KiB workspace intermediate and two T.parallel loops; "
        "shift(X[16] i32, n: int32, Y[16] i32) = X + n; scalars are stored as 0-d arrays",
        mod=_Kernels,
        cases=[
            Case("gemm", "gemm", [a, b, _nan_buffer((GEMM_M, GEMM_N))], mode="kernel", outputs=[2]),
            Case(
                "scaled_gemm", "scaled_gemm",
                [a, b, np.array(-0.75, dtype="float32"), _nan_buffer((GEMM_M, GEMM_N))],
                mode="kernel", outputs=[3], scalars=[2],
            ),
            Case(
                "shift", "shift",
                [x, np.array(12345, dtype="int32"), np.full((16,), -559038737, dtype="int32")],
                mode="kernel", outputs=[2], scalars=[1],
            ),
        ],
        numpy_ref=_gemm_np,
    )


MODELS: list[Callable[[], Model]] = [
    model_mlp,
    model_cnn,
    model_mobilenet_block,
    model_transformer,
    model_mlp_dyn,
    model_multi,
    model_ctrl,
    model_par,
    model_quant,
    model_half,
    model_raise,
    model_packed,
    model_gemm,
    model_kernels,
]

# Also built as system libraries (statically linked models, docs/system-lib.md): a few small
# models, enough for a plain model, bound constants, two functions, parallel loops with a
# workspace (par) and a kernel that raises (raise), so that CI time stays small.
SYSTEM_LIB_MODELS = ("mlp", "cnn", "multi", "par", "raise")

# --------------------------------------------------------------------------------------
# Building, running, recording
# --------------------------------------------------------------------------------------

def tolerance(dtype: str, arch: str, loosen: float) -> dict:
    if dtype == "float32":
        t = 1e-5 if arch == "x86_64" else 1e-4 * loosen
        return {"rtol": t, "atol": t}
    if dtype == "float16":
        return {"rtol": 1e-2, "atol": 1e-2}
    if dtype == "float64":
        t = 1e-9 if arch == "x86_64" else 1e-8 * loosen
        return {"rtol": t, "atol": t}
    if dtype.startswith(("int", "uint", "bool")):
        return {"rtol": 0.0, "atol": 0.0}
    raise ValueError(f"no tolerance rule for dtype {dtype}")


def check_signature(mod: tvm.IRModule, case: Case, model: str):
    """Inputs must match the Relax function's parameters (count, dtype, static dims)."""
    func = mod[case.function]
    params = list(func.params)
    where = f"{model}.{case.case}"
    if len(params) != len(case.inputs):
        raise ValueError(f"{where}: {len(case.inputs)} inputs for {len(params)} parameters")
    for i, (p, arr) in enumerate(zip(params, case.inputs)):
        si = p.ty  # relax.TensorType in TVM 0.27 (struct_info in older releases)
        if not isinstance(si, relax.TensorType):
            raise ValueError(f"{where}: parameter {i} ({p.name}) is not a tensor")
        if str(si.dtype) != str(arr.dtype):
            raise ValueError(f"{where}: arg{i} ({p.name}) dtype {arr.dtype}, expected {si.dtype}")
        if si.ndim != arr.ndim:
            raise ValueError(f"{where}: arg{i} ({p.name}) ndim {arr.ndim}, expected {si.ndim}")
        if si.shape is not None:
            for d, (want, got) in enumerate(zip(si.shape.values, arr.shape)):
                if hasattr(want, "value") and int(want.value) != got:
                    raise ValueError(f"{where}: arg{i} ({p.name}) dim {d} is {got}, expected {want}")


def run_case(vm, case: Case):
    """Run one case in TVM: `vm` is a relax.VirtualMachine, or for "kernel" cases the loaded
    kernel library itself, whose kernels are called as lib[name](args...)."""
    dev = tvm.cpu(0)
    if case.mode == "kernel":
        args = [a.item() if i in case.scalars else tvm.runtime.tensor(a, dev) for i, a in enumerate(case.inputs)]
        result = vm[case.function](*args)
        if result is not None:
            raise RuntimeError(f"kernel {case.function} returned {result!r}, expected None")
        return [args[i] for i in case.outputs]
    args = [tvm.runtime.tensor(a, dev) for a in case.inputs]
    if case.mode == "call":
        return vm[case.function](*args)
    if case.mode == "stateful":
        vm.set_input(case.function, *args)
        vm.invoke_stateful(case.function)
        return vm.get_outputs(case.function)
    raise ValueError(f"unknown mode {case.mode}")


def dynamic_symbols(path: str, defined: bool = False) -> set[str]:
    cmd = ["nm", "-D"] + (["--defined-only"] if defined else []) + [path]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in res.stdout.splitlines() if line.split()}


def object_symbols(path: str, undefined: bool) -> set[str]:
    """Undefined symbols of an object (nm -u), or its defined global ones."""
    cmd = ["nm", "-u" if undefined else "--defined-only", path]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in res.stdout.splitlines() if line.split()}


def export_system_lib(model: Model, arch: str, out_dir: str, scratch: str) -> dict:
    """Build `model` as a system library with prefix NAME_ into OUT/syslib/NAME.tar and check
    what the objects define and need."""
    name, prefix = model.name, f"{model.name}_"
    ex = tvm.compile(model.mod.with_attr("system_lib_prefix", prefix), target=target_for(arch))
    os.makedirs(os.path.join(out_dir, "syslib"), exist_ok=True)
    archive = f"syslib/{name}.tar"
    ex.export_library(os.path.join(out_dir, archive))
    objdir = os.path.join(scratch, f"{name}.syslib")
    with tarfile.open(os.path.join(out_dir, archive)) as tf:
        members = sorted(tf.getnames())
        if members != sorted(["lib0.o", f"{prefix}devc.o"]):
            raise RuntimeError(f"{archive}: expected lib0.o and {prefix}devc.o, found {members}")
        tf.extractall(objdir)
    undefined = sorted(object_symbols(os.path.join(objdir, "lib0.o"), undefined=True))
    blob = object_symbols(os.path.join(objdir, f"{prefix}devc.o"), undefined=False)
    if "TVMFFIEnvModRegisterSystemLibSymbol" not in undefined or f"{prefix}__tvm_ffi__library_bin" not in blob:
        raise RuntimeError(f"{archive}: not a system library ({undefined}, {sorted(blob)})")
    if name == "par" and not {"TVMBackendParallelLaunch", "TVMBackendAllocWorkspace"} <= set(undefined):
        raise RuntimeError(f"{archive}: par's kernel does not call the parallel launch and workspace directly")
    return {"prefix": prefix, "archive": archive, "undefined": undefined}


def export_compiled(model: Model, arch: str, out_dir: str, scratch: str, bytecode_outputs: dict) -> dict:
    """Build `model` with exec_mode="compiled" into OUT/compiled/NAME.so (aarch64: NAME.tar, and
    an x86_64 build in `scratch` for the check), run its cases in TVM on the x86_64 build and
    check they give exactly what the bytecode build gave (`bytecode_outputs`: case name to
    flattened outputs, or to the error kind for a case that raises)."""
    name = model.name
    os.makedirs(os.path.join(out_dir, "compiled"), exist_ok=True)
    rel = f"compiled/{name}.so"
    if arch == "x86_64":
        path = os.path.join(out_dir, rel)
    else:
        ex = relax.build(model.mod, target=target_for(arch), exec_mode="compiled")
        ex.export_library(os.path.join(out_dir, f"compiled/{name}.tar"))
        path = os.path.join(scratch, f"{name}.compiled.so")
    relax.build(model.mod, target=HOST_TARGET, exec_mode="compiled").export_library(path)
    syms = dynamic_symbols(path)
    if not any(s.startswith("__tvm_ffi___vmtir__") for s in syms):
        raise RuntimeError(f"{path}: no __vmtir__ function; not a compiled-mode build")
    vm = relax.VirtualMachine(tvm.runtime.load_module(path), tvm.cpu(0))
    for case in model.cases:
        want = bytecode_outputs[case.case]
        if case.expect_error is not None:
            try:
                run_case(vm, case)
            except Exception as err:  # noqa: BLE001 - TVM raises several Python error types
                if case.expect_error not in str(err):
                    raise RuntimeError(f"{rel} {case.case}: TVM raised {err!r}") from err
            else:
                raise RuntimeError(f"{rel} {case.case}: expected TVM to raise")
            continue
        got = flatten_outputs(run_case(vm, case))
        if len(got) != len(want) or any(
            g.dtype != w.dtype or g.shape != w.shape or g.tobytes() != w.tobytes() for g, w in zip(got, want)
        ):
            raise RuntimeError(f"{rel} {case.case}: TVM's compiled build disagrees with its bytecode build")
    undefined = sorted(s for s in dynamic_symbols(path) - dynamic_symbols(path, defined=True) if s.startswith("TVM"))
    return {"file": rel, "undefined": undefined}


def build_model(model: Model, arch: str, out_dir: str, scratch: str) -> dict:
    t0 = time.time()
    name = model.name
    kernel_lib = model.kind == "kernels"
    for case in model.cases:
        if kernel_lib != (case.mode == "kernel"):
            raise ValueError(f"{name}.{case.case}: mode {case.mode} in a model of kind {model.kind}")
        if not kernel_lib:
            check_signature(model.mod, case, name)

    # Target build (and, for aarch64, a reference build for the host in scratch space).
    entry = {"name": name, "file": f"{name}.so", "description": model.description, "kind": model.kind}
    host_lib, obj = export_model(model.mod, arch, name, entry, out_dir, scratch, kernels_only=kernel_lib)
    t_compile = time.time() - t0

    # Kernel names: from the aarch64 object, else from the host library (same kernels).
    kernels = kernel_names(obj, dynamic=False) if obj else None
    if not kernels:
        kernels = kernel_names(host_lib, dynamic=True)
    if kernels is not None:
        entry["kernels"] = kernels

    if name == "par":
        syms = dynamic_symbols(host_lib)
        for need in ("__TVMBackendParallelLaunch", "__TVMBackendAllocWorkspace"):
            if need not in syms:
                raise RuntimeError(f"par: {host_lib} lacks the {need} slot")

    if name in SYSTEM_LIB_MODELS:
        entry["system_lib"] = export_system_lib(model, arch, out_dir, scratch)

    if kernel_lib:
        # What a kernel-only library exports, as binutils reads it (an oracle for Mote's own
        # reading of the dynamic symbol table): every defined __tvm_ffi_<name> function, the
        # weak __tvm_ffi_main alias included, and no module blob.
        syms = dynamic_symbols(host_lib, defined=True)
        if "__tvm_ffi__library_bin" in syms:
            raise RuntimeError(f"{name}: a kernel-only export has a module blob")
        entry["functions"] = sorted(
            s[len("__tvm_ffi_"):] for s in syms if s.startswith("__tvm_ffi_") and not s.startswith("__tvm_ffi__")
        )

    # Oracle: TVM's VM on the host build (a kernel-only library is called directly).
    lib = tvm.runtime.load_module(host_lib)
    vm = lib if kernel_lib else relax.VirtualMachine(lib, tvm.cpu(0))
    cases_out = []
    bytecode_outputs = {}
    for case in model.cases:
        stem = f"{name}.{case.case}"
        rec = case_record(out_dir, stem, case.case, case.function, case.inputs, case.mode, case.expect_error)
        if kernel_lib:
            rec["outputs"] = case.outputs
            rec["scalars"] = case.scalars
        if case.expect_error is not None:
            try:
                run_case(vm, case)
            except Exception as err:  # noqa: BLE001 - TVM raises several Python error types
                msg = str(err)
                if case.expect_error not in msg:
                    raise RuntimeError(
                        f"{stem}: TVM raised {type(err).__name__} {msg!r}, which lacks {case.expect_error!r}"
                    ) from err
                rec["error_kind"] = type(err).__name__
            else:
                raise RuntimeError(f"{stem}: expected TVM to raise {case.expect_error!r}, but it returned")
            rec["output_dtypes"] = []
            rec["output_shapes"] = []
            rec["tolerance"] = None
            bytecode_outputs[case.case] = rec["error_kind"]
        else:
            outs = flatten_outputs(run_case(vm, case))
            bytecode_outputs[case.case] = outs
            if case.mode == "stateful":
                # The stateful path must agree with a plain call.
                plain = flatten_outputs(vm[case.function](*[tvm.runtime.tensor(a) for a in case.inputs]))
                if len(plain) != len(outs) or any(not np.array_equal(p, o) for p, o in zip(plain, outs)):
                    raise RuntimeError(f"{stem}: stateful and plain invocation disagree")
            if model.numpy_ref is not None:
                ref = model.numpy_ref(case)
                if len(ref) != len(outs):
                    raise RuntimeError(f"{stem}: numpy check has {len(ref)} outputs, TVM {len(outs)}")
                for i, (o, r) in enumerate(zip(outs, ref)):
                    if o.shape != r.shape or not np.allclose(
                        o.astype(np.float64), r, rtol=model.check_tol, atol=model.check_tol
                    ):
                        err = np.max(np.abs(o.astype(np.float64) - r)) if o.shape == r.shape else "shape"
                        raise RuntimeError(f"{stem}: TVM out{i} disagrees with the numpy check ({err})")
            record_outputs(rec, out_dir, stem, outs, lambda dt: tolerance(dt, arch, model.aarch64_loosen))
        cases_out.append(rec)
    entry["cases"] = cases_out
    if not kernel_lib:
        entry["compiled"] = export_compiled(model, arch, out_dir, scratch, bytecode_outputs)
    dt = time.time() - t0

    made = entry.get("archive", entry["file"])
    size = os.path.getsize(os.path.join(out_dir, made))
    print(
        f"zoo[{arch}]: {name:16s} {made:22s} {size:8d} B  {len(kernels or []):2d} kernels  "
        f"{len(cases_out)} case(s): {', '.join(c['case'] for c in cases_out)}  "
        f"(compile {t_compile:.1f}s, total {dt:.1f}s)",
        file=sys.stderr,
        flush=True,
    )
    return entry


def main(argv=None) -> int:
    args = parse_args(__doc__, "comma-separated model names (default: all)", argv)
    only = args.only
    builders = MODELS
    t0 = time.time()
    manifest = {"tvm_version": tvm.__version__, "target": args.target, "models": []}
    with tempfile.TemporaryDirectory(prefix="mote-zoo-host-") as scratch:
        for make in builders:
            model = make()
            if only and model.name not in only:
                continue
            manifest["models"].append(build_model(model, args.target, args.out, scratch))
    if only and len(manifest["models"]) != len(only):
        found = {m["name"] for m in manifest["models"]}
        raise SystemExit(f"zoo.py: unknown model(s): {sorted(only - found)}")
    write_manifest(args.out, manifest)
    print(
        f"zoo[{args.target}]: {len(manifest['models'])} models in {time.time() - t0:.1f}s -> {args.out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Build Mote's offload test zoo: small Relax models partitioned by mote_tvm (ACL and BNNS flavours).

    python offload_zoo.py --target x86_64  --out DIR    # DIR/NAME.so
    python offload_zoo.py --target aarch64 --out DIR    # DIR/NAME.tar (lib0.o + devc.o; link them yourself)

Each model is written unpartitioned, with seeded random weights bound as constants, then
partitioned with ``mote_tvm.partition_for_acl`` / ``partition_for_bnns``; NAME is
``<model>_<flavour>``.  The exported library is the PARTITIONED module: its offloaded regions
are calls to the packed function ``mote.subgraph`` (docs/subgraph-format.md, versions 1 to 3) that the
runtime must provide.  Models whose input has a symbolic dimension (dense_dyn, onnx_encoder_dyn:
version-3 descriptions naming it) are recorded with several cases, one per length, each with
its own NAME.CASE.inputs.npz / NAME.CASE.expected.npz; the others with one case, ``main``.
Such a model is never code-free: TVM sizes the tensors it allocates in a compiled host
function, ``shape_func``, which ``mote_tvm.tvm_residue`` reports.

Oracle: TVM's own ``relax.VirtualMachine`` running an x86_64 build of the UNPARTITIONED model on
fixed, seeded inputs (each case's).  Second check, done here and fatal on failure: TVM's VM running the
partitioned host build with the numpy reference (``mote_tvm.reference``) registered as
``mote.subgraph`` must agree with the oracle (float32: 1e-4 rel/abs; quantized: 1 LSB).

Output layout: as python/zoo.py (manifest.json, NAME.so|NAME.tar, NAME.CASE.inputs.npz,
NAME.CASE.expected.npz); the manifest adds ``format_doc_version`` and, per model,
``partition`` ("acl"|"bnns"), ``subgraphs`` (number of mote.subgraph calls) and
``subgraph_ops`` (the op names of each call's nodes) and ``code_free`` (true when the library
calls no TVM kernel: every operator offloaded or a VM builtin, docs/code-free.md).  Code-free
models are exported as NAME.tar as well on x86_64 (``archive``; what TVM writes then is
lib0.c + devc.c, the module blob as a C array), so Mote's code-free loader is tested on both
containers.  Third check, fatal: ``mote_tvm.tvm_residue`` (what the partitioners'
``code_free`` option reports) is empty exactly when the export has no TVM kernel, and
``code_free="require"`` raises ``NotCodeFree`` exactly then.  Progress goes to stderr.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tvm  # noqa: E402
from tvm import relax  # noqa: E402
from tvm.script import ir as I  # noqa: E402
from tvm.script import relax as R  # noqa: E402

import mote_tvm  # noqa: E402
from mote_tvm.partition import FORMAT_VERSION  # noqa: E402
from mote_tvm.reference import needs_version_2  # noqa: E402
from zoo_common import HOST_TARGET, case_record, export_model, flatten_outputs, kernel_names  # noqa: E402
from zoo_common import parse_args, record_outputs, rng_for, write_manifest  # noqa: E402

F32_TOL = {"rtol": 1e-4, "atol": 1e-4}  # docs/subgraph-format.md "Numerics"
Q_TOL = {"rtol": 0.0, "atol": 1.0}  # 1 LSB


@dataclass
class OModel:
    name: str
    description: str
    mod: tvm.IRModule  # unpartitioned, weights bound as constants
    inputs: list  # numpy arrays for "main"
    flavours: tuple = ("acl", "bnns")
    quantized: bool = False
    min_subgraphs: int = 1
    mixed: bool = False  # some ops must stay TVM kernels next to the subgraph calls
    expect_ops: tuple = ()  # op names that must appear in the descriptions (every flavour)
    code_free: tuple = ()  # flavours that must come out code-free (no TVM kernel at all)
    # Per flavour, the only ops allowed to stay in TVM (e.g. ACL's layout transposes at the one
    # region's edge): {"acl": ("relax.permute_dims",)} asserts that everything else is offloaded.
    residue_only: dict | None = None
    absent_ops: tuple = ()  # op names that must NOT appear in any description (e.g. folded BN)
    max_subgraphs: int | None = None
    # Activation name -> how many nodes of every flavour's descriptions must carry it (fused or
    # standalone).
    expect_activations: dict = field(default_factory=dict)
    # (case name, inputs) to record, each checked against the oracle on its own; None: one case
    # "main" with `inputs`.  A model with a symbolic input dimension runs at several lengths.
    cases: list | None = None
    symbolic: bool = False  # every description must name a symbolic dimension (version 3)

    def all_cases(self) -> list:
        return self.cases if self.cases is not None else [("main", self.inputs)]


def f32(a):
    return np.asarray(a, dtype="float32")


def normal(r, shape, scale=1.0):
    return f32(scale * r.standard_normal(shape))


def kaiming(r, shape):
    fan_in = int(np.prod(shape[1:]))
    return normal(r, shape, 1.0 / np.sqrt(fan_in))


# What stays in TVM when every operator of a model with a symbolic dimension is offloaded: the
# host function that sizes the tensors TVM allocates (mote_tvm.tvm_residue), so such a model is
# never code-free.
_SYMBOLIC_RESIDUE = {"acl": ("shape_func",), "bnns": ("shape_func",)}


# --------------------------------------------------------------------------------------------
# Single-composite models
# --------------------------------------------------------------------------------------------


def m_conv_pad_bias_relu():
    r = rng_for(201, 0)
    w, b = kaiming(r, (8, 3, 3, 3)), normal(r, (1, 8, 1, 1), 0.1)

    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((1, 3, 8, 8), "float32")):
            with R.dataflow():
                p = R.nn.pad(x, [0, 0, 0, 0, 1, 1, 1, 1])
                c = R.nn.conv2d(p, R.const(w))
                a = R.add(c, R.const(b))
                y = R.nn.relu(a)
                R.output(y)
            return y

    return OModel("conv_pad_bias_relu", "nn.pad(1) -> conv2d 3->8 3x3 -> + bias[1,8,1,1] -> relu; "
                  "x[1,3,8,8] -> [1,8,8,8] f32 (one conv2d node: pad folded, bias and relu fused)",
                  M, [normal(rng_for(201, 1), (1, 3, 8, 8))], expect_ops=("conv2d",))


def m_conv_s2_relu6():
    r = rng_for(202, 0)
    w, b = kaiming(r, (8, 4, 3, 3)), normal(r, (8, 1, 1), 0.5)

    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((1, 4, 9, 9), "float32")):
            with R.dataflow():
                c = R.nn.conv2d(x, R.const(w), strides=[2, 2], padding=[1, 1, 1, 1])
                a = R.add(c, R.const(b))
                y = R.nn.relu6(a)
                R.output(y)
            return y

    return OModel("conv_s2_relu6", "conv2d 4->8 3x3 stride 2 pad 1 + bias[8,1,1] + relu6 (clip 0..6); "
                  "x[1,4,9,9] -> [1,8,5,5] f32", M, [normal(rng_for(202, 1), (1, 4, 9, 9), 3.0)],
                  expect_ops=("conv2d",))


def m_conv_dil_clip():
    r = rng_for(203, 0)
    w = kaiming(r, (6, 4, 3, 3))

    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((1, 4, 10, 10), "float32")):
            with R.dataflow():
                c = R.nn.conv2d(x, R.const(w), dilation=[2, 2], padding=[2, 1, 2, 1])
                y = R.clip(c, -0.5, 0.75)
                R.output(y)
            return y

    return OModel("conv_dil_clip", "conv2d 4->6 3x3 dilation 2, asymmetric padding (2,1,2,1), no bias, "
                  "clip(-0.5, 0.75) fused as {\"clip\": [lo, hi]}; x[1,4,10,10] -> [1,6,10,8] f32",
                  M, [normal(rng_for(203, 1), (1, 4, 10, 10))], expect_ops=("conv2d",))


def m_dwconv():
    r = rng_for(204, 0)
    w, b = normal(r, (8, 1, 3, 3), 0.8), normal(r, (1, 8, 1, 1), 0.3)

    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((1, 8, 8, 8), "float32")):
            with R.dataflow():
                c = R.nn.conv2d(x, R.const(w), groups=8, padding=[1, 1, 1, 1])
                a = R.add(c, R.const(b))
                y = R.nn.relu6(a)
                R.output(y)
            return y

    return OModel("dwconv", "depthwise conv2d 3x3 (groups = C = 8, pad 1) + bias + relu6; x[1,8,8,8] -> "
                  "[1,8,8,8] f32", M, [normal(rng_for(204, 1), (1, 8, 8, 8), 2.0)], expect_ops=("conv2d",))


def m_dwconv_mult2():
    r = rng_for(205, 0)
    w = normal(r, (8, 1, 3, 3), 0.8)

    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((1, 4, 7, 7), "float32")):
            with R.dataflow():
                y = R.nn.conv2d(x, R.const(w), groups=4, strides=[2, 2], padding=[1, 1, 1, 1])
                R.output(y)
            return y

    return OModel("dwconv_mult2", "depthwise conv2d 3x3 with depth multiplier 2 (C=4, groups=4, O=8), "
                  "stride 2, pad 1, no bias; x[1,4,7,7] -> [1,8,4,4] f32", M,
                  [normal(rng_for(205, 1), (1, 4, 7, 7))], expect_ops=("conv2d",))


def _qconv_module(xdt, xzp, wq, ws, wzp, bq, sx, so, ozp, act):
    """dequantize -> conv2d(dequantize(w)) -> + dequantize(int32 bias) -> act -> quantize."""
    n_out = wq.shape[0]
    per_channel = np.ndim(ws) > 0 and np.size(ws) > 1
    ws_c = R.const(f32(ws)) if per_channel else R.const(float(ws), "float32")
    wzp_c = R.const(np.full(n_out, wzp, "int32")) if per_channel else R.const(int(wzp), "int32")
    bscale = f32(np.broadcast_to(sx * np.asarray(ws, np.float64), (n_out,)))
    c_shape = (1, wq.shape[1], 8, 8)

    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor(c_shape, xdt)):
            with R.dataflow():
                xf = R.dequantize(x, R.const(sx, "float32"), R.const(xzp, "int32"), axis=1)
                wf = R.dequantize(R.const(wq), ws_c, wzp_c, axis=0)
                c = R.nn.conv2d(xf, wf, padding=[1, 1, 1, 1])
                bf = R.dequantize(R.const(bq), R.const(bscale), R.const(np.zeros(n_out, "int32")), axis=0)
                a = R.add(c, R.reshape(bf, (1, n_out, 1, 1)))
                y = R.nn.relu(a) if act == "relu" else R.clip(a, 0, 6)
                q = R.quantize(y, R.const(so, "float32"), R.const(ozp, "int32"), axis=1, out_dtype=xdt)
                R.output(q)
            return q

    return M


def m_qconv_uint8():
    r = rng_for(206, 0)
    wq = r.integers(0, 256, (8, 4, 3, 3)).astype("uint8")
    bq = r.integers(-3000, 3000, 8).astype("int32")
    mod = _qconv_module("uint8", 128, wq, 0.004, 120, bq, 0.05, 0.05, 10, "relu")
    x = rng_for(206, 1).integers(0, 256, (1, 4, 8, 8)).astype("uint8")
    return OModel("qconv_uint8", "QDQ conv2d, uint8 data (scale 0.05, zp 128), uint8 weights per tensor "
                  "(scale 0.004, zp 120), int32 bias at s_x*s_w, relu, requantized to uint8 (0.05, zp 10); "
                  "x[1,4,8,8] u8 -> [1,8,8,8] u8", mod, [x], flavours=("acl",), quantized=True,
                  expect_ops=("conv2d",))


def m_qconv_int8():
    r = rng_for(207, 0)
    wq = r.integers(-127, 128, (8, 4, 3, 3)).astype("int8")
    ws = 0.002 + 0.004 * r.random(8)
    bq = r.integers(-3000, 3000, 8).astype("int32")
    mod = _qconv_module("int8", -5, wq, ws, 0, bq, 0.04, 0.03, -20, "relu6")
    x = rng_for(207, 1).integers(-128, 128, (1, 4, 8, 8)).astype("int8")
    return OModel("qconv_int8", "QDQ conv2d, int8 data (scale 0.04, zp -5), int8 weights per channel "
                  "(axis 0, zp 0), int32 bias, relu6 in real units, requantized to int8 (0.03, zp -20); "
                  "x[1,4,8,8] i8 -> [1,8,8,8] i8", mod, [x], flavours=("acl",), quantized=True,
                  expect_ops=("conv2d",))


def m_qdense_int8():
    r = rng_for(208, 0)
    wq = r.integers(-127, 128, (8, 16)).astype("int8")  # [N, K] as nn.Linear stores it
    bq = r.integers(-2000, 2000, 8).astype("int32")
    sx, sw, so = 0.05, 0.01, 0.08

    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((2, 16), "int8")):
            with R.dataflow():
                xf = R.dequantize(x, R.const(sx, "float32"), R.const(3, "int32"))
                wf = R.dequantize(R.const(wq), R.const(sw, "float32"), R.const(0, "int32"))
                m = R.matmul(xf, R.permute_dims(wf))
                bf = R.dequantize(R.const(bq), R.const(sx * sw, "float32"), R.const(0, "int32"))
                a = R.add(m, bf)
                q = R.quantize(a, R.const(so, "float32"), R.const(0, "int32"), out_dtype="int8")
                R.output(q)
            return q

    x = rng_for(208, 1).integers(-128, 128, (2, 16)).astype("int8")
    return OModel("qdense_int8", "QDQ dense: int8 x[2,16] (0.05, zp 3) @ int8 W[8,16]^T (0.01) + int32 bias, "
                  "requantized to int8 (0.08, zp 0) -> [2,8] i8", M, [x], flavours=("acl",), quantized=True,
                  expect_ops=("dense",))


def m_max_pool():
    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((1, 4, 9, 9), "float32")):
            with R.dataflow():
                y = R.nn.max_pool2d(x, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1])
                R.output(y)
            return y

    return OModel("max_pool", "max_pool2d 3x3 stride 2 pad 1; x[1,4,9,9] -> [1,4,5,5] f32", M,
                  [normal(rng_for(209, 1), (1, 4, 9, 9))], expect_ops=("max_pool2d",))


def m_avg_pool():
    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((1, 4, 9, 9), "float32")):
            with R.dataflow():
                a = R.nn.avg_pool2d(x, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1],
                                    count_include_pad=False)
                b = R.nn.avg_pool2d(x, pool_size=[2, 2], strides=[2, 2], padding=[0, 0, 1, 1],
                                    count_include_pad=True)
                R.output(a, b)
            return (a, b)

    return OModel("avg_pool", "two avg_pool2d over x[1,4,9,9]: 3x3 s2 pad 1 excluding padding -> [1,4,5,5], "
                  "and 2x2 s2 bottom/right pad 1 including padding -> [1,4,5,5]; two outputs (one call, "
                  "two destination tensors)", M, [normal(rng_for(210, 1), (1, 4, 9, 9))],
                  expect_ops=("avg_pool2d",))


def m_global_pools():
    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((1, 6, 5, 5), "float32")):
            with R.dataflow():
                a = R.nn.adaptive_avg_pool2d(x, output_size=[1, 1])
                b = R.mean(x, axis=[2, 3], keepdims=False)
                c = R.max(x, axis=[2, 3], keepdims=True)
                R.output(a, b, c)
            return (a, b, c)

    return OModel("global_pools", "global pooling three ways over x[1,6,5,5]: adaptive_avg_pool2d(1x1) "
                  "-> [1,6,1,1], mean over H,W -> [1,6] (global_avg_pool2d + reshape), max over H,W keepdims "
                  "-> [1,6,1,1]; three outputs", M, [normal(rng_for(211, 1), (1, 6, 5, 5))],
                  expect_ops=("global_avg_pool2d", "global_max_pool2d"))


def m_dense_bias_relu():
    r = rng_for(212, 0)
    w, b = kaiming(r, (12, 16)), normal(r, (12,), 0.1)

    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((3, 16), "float32")):
            with R.dataflow():
                m = R.matmul(x, R.permute_dims(R.const(w)))
                a = R.add(m, R.const(b))
                y = R.nn.relu(a)
                R.output(y)
            return y

    return OModel("dense_bias_relu", "nn.Linear style: x[3,16] @ permute_dims(W[12,16]) + b[12], relu -> "
                  "[3,12] f32 (one dense node)", M, [normal(rng_for(212, 1), (3, 16))], expect_ops=("dense",),
                  code_free=("acl", "bnns"))


def m_matmul():
    r = rng_for(213, 0)
    w = kaiming(r, (8, 5))

    @I.ir_module
    class M:
        @R.function
        def main(a: R.Tensor((2, 3, 8), "float32"), b: R.Tensor((2, 8, 4), "float32")):
            with R.dataflow():
                y = R.matmul(a, R.const(w))
                z = R.matmul(a, b)
                R.output(y, z)
            return (y, z)

    r1 = rng_for(213, 1)
    return OModel("matmul", "matmul with a constant [8,5] matrix (-> dense [5,8]) and a batched matmul of two "
                  "inputs: (a[2,3,8] @ W -> [2,3,5], a @ b[2,8,4] -> [2,3,4]) f32", M,
                  [normal(r1, (2, 3, 8)), normal(r1, (2, 8, 4))], expect_ops=("dense", "matmul"))


def m_add_mul():
    r = rng_for(214, 0)
    c = normal(r, (4, 1, 1), 1.0)

    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((1, 4, 3, 3), "float32"), y: R.Tensor((1, 4, 1, 3), "float32")):
            with R.dataflow():
                s = R.add(x, y)
                m = R.multiply(s, R.const(c))
                z = R.nn.relu(m)
                R.output(z)
            return z

    r1 = rng_for(214, 1)
    return OModel("add_mul", "broadcasting add of two inputs x[1,4,3,3] + y[1,4,1,3], multiply by a constant "
                  "[4,1,1], relu fused -> [1,4,3,3] f32", M, [normal(r1, (1, 4, 3, 3)), normal(r1, (1, 4, 1, 3))],
                  expect_ops=("add", "multiply"))


def m_conv_softmax():
    r = rng_for(215, 0)
    w = kaiming(r, (5, 3, 1, 1))

    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((1, 3, 4, 4), "float32")):
            with R.dataflow():
                c = R.nn.conv2d(x, R.const(w))
                y = R.nn.softmax(c, axis=1)
                R.output(y)
            return y

    return OModel("conv_softmax", "1x1 conv2d 3->5 then softmax over channels (axis 1 of NCHW; the ACL "
                  "description is NHWC, axis 3); x[1,3,4,4] -> [1,5,4,4] f32", M,
                  [normal(rng_for(215, 1), (1, 3, 4, 4), 2.0)], expect_ops=("softmax",))


def m_reshape_softmax():
    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((2, 3, 4, 4), "float32")):
            with R.dataflow():
                r = R.nn.relu(x)
                f = R.reshape(r, (2, 48))
                y = R.nn.softmax(f, axis=-1)
                R.output(y)
            return y

    return OModel("reshape_softmax", "relu -> reshape (flatten [2,3,4,4] -> [2,48]) -> softmax(axis -1) f32",
                  M, [normal(rng_for(216, 1), (2, 3, 4, 4))], expect_ops=("reshape", "softmax"))


def m_concat():
    r = rng_for(217, 0)
    w1, w2 = kaiming(r, (4, 3, 3, 3)), kaiming(r, (2, 3, 1, 1))

    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((1, 3, 6, 6), "float32")):
            with R.dataflow():
                a = R.nn.conv2d(x, R.const(w1), padding=[1, 1, 1, 1])
                b = R.nn.conv2d(x, R.const(w2))
                c = R.concat((a, b), axis=1)
                y = R.nn.relu(c)
                R.output(y)
            return y

    return OModel("concat", "two convs of x[1,3,6,6] (3x3 pad 1 -> 4 ch, 1x1 -> 2 ch) concatenated on "
                  "channels, relu -> [1,6,6,6] f32 (BNNS has no concatenation layer: Mote's BNNS backend copies)",
                  M, [normal(rng_for(217, 1), (1, 3, 6, 6))], expect_ops=("concatenate",), code_free=("bnns",))


# --------------------------------------------------------------------------------------------
# Small networks
# --------------------------------------------------------------------------------------------


def m_cnn():
    r = rng_for(301, 0)
    w, b = kaiming(r, (8, 3, 3, 3)), normal(r, (1, 8, 1, 1), 0.1)
    fw, fb = kaiming(r, (10, 512)), normal(r, (10,), 0.1)

    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((1, 3, 16, 16), "float32")):
            with R.dataflow():
                c = R.nn.conv2d(x, R.const(w), padding=[1, 1, 1, 1])
                a = R.add(c, R.const(b))
                h = R.nn.relu(a)
                p = R.nn.max_pool2d(h, pool_size=[2, 2], strides=[2, 2])
                f = R.reshape(p, (1, 512))
                d = R.add(R.matmul(f, R.permute_dims(R.const(fw))), R.const(fb))
                y = R.nn.softmax(d, axis=-1)
                R.output(y)
            return y

    return OModel("cnn", "conv2d 3->8 3x3 pad 1 + bias + relu, max_pool2d 2, flatten, dense 512->10 + bias, "
                  "softmax; x[1,3,16,16] -> [1,10] f32.  ACL: the NCHW flatten of a C>1, H*W>1 tensor cannot "
                  "be expressed in NHWC, so TVM transposes between two subgraphs", M,
                  [normal(rng_for(301, 1), (1, 3, 16, 16))], expect_ops=("conv2d", "max_pool2d", "dense"),
                  code_free=("bnns",))


def m_cnn_nhwc():
    r = rng_for(309, 0)
    w, b = kaiming(r, (8, 3, 3, 3)), normal(r, (8,), 0.1)  # OHWI
    w2 = kaiming(r, (8, 3, 3, 8))
    fw, fb = kaiming(r, (10, 8)), normal(r, (10,), 0.1)

    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((1, 12, 12, 3), "float32")):
            with R.dataflow():
                c = R.nn.conv2d(x, R.const(w), padding=[1, 1, 1, 1], data_layout="NHWC", kernel_layout="OHWI")
                h = R.nn.relu(R.add(c, R.const(b)))
                p = R.nn.max_pool2d(h, pool_size=[2, 2], strides=[2, 2], layout="NHWC")
                c2 = R.nn.conv2d(p, R.const(w2), padding=[1, 1, 1, 1], data_layout="NHWC", kernel_layout="OHWI")
                h2 = R.clip(c2, 0.0, 6.0)
                g = R.mean(h2, axis=[1, 2], keepdims=False)
                d = R.add(R.matmul(g, R.permute_dims(R.const(fw))), R.const(fb))
                y = R.nn.softmax(d, axis=-1)
                R.output(y)
            return y

    return OModel("cnn_nhwc", "the CNN written in NHWC (what ACL takes, so no TVM transposes are left): conv2d "
                  "3->8 3x3 pad 1 + bias + relu, max_pool2d 2, conv2d 8->8 3x3 pad 1 + relu6, global average "
                  "pool, dense 8->10 + bias, softmax; x[1,12,12,3] -> [1,10] f32 (ACL only: BNNS takes NCHW)",
                  M, [normal(rng_for(309, 1), (1, 12, 12, 3))], flavours=("acl",),
                  expect_ops=("conv2d", "max_pool2d", "global_avg_pool2d", "dense", "softmax"),
                  code_free=("acl",))


def m_mobilenet_block():
    r = rng_for(302, 0)
    we, be = kaiming(r, (16, 8, 1, 1)), normal(r, (1, 16, 1, 1), 0.1)
    wd = normal(r, (16, 1, 3, 3), 0.8)
    bn_s, bn_b = f32(1.0 + 0.2 * r.standard_normal((16, 1, 1))), normal(r, (16, 1, 1), 0.3)
    wp, bp = kaiming(r, (8, 16, 1, 1)), normal(r, (1, 8, 1, 1), 0.1)

    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((1, 8, 8, 8), "float32")):
            with R.dataflow():
                e = R.nn.relu6(R.add(R.nn.conv2d(x, R.const(we)), R.const(be)))
                d = R.nn.conv2d(e, R.const(wd), groups=16, padding=[1, 1, 1, 1])
                n = R.add(R.multiply(d, R.const(bn_s)), R.const(bn_b))
                h = R.nn.relu6(n)
                p = R.add(R.nn.conv2d(h, R.const(wp)), R.const(bp))
                y = R.add(p, x)
                R.output(y)
            return y

    return OModel("mobilenet_block", "MobileNetV2 inverted residual: 1x1 expand 8->16 + bias + relu6, "
                  "depthwise 3x3 (16) * bn_scale + bn_shift + relu6, 1x1 project 16->8 + bias, residual add; "
                  "x[1,8,8,8] -> [1,8,8,8] f32", M, [normal(rng_for(302, 1), (1, 8, 8, 8))],
                  expect_ops=("conv2d", "multiply", "add"), code_free=("bnns",))


def m_mlp():
    r = rng_for(303, 0)
    w1, b1 = kaiming(r, (32, 16)), normal(r, (32,), 0.1)
    w2, b2 = kaiming(r, (8, 32)), normal(r, (8,), 0.1)

    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((2, 16), "float32")):
            with R.dataflow():
                h = R.nn.relu(R.add(R.matmul(x, R.permute_dims(R.const(w1))), R.const(b1)))
                o = R.add(R.matmul(h, R.permute_dims(R.const(w2))), R.const(b2))
                y = R.nn.softmax(o, axis=-1)
                R.output(y)
            return y

    return OModel("mlp", "Linear 16->32 + relu, Linear 32->8, softmax; x[2,16] -> [2,8] f32", M,
                  [normal(rng_for(303, 1), (2, 16))], expect_ops=("dense", "softmax"), code_free=("acl", "bnns"))


def m_dense_dyn():
    r = rng_for(213, 0)
    w1, b1, w2 = kaiming(r, (16, 24)), normal(r, (24,), 0.1), kaiming(r, (24, 8))

    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor(("n", 16), "float32")):
            with R.dataflow():
                h = R.nn.relu(R.add(R.matmul(x, R.const(w1)), R.const(b1)))
                y = R.nn.softmax(R.matmul(h, R.const(w2)), axis=-1)
                R.output(y)
            return y

    cases = [(f"n{n}", [normal(rng_for(213, 1 + i), (n, 16))]) for i, n in enumerate((1, 3, 8))]
    return OModel("dense_dyn", "dense 16->24 + bias + relu -> dense 24->8 -> softmax on x[n,16] with n "
                  "symbolic (R.Tensor((\"n\", 16))): one version-3 description whose tensors say \"n\"; "
                  "cases n = 1, 3, 8; -> [n,8] f32", M, cases[0][1], expect_ops=("dense", "softmax"),
                  cases=cases, symbolic=True, max_subgraphs=1, residue_only=_SYMBOLIC_RESIDUE)


def m_mixed():
    r = rng_for(304, 0)
    w1, b1 = kaiming(r, (6, 3, 3, 3)), normal(r, (1, 6, 1, 1), 0.1)
    w2 = kaiming(r, (6, 6, 3, 3))
    fw = kaiming(r, (4, 6))

    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((1, 3, 8, 8), "float32")):
            with R.dataflow():
                h = R.nn.relu(R.add(R.nn.conv2d(x, R.const(w1), padding=[1, 1, 1, 1]), R.const(b1)))
                s = R.exp(R.negative(h))
                c = R.nn.conv2d(s, R.const(w2), strides=[2, 2], padding=[1, 1, 1, 1])
                t = R.sin(c)
                g = R.mean(t, axis=[2, 3], keepdims=False)
                y = R.matmul(g, R.permute_dims(R.const(fw)))
                R.output(y)
            return y

    # exp, negative and sin are ops no partitioner takes (sigmoid and tanh were, before format 2).
    return OModel("mixed", "conv+bias+relu (offloaded), exp(-x) (TVM), conv stride 2 (offloaded), sin (TVM), "
                  "mean over H,W + dense 6->4 (offloaded); x[1,3,8,8] -> [1,4] f32: the VM alternates TVM "
                  "kernels and mote.subgraph calls", M, [normal(rng_for(304, 1), (1, 3, 8, 8))],
                  min_subgraphs=3, mixed=True, expect_ops=("conv2d", "global_avg_pool2d", "dense"))


def m_qcnn():
    r = rng_for(305, 0)
    w1 = r.integers(-127, 128, (8, 3, 3, 3)).astype("int8")
    w2 = r.integers(-127, 128, (8, 8, 3, 3)).astype("int8")
    b1 = r.integers(-1000, 1000, 8).astype("int32")
    s1, s_w, s2, s3 = 0.03, 0.005, 0.04, 0.05

    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((1, 3, 8, 8), "uint8")):
            with R.dataflow():
                xf = R.dequantize(x, R.const(s1, "float32"), R.const(128, "int32"), axis=1)
                w1f = R.dequantize(R.const(w1), R.const(s_w, "float32"), R.const(0, "int32"), axis=0)
                c1 = R.nn.conv2d(xf, w1f, padding=[1, 1, 1, 1])
                b1f = R.dequantize(R.const(b1), R.const(s1 * s_w, "float32"), R.const(0, "int32"))
                h = R.nn.relu(R.add(c1, R.reshape(b1f, (1, 8, 1, 1))))
                q1 = R.quantize(h, R.const(s2, "float32"), R.const(0, "int32"), axis=1, out_dtype="uint8")
                hf = R.dequantize(q1, R.const(s2, "float32"), R.const(0, "int32"), axis=1)
                w2f = R.dequantize(R.const(w2), R.const(s_w, "float32"), R.const(0, "int32"), axis=0)
                c2 = R.nn.conv2d(hf, w2f, padding=[1, 1, 1, 1])
                q2 = R.quantize(c2, R.const(s3, "float32"), R.const(128, "int32"), axis=1, out_dtype="uint8")
                R.output(q2)
            return q2

    x = rng_for(305, 1).integers(0, 256, (1, 3, 8, 8)).astype("uint8")
    return OModel("qcnn", "two chained QDQ uint8 conv2d 3x3 pad 1 (3->8 + bias + relu, 8->8), the first "
                  "requantized to (0.04, 0) and read back with the same parameters: one subgraph, two "
                  "quantized conv2d nodes; x[1,3,8,8] u8 -> [1,8,8,8] u8", M, [x], flavours=("acl",),
                  quantized=True, expect_ops=("conv2d",))


def m_qdq_ops():
    """A QDQ graph as TVM's importer reads ONNX Runtime's quantizer output, with every quantized
    op that is not a conv/dense between dequantize and quantize (built with the block builder)."""
    r = rng_for(309, 0)
    sp = relax.op
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 4, 8, 8), "uint8"))
    with bb.function("main", [x]):
        with bb.dataflow():
            def dq(v, qp):
                return bb.emit(sp.dequantize(v, relax.const(qp[0], "float32"), relax.const(qp[1], "int32"), axis=1))

            def q(v, qp):
                return bb.emit(sp.quantize(v, relax.const(qp[0], "float32"), relax.const(qp[1], "int32"), axis=1,
                                           out_dtype="uint8"))

            def qconv(v, qin, c_in, c_out, k, qout, relu):
                w = r.integers(-127, 128, (c_out, c_in, k, k)).astype("int8")
                ws = f32(0.5 / np.sqrt(c_in * k * k) * (0.8 + 0.4 * r.random(c_out)) / 64)
                wf = bb.emit(sp.dequantize(relax.const(w), relax.const(ws), relax.const(np.zeros(c_out, "int32")), axis=0))
                y = bb.emit(sp.nn.conv2d(dq(v, qin), wf, padding=[k // 2] * 4))
                b = r.integers(-200, 200, c_out).astype("int32")
                bf = bb.emit(sp.dequantize(relax.const(b), relax.const(f32(qin[0] * ws)),
                                           relax.const(np.zeros(c_out, "int32")), axis=0))
                y = bb.emit(sp.add(y, bb.emit(sp.reshape(bf, (1, c_out, 1, 1)))))
                if relu:
                    y = bb.emit(sp.nn.relu(y))
                return q(y, qout)

            q0, q1, q2, q3 = (0.05, 128), (0.04, 0), (0.06, 5), (0.07, 3)
            q4, q5, q6, q7, q8 = (0.08, 2), (0.09, 0), (0.05, 1), (0.045, 128), (0.03, 128)
            q9 = (0.055, 3)
            a = qconv(x, q0, 4, 8, 3, q1, True)
            p = q(bb.emit(sp.nn.max_pool2d(dq(a, q1), (3, 3), (1, 1), (1, 1, 1, 1))), q1)  # same params
            b = qconv(a, q1, 8, 8, 1, q2, False)
            s_ = q(bb.emit(sp.add(dq(p, q1), dq(b, q2))), q3)  # three scales
            c = q(bb.emit(sp.concat([dq(s_, q3), dq(b, q2)], axis=1)), q4)  # two scales in, a third out
            parts = bb.emit(sp.split(dq(c, q4), [8], axis=1))
            lo = q(bb.emit(relax.TupleGetItem(parts, 0)), q4)
            hi = q(bb.emit(relax.TupleGetItem(parts, 1)), q4)
            c = q(bb.emit(sp.concat([dq(hi, q4), dq(lo, q4)], axis=1)), q5)
            # Channel shuffle as exporters write it, each step between dequantize and quantize.
            c = q(bb.emit(sp.reshape(dq(c, q5), (1, 2, 8, 8, 8))), q5)
            c = q(bb.emit(sp.permute_dims(dq(c, q5), [0, 2, 1, 3, 4])), q5)
            c = q(bb.emit(sp.reshape(dq(c, q5), (1, 16, 8, 8))), q5)
            c = q(bb.emit(sp.permute_dims(dq(c, q5), [0, 1, 3, 2])), q5)  # a model's own transpose
            c = q(bb.emit(sp.nn.avg_pool2d(dq(c, q5), (3, 3), (2, 2), (1, 1, 1, 1), count_include_pad=False)), q6)
            # Reshapes that depend on the NCHW element order, the second one requantizing.
            c = q(bb.emit(sp.reshape(dq(c, q6), (1, 16, 16))), q6)
            c = q(bb.emit(sp.reshape(dq(c, q6), (1, 16, 4, 4))), q9)
            c = qconv(c, q9, 16, 8, 1, q7, False)
            g = q(bb.emit(sp.mean(dq(c, q7), axis=[2, 3], keepdims=True)), q8)
            flat = q(bb.emit(sp.reshape(dq(g, q8), (1, 8))), q8)
            out = bb.emit_output(relax.Tuple([flat, c]))  # c keeps the spatial order visible
        bb.emit_func_output(out)
    x_in = rng_for(309, 1).integers(0, 256, (1, 4, 8, 8)).astype("uint8")
    return OModel("qdq_ops", "QDQ uint8 graph: conv -> max pool, 1x1 conv, add (three scales), concatenate "
                  "(two in, a third out), split and concatenate back reversed, channel shuffle as "
                  "reshape/permute_dims/reshape (one channel_shuffle node), a transpose of H and W, avg "
                  "pool, reshapes to 3-D and back (the second requantizing), conv, mean over H, W and "
                  "flatten, each between dequantize and quantize: one region, every op on the 8-bit "
                  "tensors, nothing but the layout transposes left in TVM; x[1,4,8,8] u8 -> ([1,8], the last conv's "
                  "[1,8,4,4]) u8",
                  bb.get(), [x_in],
                  flavours=("acl",), quantized=True, max_subgraphs=1, residue_only=_ACL_EDGE,
                  expect_ops=("conv2d", "max_pool2d", "add", "concatenate", "split", "channel_shuffle",
                              "transpose", "reshape", "avg_pool2d", "global_avg_pool2d"))


def m_minmax_clip():
    r = rng_for(306, 0)
    w = kaiming(r, (4, 4, 3, 3))

    @I.ir_module
    class M:
        @R.function
        def main(x: R.Tensor((1, 4, 6, 6), "float32")):
            with R.dataflow():
                c = R.nn.conv2d(x, R.const(w), padding=[1, 1, 1, 1])
                lo = R.maximum(c, R.const(0.0, "float32"))
                hi = R.minimum(lo, R.const(6.0, "float32"))
                y = R.minimum(hi, R.const(np.array([2.5], "float32")))
                R.output(y)
            return y

    return OModel("minmax_clip", "conv2d 4->4 3x3 pad 1, then maximum(., 0) and minimum(., 6) (fused as "
                  "relu6), then a lone minimum(., [2.5]) (a clip node with an open lower bound); "
                  "x[1,4,6,6] -> [1,4,6,6] f32", M, [normal(rng_for(306, 1), (1, 4, 6, 6), 3.0)],
                  expect_ops=("conv2d", "clip"))


def _onnx(make, seed, shape, name, description, expect_ops):
    import onnx_models  # noqa: F401 - needs the onnx package (python/requirements.txt)
    from tvm.relax.frontend.onnx import from_onnx

    mod = from_onnx(make())
    return OModel(name, description, mod, [normal(rng_for(seed, 1), shape)], expect_ops=expect_ops)


def m_onnx_cnn():
    import onnx_models

    return _onnx(onnx_models.small_cnn, 307, (1, 3, 16, 16), "onnx_cnn",
                 "python/onnx_models.small_cnn imported with tvm.relax.frontend.onnx.from_onnx (NCHW, "
                 "Conv+Relu, MaxPool, Flatten, Gemm, Softmax); input[1,3,16,16] -> [1,10] f32",
                 ("conv2d", "max_pool2d", "dense", "softmax"))


def m_onnx_mobilenet_tiny():
    import onnx_models

    return _onnx(onnx_models.mobilenet_v2_tiny, 308, (1, 3, 32, 32), "onnx_mobilenet_tiny",
                 "python/onnx_models.mobilenet_v2_tiny (MobileNetV2 structure in miniature: Clip(0,6) is "
                 "imported as topi maximum/minimum call_tir, fused back into relu6) imported with from_onnx; "
                 "input[1,3,32,32] -> [1,10] f32", ("conv2d", "add", "global_avg_pool2d", "dense"))


# ---- what real exports contain (subgraph format version 2) -----------------------------------
# Built as ONNX with python/onnx_archs.py's graph builder (BatchNormalization unfolded, Dropout
# kept, activations as the exporters write them) and imported with TVM's ONNX frontend, as real
# models arrive.  Everything but ACL's layout transposes at the edge must be offloaded.

_ACL_EDGE = {"acl": ("relax.permute_dims",), "bnns": ()}


def _archs_model(build, seed, shape, name, description, expect_ops, **kw):
    import onnx_archs
    from tvm.relax.frontend.onnx import from_onnx

    g = onnx_archs._G(seed)
    out, out_shape = build(g)
    opset = kw.pop("opset", onnx_archs.OPSET)
    mod = from_onnx(g.model(name, list(shape), out, list(out_shape), opset=opset), keep_params_in_input=False)
    kw.setdefault("residue_only", _ACL_EDGE)
    kw.setdefault("max_subgraphs", 1)
    # With a symbolic dimension in `shape`, `cases` gives the inputs.
    inputs = kw["cases"][0][1] if kw.get("cases") else [normal(rng_for(seed, 1), shape)]
    return OModel(name, description, mod, inputs, expect_ops=expect_ops, **kw)


def m_onnx_conv_bn():
    def build(g):
        y = g.cba("input", 3, 8, 3, in_act="unit")  # Conv (no bias) -> BN -> Relu
        y = g.dropout(y)
        y = g.bn(g.conv(y, 8, 8, 3, bias=True), 8)  # Conv + bias -> BN, no activation
        y = g.act(g.bn(g.node("Gemm", [g.node("Flatten", [g.node("GlobalAveragePool", [y])], axis=1),
                                        g.const("w", g.rng.standard_normal((6, 8)).astype("float32") / 3)],
                                 transB=1), 6), "relu")  # Gemm -> BN (on [N, C]) -> Relu
        return y, (1, 6)
    return _archs_model(build, 401, (1, 3, 10, 10), "onnx_conv_bn",
                        "Conv->BatchNormalization->Relu, Dropout, Conv+bias->BN, GlobalAveragePool, Flatten, "
                        "Gemm->BN->Relu: every BN folded into the conv/dense before it (no scale_shift); "
                        "input[1,3,10,10] -> [1,6] f32", ("conv2d", "dense"), absent_ops=("scale_shift",),
                        code_free=("bnns",))


def m_onnx_dense_block():
    def build(g):
        a = g.cba("input", 4, 6, 3, in_act="unit")
        b = g.cba("input", 4, 6, 1, in_act="unit")
        y = g.node("Concat", ["input", a, b], axis=1)  # DenseNet: BN-ReLU-conv on a concatenation
        y = g.act(g.bn(y, 16), "relu")
        y = g.conv(y, 16, 8, 1)
        y = g.bn(y, 8)
        return g.node("AveragePool", [y], kernel_shape=[2, 2], strides=[2, 2]), (1, 8, 4, 4)
    return _archs_model(build, 402, (1, 4, 8, 8), "onnx_dense_block",
                        "DenseNet-style: two conv-BN-ReLU branches concatenated with the input, BN->ReLU "
                        "on the concatenation (scale_shift with relu), conv 1x1 -> BN (folded), AveragePool; "
                        "input[1,4,8,8] -> [1,8,4,4] f32", ("scale_shift", "conv2d"),
                        code_free=("bnns",))


def m_onnx_grouped_lrn():
    def build(g):
        y = g.act(g.conv("input", 4, 8, 3, bias=True), "relu")
        y = g.lrn(y, size=5, alpha=1e-3, beta=0.75, bias=2.0)
        y = g.maxpool(y, 3, 2, ceil=1)
        y = g.cba(y, 8, 8, 3, groups=2)  # grouped conv -> BN (folded) -> relu
        y = g.lrn(y, size=3, alpha=1e-2, beta=0.5, bias=1.0)
        y = g.bn(g.conv(y, 8, 12, 3, groups=4), 12)
        return y, (1, 12, 4, 4)
    return _archs_model(build, 403, (1, 4, 9, 9), "onnx_grouped_lrn",
                        "AlexNet-style: conv->relu->LRN(5), MaxPool ceil, grouped conv (2 groups)->BN->relu->"
                        "LRN(3), grouped conv (4 groups)->BN; input[1,4,9,9] -> [1,12,4,4] f32",
                        ("conv2d", "lrn", "max_pool2d"), code_free=("bnns",))


def m_onnx_shuffle_unit():
    def build(g):
        c, half = 8, 4
        b1, b2 = g.node("Split", ["input", g.const("split", np.array([half, half], "int64"))], n_out=2, axis=1)
        y = g.cba(b2, half, half, 1)
        y = g.cba(y, half, half, 3, groups=half, act=None)
        y = g.cba(y, half, half, 1, in_act=None)
        y = g.node("Concat", [b1, y], axis=1)
        y = g.node("Reshape", [y, g.shape([1, 2, c // 2, 6, 6])])
        y = g.node("Transpose", [y], perm=[0, 2, 1, 3, 4])
        return g.node("Reshape", [y, g.shape([1, c, 6, 6])]), (1, c, 6, 6)
    return _archs_model(build, 404, (1, 8, 6, 6), "onnx_shuffle_unit",
                        "ShuffleNetV2 unit: Split in two, 1x1 conv-BN-ReLU, depthwise 3x3 conv-BN, 1x1 "
                        "conv-BN-ReLU on one half, Concat, channel shuffle (Reshape, Transpose, Reshape); "
                        "input[1,8,6,6] -> [1,8,6,6] f32", ("split", "channel_shuffle", "conv2d"),
                        code_free=("bnns",))


def m_onnx_se_hswish():
    def build(g):
        y = g.cba("input", 4, 8, 3, act="hswish", in_act="unit")
        y = g.cba(y, 8, 8, 3, groups=8, act="hswish", in_act="hswish")
        s = g.node("GlobalAveragePool", [y])
        s = g.act(g.conv(s, 8, 4, 1, pad=0, bias=True), "relu")
        s = g.node("HardSigmoid", [g.conv(s, 4, 8, 1, pad=0, bias=True)], alpha=1.0 / 6.0, beta=0.5)
        y = g.node("Mul", [y, s])
        y = g.node("HardSigmoid", [g.cba(y, 8, 6, 1, act=None)])  # ONNX's default alpha 0.2, beta 0.5
        return y, (1, 6, 7, 7)
    return _archs_model(build, 405, (1, 4, 7, 7), "onnx_se_hswish",
                        "MobileNetV3 block: conv-BN-HardSwish, depthwise conv-BN-HardSwish, squeeze-excite "
                        "(GlobalAveragePool, conv-relu, conv-HardSigmoid(1/6, 1/2), Mul), conv-BN-"
                        "HardSigmoid(0.2, 0.5); input[1,4,7,7] -> [1,6,7,7] f32", ("conv2d", "multiply"),
                        code_free=("bnns",))


def m_onnx_se_silu():
    def build(g):
        y = g.cba("input", 4, 8, 1, act="silu", in_act="unit")  # Mul(x, Sigmoid(x))
        y = g.cba(y, 8, 8, 3, groups=8, act="silu", in_act="silu")
        s = g.node("GlobalAveragePool", [y])
        s = g.act(g.conv(s, 8, 2, 1, pad=0, bias=True), "silu")
        s = g.node("Sigmoid", [g.conv(s, 2, 8, 1, pad=0, bias=True)])
        y = g.node("Mul", [y, s])
        y = g.cba(y, 8, 4, 1, act=None)
        return g.node("Add", [y, g.cba("input", 4, 4, 1, act=None, in_act="unit")]), (1, 4, 6, 6)
    return _archs_model(build, 406, (1, 4, 6, 6), "onnx_se_silu",
                        "EfficientNet MBConv: conv-BN-SiLU (Mul of Sigmoid), depthwise conv-BN-SiLU, "
                        "squeeze-excite with a SiLU and a Sigmoid gate, projection conv-BN, residual Add; "
                        "input[1,4,6,6] -> [1,4,6,6] f32", ("conv2d", "multiply", "add"), code_free=("bnns",))


def m_onnx_elementwise():
    def build(g):
        c = lambda base, shape: g.const(base, g.rng.uniform(0.5, 1.5, shape).astype("float32"))  # noqa: E731
        y = g.node("Tanh", ["input"])
        y = g.node("Sub", [y, c("sub", (1, 5, 1, 1))])
        y = g.node("LeakyRelu", [y], alpha=0.1)
        y = g.node("Div", [y, c("div", (1, 1, 1, 4))])
        y = g.node("Sigmoid", [g.node("Sub", [c("lhs", (4,)), y])])
        y = g.node("Div", [y, g.node("Add", ["input", c("one", (1, 5, 3, 4))])])
        return g.node("Sum", [y, "input", c("sum", (1, 5, 1, 1))]), (1, 5, 3, 4)
    return _archs_model(build, 407, (1, 5, 3, 4), "onnx_elementwise",
                        "Tanh, Sub (broadcast [1,5,1,1]), LeakyRelu(0.1), Div by a constant, Sub from a "
                        "constant [4], Sigmoid, Div of two tensors, a three-way Sum with a broadcast "
                        "constant (TVM imports it as stack + sum: a chain of adds); input[1,5,3,4] -> "
                        "[1,5,3,4] f32",
                        ("activation", "subtract", "divide"), code_free=("acl", "bnns"))


def _encoder_layer(seq):
    """m_onnx_encoder_layer's graph builder; `seq` an int, or None for a symbolic length (the
    head reshapes then say -1, as exporters with dynamic axes write them)."""
    d, heads, ff = 16, 2, 32
    dk = d // heads
    n = -1 if seq is None else seq

    def build(g):
        import math

        def linear(x, k, n):
            w = (g.rng.standard_normal((k, n)) / math.sqrt(k)).astype("float32")
            return g.node("Add", [g.node("MatMul", [x, g.const("w", w)]), g.const("b", 0.1 * g.rng.standard_normal(n).astype("float32"))])

        def ln(x):
            return g.node("LayerNormalization", [x, g.const("g", g.rng.uniform(0.8, 1.2, d).astype("float32")),
                                                 g.const("b", (0.1 * g.rng.standard_normal(d)).astype("float32"))],
                          axis=-1, epsilon=1e-5)

        def heads_of(x, perm):
            return g.node("Transpose", [g.node("Reshape", [x, g.shape([1, n, heads, dk])])], perm=perm)

        x = "input"
        q, k, v = heads_of(linear(x, d, d), [0, 2, 1, 3]), heads_of(linear(x, d, d), [0, 2, 3, 1]), \
            heads_of(linear(x, d, d), [0, 2, 1, 3])
        s = g.node("Div", [g.node("MatMul", [q, k]), g.const("sqrt_dk", np.array(math.sqrt(dk), "float32"))])
        a = g.node("Transpose", [g.node("MatMul", [g.dropout(g.node("Softmax", [s], axis=-1)), v])], perm=[0, 2, 1, 3])
        x = ln(g.node("Add", [x, g.dropout(linear(g.node("Reshape", [a, g.shape([1, n, d])]), d, d))]))
        h = linear(x, d, ff)
        e = g.node("Erf", [g.node("Div", [h, g.const("sqrt2", np.array(math.sqrt(2.0), "float32"))])])
        h = g.node("Mul", [g.node("Mul", [h, g.node("Add", [e, g.const("one", np.array(1.0, "float32"))])]),
                           g.const("half", np.array(0.5, "float32"))])
        return ln(g.node("Add", [x, linear(h, ff, d)])), (1, "seq" if seq is None else seq, d)
    return build, d


def m_onnx_encoder_layer():
    seq = 6
    build, d = _encoder_layer(seq)
    return _archs_model(build, 408, (1, seq, d), "onnx_encoder_layer",
                        "Transformer encoder layer (post-LN): Q/K/V MatMul+Add, heads by Reshape/Transpose, "
                        "MatMul, Div by sqrt(d_k), Softmax, Dropout, LayerNormalization, GELU in its erf form "
                        "(Div, Erf, Add, Mul, Mul); input[1,6,16] -> [1,6,16] f32",
                        ("transpose", "layer_norm", "matmul", "softmax", "dense", "divide"), code_free=("acl", "bnns"))


# Lengths the models with a symbolic dimension are run at: 1 (every broadcast degenerate), and
# lengths that are no multiple of any tile.
DYN_LENGTHS = (1, 6, 17)


def m_onnx_encoder_dyn():
    build, d = _encoder_layer(None)
    seed = 412
    cases = [(f"seq{n}", [normal(rng_for(seed, 1 + i), (1, n, d))]) for i, n in enumerate(DYN_LENGTHS)]
    return _archs_model(build, seed, (1, "seq", d), "onnx_encoder_dyn",
                        "m_onnx_encoder_layer's graph with the sequence length symbolic (ONNX dim_param "
                        "\"seq\", Reshape to [1, -1, ...]), imported without pinning it: one version-3 "
                        "description whose tensors say \"seq\", including the attention scores [1,2,seq,seq] "
                        "(MatMul contracting over seq, Softmax along it); cases seq = "
                        f"{', '.join(map(str, DYN_LENGTHS))}; input[1,seq,16] -> [1,seq,16] f32",
                        ("transpose", "layer_norm", "matmul", "softmax", "dense", "divide"), cases=cases,
                        symbolic=True, residue_only=_SYMBOLIC_RESIDUE)


def m_onnx_gemm_trans():
    def build(g):
        w1 = g.const("w1", g.rng.standard_normal((8, 6)).astype("float32") / 3)
        y = g.node("Gemm", ["input", w1], transA=1)  # input [8, 4] -> [4, 6]
        w2 = g.const("w2", g.rng.standard_normal((5, 6)).astype("float32") / 3)
        y = g.node("Gemm", [y, w2, g.const("b2", g.rng.standard_normal(5).astype("float32"))], transB=1)
        return g.node("Tanh", [y]), (4, 5)
    return _archs_model(build, 409, (8, 4), "onnx_gemm_trans",
                        "Gemm with transA=1 (the input transposed), Gemm with transB=1 and a bias, Tanh; "
                        "input[8,4] -> [4,5] f32", ("dense",), code_free=("acl", "bnns"))


def m_onnx_gelu_tanh():
    seq, d, ff = 5, 12, 24

    def build(g):
        import math

        def linear(x, k, n):
            w = (g.rng.standard_normal((k, n)) / math.sqrt(k)).astype("float32")
            return g.node("Add", [g.node("MatMul", [x, g.const("w", w)]),
                                  g.const("b", 0.1 * g.rng.standard_normal(n).astype("float32"))])

        def scalar(base, v):
            return g.const(base, np.array(v, "float32"))

        def written_out(x, cube):
            # 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
            inner = g.node("Mul", [scalar("beta", math.sqrt(2.0 / math.pi)),
                                   g.node("Add", [x, g.node("Mul", [scalar("kappa", 0.044715), cube])])])
            one_plus = g.node("Add", [scalar("one", 1.0), g.node("Tanh", [inner])])
            return one_plus, inner

        h = g.node("Gelu", [linear("input", d, ff)], approximate="tanh")  # ONNX opset 20
        x = linear(h, ff, ff)
        # Hugging Face's NewGELU traced: cube as Pow(x, 3), 0.5 * x first.
        one_plus, _ = written_out(x, g.node("Pow", [x, scalar("three", 3.0)]))
        h = g.node("Mul", [g.node("Mul", [scalar("half", 0.5), x]), one_plus])
        x = linear(h, ff, d)
        # torch.onnx's opset-9 gelu(approximate="tanh"): cube as Mul(x, Mul(x, x)), 0.5 last.
        one_plus, _ = written_out(x, g.node("Mul", [x, g.node("Mul", [x, x])]))
        h = g.node("Mul", [scalar("half", 0.5), g.node("Mul", [x, one_plus])])
        return g.node("Add", [h, "input"]), (1, seq, d)
    return _archs_model(build, 410, (1, seq, d), "onnx_gelu_tanh",
                        "GELU's tanh form three ways after MatMul+Add: ONNX opset-20 Gelu(approximate=tanh), "
                        "written out with Pow(x, 3) (0.5 * x first) and with Mul(x, Mul(x, x)) (0.5 last); "
                        "residual Add; input[1,5,12] -> [1,5,12] f32",
                        ("dense",), code_free=("acl", "bnns"), opset=20, expect_activations={"gelu_tanh": 3})


def check_gelu_tanh_near_miss():
    """The written-out tanh GELU is recognised by value: a chain of the same shape with 0.05 for
    0.044715 must not become a gelu_tanh node in either flavour (its ops are offloaded one by one
    or stay in TVM)."""
    import math

    import onnx_archs
    from tvm.relax.frontend.onnx import from_onnx

    g = onnx_archs._G(411)
    s = lambda base, v: g.const(base, np.array(v, "float32"))  # noqa: E731
    cube = g.node("Pow", ["input", s("three", 3.0)])
    inner = g.node("Mul", [s("beta", math.sqrt(2.0 / math.pi)), g.node("Add", ["input", g.node("Mul", [s("k", 0.05), cube])])])
    y = g.node("Mul", [g.node("Mul", [s("half", 0.5), "input"]), g.node("Add", [s("one", 1.0), g.node("Tanh", [inner])])])
    mod = from_onnx(g.model("near_miss", [1, 4, 6, 6], y, [1, 4, 6, 6]), keep_params_in_input=False)
    for flavour, partition in PARTITIONERS.items():
        acts = [n["attrs"].get("activation") for d in mote_tvm.subgraph_descriptions(partition(mod)) for n in d["nodes"]]
        if "gelu_tanh" in acts:
            raise RuntimeError(f"{flavour}: a tanh-GELU-shaped chain with kappa 0.05 was taken as gelu_tanh")


def m_onnx_clip7():
    def build(g):
        clip = lambda x, **b: g.node("Clip", [x], **b)  # noqa: E731 - opset 7: bounds as attributes
        y = clip(g.bn(g.conv("input", 3, 8, 3, gain2=1.0), 8), min=0.0, max=6.0)
        y = clip(g.bn(g.conv(y, 8, 8, 3, groups=8), 8), min=0.0, max=6.0)  # depthwise
        z = clip(g.conv(y, 8, 8, 1, bias=True), min=0.0)  # max open: relu
        y = g.node("Add", [z, y])
        y = clip(y, min=-1.0, max=2.5)
        y = clip(g.conv(y, 8, 4, 1), max=1.5)  # min open
        return y, (1, 4, 8, 8)
    return _archs_model(build, 411, (1, 3, 8, 8), "onnx_clip7",
                        "ReLU6 and other clamps as opset-7 Clip (min/max attributes, which TVM's importer "
                        "writes as topi maximum/minimum kernels with the bound inside the TIR): Conv->BN->"
                        "Clip(0,6), depthwise Conv->BN->Clip(0,6), Conv+bias->Clip(min 0), Add, Clip(-1,2.5), "
                        "Conv->Clip(max 1.5): one region with no maximum/minimum left in TVM; "
                        "input[1,3,8,8] -> [1,4,8,8] f32", ("conv2d", "add"), opset=7,
                        expect_activations={"relu6": 2, "relu": 1, "clip": 2})


MODELS_V2 = [m_onnx_conv_bn, m_onnx_dense_block, m_onnx_grouped_lrn, m_onnx_shuffle_unit, m_onnx_se_hswish,
             m_onnx_se_silu, m_onnx_elementwise, m_onnx_encoder_layer, m_onnx_encoder_dyn, m_onnx_gemm_trans,
             m_onnx_gelu_tanh, m_onnx_clip7]

MODELS = [
    m_conv_pad_bias_relu, m_conv_s2_relu6, m_conv_dil_clip, m_dwconv, m_dwconv_mult2,
    m_qconv_uint8, m_qconv_int8, m_qdense_int8, m_max_pool, m_avg_pool, m_global_pools,
    m_dense_bias_relu, m_matmul, m_add_mul, m_conv_softmax, m_reshape_softmax, m_concat,
    m_cnn, m_cnn_nhwc, m_mobilenet_block, m_mlp, m_dense_dyn, m_mixed, m_qcnn, m_qdq_ops, m_minmax_clip, m_onnx_cnn, m_onnx_mobilenet_tiny,
] + MODELS_V2

PARTITIONERS = {"acl": mote_tvm.partition_for_acl, "bnns": mote_tvm.partition_for_bnns}


# --------------------------------------------------------------------------------------------
# Building, checking, recording
# --------------------------------------------------------------------------------------------


def run_vm(lib, inputs) -> list[np.ndarray]:
    vm = relax.VirtualMachine(lib, tvm.cpu(0))
    return flatten_outputs(vm["main"](*[tvm.runtime.tensor(a) for a in inputs]))


def compare(got, want, quantized, where):
    """Raise unless every output agrees within the format's tolerance; returns the max error."""
    if len(got) != len(want):
        raise RuntimeError(f"{where}: {len(got)} outputs, oracle has {len(want)}")
    worst = 0.0
    for i, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape or g.dtype != w.dtype:
            raise RuntimeError(f"{where}: out{i} is {g.dtype}{g.shape}, oracle {w.dtype}{w.shape}")
        if quantized:
            err = float(np.max(np.abs(g.astype(np.int64) - w.astype(np.int64)), initial=0))
            ok = err <= Q_TOL["atol"]
        else:
            d = np.abs(g.astype(np.float64) - w.astype(np.float64))
            err = float(np.max(d, initial=0))
            ok = bool(np.all(d <= F32_TOL["atol"] + F32_TOL["rtol"] * np.abs(w.astype(np.float64))))
        if not ok:
            raise RuntimeError(f"{where}: out{i} differs from the oracle by {err:g} (beyond tolerance)")
        worst = max(worst, err)
    return worst


def build_one(model: OModel, flavour: str, oracles: list, arch: str, out_dir: str, scratch: str) -> dict:
    """`oracles`: the unpartitioned model's outputs for each of model.all_cases()."""
    t0 = time.time()
    name = f"{model.name}_{flavour}"
    pmod = PARTITIONERS[flavour](model.mod)
    residue = mote_tvm.tvm_residue(pmod)
    try:  # the partitioner's own check must agree with tvm_residue
        PARTITIONERS[flavour](model.mod, code_free="require")
        refused = None
    except mote_tvm.NotCodeFree as e:
        refused = e
    if (refused is None) != (not residue) or (refused is not None and refused.residue != residue):
        raise RuntimeError(f"{name}: code_free=\"require\" disagrees with tvm_residue {residue}: {refused}")
    if flavour in model.code_free and residue:
        raise RuntimeError(f"{name}: expected code-free, but these stay in TVM: {residue}")
    descs = mote_tvm.subgraph_descriptions(pmod)
    if len(descs) < model.min_subgraphs:
        raise RuntimeError(f"{name}: {len(descs)} mote.subgraph call(s), expected at least {model.min_subgraphs}")
    if model.max_subgraphs is not None and len(descs) > model.max_subgraphs:
        raise RuntimeError(f"{name}: {len(descs)} mote.subgraph call(s), expected at most {model.max_subgraphs}")
    if model.residue_only is not None and flavour in model.residue_only:
        left = sorted({r.split(": ", 1)[1] for r in residue} - set(model.residue_only[flavour]))
        if left:
            raise RuntimeError(f"{name}: these stay in TVM but should be offloaded: {left}")
    present = sorted({n["op"] for d in descs for n in d["nodes"]} & set(model.absent_ops))
    if present:
        raise RuntimeError(f"{name}: the partition has op(s) {present}, which it should not")
    ops = sorted({n["op"] for d in descs for n in d["nodes"]})
    missing = [op for op in model.expect_ops if op not in ops]
    if missing:
        raise RuntimeError(f"{name}: the partition lacks op(s) {missing} (has {ops})")
    for act, count in model.expect_activations.items():
        acts = [n["attrs"].get("activation") for d in descs for n in d["nodes"]]
        got = sum(1 for a in acts if a == act or (isinstance(a, dict) and act in a))
        if got != count:
            raise RuntimeError(f"{name}: {got} node(s) with activation {act!r}, expected {count}")
    for d in descs:
        # Version 3 exactly when a tensor has a symbolic dimension, else version 2 exactly when a
        # node needs it, so older runtimes keep loading the rest.
        symbolic = any(isinstance(x, str) for t in d["tensors"] for x in t["shape"])
        want = 3 if symbolic else 2 if any(needs_version_2(n) for n in d["nodes"]) else 1
        if d["target"] != flavour or d["version"] != want:
            raise RuntimeError(f"{name}: bad description header {d['target']!r} v{d['version']} (want v{want})")
        if model.symbolic and not symbolic:
            raise RuntimeError(f"{name}: description {d['name']} has no symbolic dimension")

    entry = {"name": name, "file": f"{name}.so", "description": model.description,
             "partition": flavour, "subgraphs": len(descs),
             "subgraph_ops": [[n["op"] for n in d["nodes"]] for d in descs],
             # Per call, the symbolic dimensions its description names, in order of appearance.
             "subgraph_symbols": [list(dict.fromkeys(x for t in d["tensors"] for x in t["shape"] if isinstance(x, str)))
                                  for d in descs]}
    # Everything offloaded: no TVM kernel, so for aarch64 TVM emits C (an empty lib0.c and the
    # module blob as a C array) instead of objects; the link step compiles them.
    host_lib, obj = export_model(pmod, arch, name, entry, out_dir, scratch, allow_c=True)
    if arch == "x86_64":
        kernels = kernel_names(host_lib, dynamic=True) or []
    else:
        kernels = (kernel_names(obj, dynamic=False) if obj else None) or []
    entry["kernels"] = kernels
    if model.mixed and not kernels:
        raise RuntimeError(f"{name}: expected TVM kernels next to the subgraph calls, found none")
    if bool(kernels) != bool(residue):
        raise RuntimeError(f"{name}: tvm_residue says {residue or 'nothing'} stays in TVM, the export has "
                           f"kernels {kernels}")
    entry["code_free"] = not kernels
    if entry["code_free"] and arch == "x86_64":
        # The other container export_library writes; for a code-free model, C sources.
        tvm.compile(pmod, target=HOST_TARGET).export_library(os.path.join(out_dir, f"{name}.tar"))
        entry["archive"] = f"{name}.tar"

    # Second oracle: TVM's VM on the partitioned host build, mote.subgraph = numpy reference.
    lib = tvm.runtime.load_module(host_lib)
    err = 0.0
    entry["cases"] = []
    for (case, inputs), oracle in zip(model.all_cases(), oracles):
        got = run_vm(lib, inputs)
        err = max(err, compare(got, oracle, model.quantized, f"{name} case {case} (partitioned, numpy reference)"))
        stem = f"{name}.{case}"
        rec = case_record(out_dir, stem, case, "main", inputs)
        record_outputs(rec, out_dir, stem, oracle, lambda _dt: dict(Q_TOL if model.quantized else F32_TOL))
        entry["cases"].append(rec)
    made = entry.get("archive", entry["file"])
    print(f"offload-zoo[{arch}]: {name:24s} {len(descs)} subgraph(s) "
          f"{'+'.join(','.join(o) for o in entry['subgraph_ops'])[:60]:60s} {len(kernels):2d} TVM kernels{' (code-free)' if entry['code_free'] else ''}  "
          f"max err {err:.2g}  ({time.time() - t0:.1f}s) -> {made}", file=sys.stderr, flush=True)
    return entry


def main(argv=None) -> int:
    args = parse_args(__doc__, "comma-separated model base names (default: all)", argv)
    only = args.only
    mote_tvm.register_reference()
    t0 = time.time()
    manifest = {"tvm_version": tvm.__version__, "target": args.target, "format_doc_version": FORMAT_VERSION,
                "models": []}
    seen = set()
    with tempfile.TemporaryDirectory(prefix="mote-offload-zoo-") as scratch:
        for make in MODELS:
            model = make()
            if only and model.name not in only:
                continue
            seen.add(model.name)
            # The oracle: the unpartitioned model on the host, for each case.
            base = tvm.compile(model.mod, target=HOST_TARGET)
            oracles = [run_vm(base, inputs) for _, inputs in model.all_cases()]
            for flavour in model.flavours:
                manifest["models"].append(build_one(model, flavour, oracles, args.target, args.out, scratch))
    if "onnx_gelu_tanh" in seen:
        check_gelu_tanh_near_miss()
    if only - seen:
        raise SystemExit(f"offload_zoo.py: unknown model(s): {sorted(only - seen)}")
    write_manifest(args.out, manifest)
    n_sub = sum(m["subgraphs"] for m in manifest["models"])
    n_free = sum(m["code_free"] for m in manifest["models"])
    print(f"offload-zoo[{args.target}]: {len(manifest['models'])} models ({n_free} code-free), {n_sub} subgraph calls, "
          f"all within tolerance of the oracle, in {time.time() - t0:.1f}s -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

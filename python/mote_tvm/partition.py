"""Partition a Relax module for Mote's offload backends (ACL, BNNS).

The partitioner is a small rewriter of its own rather than ``FuseOpsByPattern``: it walks the
dataflow blocks of every Relax function in binding order, recognises *units* (one subgraph node,
e.g. pad? -> conv2d -> bias? -> relu/clip?, or dequantize -> conv2d -> bias? -> act? ->
quantize) and merges runs of consecutive units into *regions*.  A run of consecutive bindings is
a contiguous segment of a topological order, so replacing it by one call can never create a
cycle; that is why regions are formed from consecutive units only.

Each region becomes

    R.call_dps_packed("mote.subgraph", (R.str(desc), inputs..., constants...), out_ty=...)

with ``desc`` the JSON description of ``docs/subgraph-format.md`` (version 3 when a tensor has
a symbolic dimension, else version 2 when it uses anything version 1 lacks, else version 1, so
older runtimes still load it).  Bindings that
the regions no longer need (pads, dequantizes, weight transposes) are removed by dead-code
elimination; everything that is not offloaded stays a TVM op.

Layouts: BNNS takes NCHW data / OIHW weights as they come.  ACL wants NHWC / OHWI: a region whose
4-D ops are NCHW is converted as a whole -- every 4-D tensor inside the region is described in
NHWC (constants transposed here, in numpy), and TVM ``permute_dims`` ops are inserted at the
region boundary for 4-D data inputs and outputs.  Ops whose meaning depends on the element
order (reshape of a 4-D tensor with C > 1 and H*W > 1, dense/matmul on 4-D tensors, broadcasts
of a lower-rank non-constant operand) cannot be converted and end such a region.

Symbolic dimensions (a graph imported with its sequence length left open): a dimension that is
a bare ``tir.Var`` is described by the variable's name, and the runtime binds it from the
shapes of the inputs it is called with.  So a unit is taken only when each of its nodes holds
for every value of its symbols (a broadcast of ``seq`` against ``seq`` or 1, not against 64; a
reshape keeping the variables and the static element count; static weights' extents); any
other expression (``seq * 2``) stays in TVM, as do layout ops (conv2d, pooling) on symbolic
tensors, and a region is not emitted when some symbol occurs in none of its inputs.

Before matching, what training frameworks leave in an inference graph is taken out: Dropout
(TVM imports it as a copy) is replaced by its input, and unused tuple fields (BatchNorm's
running statistics, Dropout's mask) are dropped.  Inference BatchNorm after a conv2d or dense
is folded into its weight and bias; any other BatchNorm becomes ``scale_shift``.  Activations
arrive as chains of elementwise ops (HardSwish as add/clip/divide/multiply, SiLU as
x * sigmoid(x), GELU as divide/erf/add/multiply/multiply, GELU's tanh form as
0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) with x^3 as a power or two products):
each chain is recognised as one activation and fused into its producer where the producer takes
one.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass, field

import numpy as np

import tvm
from tvm import relax

from .reference import needs_version_2

# The newest format version the partitioner writes; a description says 1 unless it needs 2, and
# 3 exactly when a tensor has a symbolic dimension.
FORMAT_VERSION = 3
SUBGRAPH_FUNC = "mote.subgraph"

_QDTYPES = ("int8", "uint8")
# Float ops that a QDQ graph wraps in dequantize/quantize and partition_for_acl then takes as
# the op on the 8-bit tensors (_Matcher.qdq_unit).
_QDQ_OPS = frozenset({"relax.add", "relax.nn.max_pool2d", "relax.nn.avg_pool2d", "relax.nn.adaptive_avg_pool2d",
                      "relax.mean", "relax.max", "relax.concat", "relax.reshape", "relax.permute_dims",
                      "relax.split"})
_NCHW_TO_NHWC = (0, 2, 3, 1)
_NHWC_TO_NCHW = (0, 3, 1, 2)
_F32_MAX = 3.0e38  # a clip bound at least this large is no bound
_F32_LIMIT = 3.4028234663852886e38


@dataclass(frozen=True)
class _Target:
    name: str
    quantized: bool  # takes int8/uint8 conv2d/dense (QDQ patterns)
    concat: bool  # takes concatenate
    any_groups: bool  # grouped (not only depthwise) convolutions
    layout: str  # the 4-D layout the backend wants
    # Fuse version-2 activations (sigmoid, SiLU, GELU, ...) into conv2d/dense/binary ops.  The
    # BNNS backend runs none of them, so for BNNS they stay separate `activation` nodes and the
    # conv keeps running on BNNS (the activation node falls back to `cpu` in the same region).
    fuse_v2_activations: bool
    # Version-2 activations the backend cannot run even fused (ACL has no tanh-form GELU): kept
    # as their own `activation` node, so only that node falls back to `cpu`, not its producer.
    never_fused: frozenset = frozenset()


# The ACL shim runs a grouped convolution as one convolution per group (backends/acl/README.md).
# ACL 24.11's GELU is the erf form only (backends/acl/README.md).
_ACL = _Target("acl", quantized=True, concat=True, any_groups=True, layout="NHWC", fuse_v2_activations=True,
               never_fused=frozenset({"gelu_tanh"}))
# BNNS has no requantising int8 conv (docs/bnns.md, "What runs on BNNS" and "What falls back
# to `cpu`").  It has no concatenation layer either, but Mote's BNNS backend concatenates by
# copying each input into its slice of the output, so concatenations stay inside the region.
_BNNS = _Target("bnns", quantized=False, concat=True, any_groups=True, layout="NCHW", fuse_v2_activations=False)


# --------------------------------------------------------------------------------------------
# Small helpers on Relax IR
# --------------------------------------------------------------------------------------------


def _op_name(expr) -> str | None:
    if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op):
        return expr.op.name
    return None


# How a symbolic dimension may be named in a description (docs/subgraph-format.md, version 3).
_SYM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


class _Sym:
    """A symbolic dimension of a tensor: a bare ``tir.Var`` of its shape.

    Equal only to the same variable, so shape comparisons say "the same for every value" only
    when TVM's types say so.  It has no arithmetic and no ordering on purpose: a matcher that
    computes with a dimension (a channel count, a split size) raises TypeError, which refuses
    the unit, rather than writing an expression the format cannot carry."""

    __slots__ = ("var",)

    def __init__(self, var):
        self.var = var

    @property
    def name(self) -> str:
        return str(self.var.name)

    def __eq__(self, other):
        return isinstance(other, _Sym) and self.var.same_as(other.var)

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash(self.var)

    def __repr__(self):
        return f"<sym {self.name}>"


def _shape(ty) -> tuple | None:
    """The shape of a tensor type: ints, and a _Sym for each dimension that is a bare
    ``tir.Var``; None when the shape is unknown or a dimension is any other expression
    (``n * 2``: the format names variables only)."""
    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        return None
    shape = ty.shape
    if not isinstance(shape, relax.ShapeExpr):
        return None
    out = []
    for v in shape.values:
        if isinstance(v, tvm.tirx.IntImm):
            out.append(int(v.value))
        elif isinstance(v, tvm.tirx.Var):
            out.append(_Sym(v))
        else:
            return None
    return tuple(out)


def _static_shape(ty) -> tuple[int, ...] | None:
    """The shape of a tensor type as ints, or None when it is unknown or symbolic."""
    shape = _shape(ty)
    if shape is None or any(isinstance(d, _Sym) for d in shape):
        return None
    return shape


def _syms_of(shapes) -> dict | None:
    """name -> _Sym over the dimensions of `shapes`; None when two different variables share a
    name (the runtime knows symbols by name only) or a name is not one the format allows."""
    found: dict = {}
    for s in shapes:
        for d in s:
            if not isinstance(d, _Sym):
                continue
            if _SYM_NAME.fullmatch(d.name) is None or found.get(d.name, d) != d:
                return None
            found[d.name] = d
    return found


def _broadcasts(ins, out) -> bool:
    """Every shape of `ins` broadcasts to `out` for every value of the symbols: right-aligned,
    each dimension is the output's own (the same int, or the same variable) or a static 1.
    Anything else (``seq`` against 64, or two different variables) is a shape TVM checks only
    at run time."""
    for s in ins:
        if len(s) > len(out):
            return False
        for d, o in zip(s[::-1], out[::-1]):
            if d != o and not (isinstance(d, int) and d == 1):
                return False
    return True


def _static_split(shape):
    """(product of the int dimensions, how often each variable occurs): two shapes hold the
    same number of elements for every value of the symbols when these agree."""
    prod, syms = 1, {}
    for d in shape:
        if isinstance(d, _Sym):
            syms[d] = syms.get(d, 0) + 1
        else:
            prod *= d
    return prod, syms


def _sym_node_ok(node, tensors) -> bool:
    """Whether a node on tensors with symbolic dimensions is valid for every value >= 1 of
    its symbols, which is what the runtime checks once it has bound them.  Only ops whose
    attributes carry no extent: those that do (conv2d, pooling, lrn, channel_shuffle) are
    layout ops, which symbolic units never take (_sym_unit_ok)."""
    ins = [tensors[k].shape for k in node["inputs"]]
    outs = [tensors[k].shape for k in node["outputs"]]
    if not any(isinstance(d, _Sym) for s in ins + outs for d in s):
        return True
    op, attrs = node["op"], node["attrs"]
    if op in ("relu", "relu6", "clip", "activation", "softmax"):
        # Softmax over any axis, a symbolic one too: each row is normalised on its own.
        return ins[0] == outs[0]
    if op in ("add", "subtract", "multiply", "divide"):
        return _broadcasts(ins, outs[0])
    if op == "dense":
        # The weight is a constant [N, K]: K must not vary.
        x, w = ins[0], ins[1]
        return isinstance(x[-1], int) and x[-1] == w[1] and outs[0] == x[:-1] + (w[0],)
    if op == "matmul":
        a, b, o = ins[0], ins[1], outs[0]
        # The contraction and the other two extents are each one dimension (the same int or
        # variable on both sides); batch dimensions broadcast as elementwise ops do.
        return (len(a) >= 2 and len(b) >= 2 and a[-1] == b[-2] and o[-2:] == (a[-2], b[-1])
                and _broadcasts([a[:-2], b[:-2]], o[:-2]))
    if op == "layer_norm":
        return isinstance(ins[0][-1], int) and ins[0] == outs[0]
    if op == "scale_shift":
        return isinstance(ins[0][_norm_axis(int(attrs["axis"]), len(ins[0]))], int) and ins[0] == outs[0]
    if op == "transpose":
        return outs[0] == tuple(ins[0][a] for a in attrs["axes"])
    if op == "reshape":
        # The output's variables are the input's, and the static rest holds as many elements.
        return _static_split(ins[0]) == _static_split(outs[0])
    if op in ("split", "concatenate"):
        whole, pieces = (ins[0], outs) if op == "split" else (outs[0], ins)
        axis = _norm_axis(int(attrs["axis"]), len(whole))
        if any(len(p) != len(whole) or not isinstance(p[axis], int) for p in pieces + [whole]):
            return False
        return all(p[:axis] + p[axis + 1:] == whole[:axis] + whole[axis + 1:] for p in pieces)
    return False


def _dtype(ty) -> str | None:
    return str(ty.dtype) if isinstance(ty, relax.TensorType) else None


def _ints(arr) -> list[int]:
    return [int(v) for v in arr]


def _scalar(expr) -> float | None:
    """A clip bound: a PrimValue / IntImm / FloatImm argument as a Python float."""
    v = getattr(expr, "value", None)
    if v is None:
        return None
    v = getattr(v, "value", v)  # PrimValue wraps a PrimExpr
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _norm_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _layout_perm(src: str, dst: str) -> tuple[int, ...]:
    return tuple(src.index(c) for c in dst)


class _FuncInfo:
    """Definitions, users and constant values of one Relax function."""

    def __init__(self, func: relax.Function, mod: tvm.IRModule | None = None):
        self.func = func
        self.mod = mod
        self._block_names: dict = {}
        self._clamps: dict = {}
        self.defs: dict = {}
        self.block_of: dict = {}
        self.users: dict = {}
        self.escapes: set = set()
        self._const_cache: dict = {}
        self.index: dict = {}  # binding var -> its position in the function
        for bi, block in enumerate(func.body.blocks):
            for b in block.bindings:
                self.index[b.var] = len(self.index)
                if isinstance(b, relax.VarBinding):
                    self.defs[b.var] = b.value
                self.block_of[b.var] = bi
                for v in relax.analysis.free_vars(b.value):  # VarBinding or MatchCast
                    self.users.setdefault(v, []).append(b.var)
        for v in relax.analysis.free_vars(func.body.body):
            self.escapes.add(v)

    def prim_has_block(self, gv, block: str) -> bool:
        """Whether the PrimFunc `gv` computes a block named `block` (how topi names its ops)."""
        key = (gv.name_hint, block)
        if key not in self._block_names:
            ok = False
            if self.mod is not None and gv in self.mod.functions:
                ok = f'T.sblock("{block}")' in self.mod[gv].script()
            self._block_names[key] = ok
        return self._block_names[key]

    def prim_clamp(self, gv):
        """("max"|"min", bound) if the PrimFunc `gv` is an elementwise clamp of its one input
        with a constant, else None.

        This is how TVM's ONNX importer writes an opset-6/7 Clip (bounds as attributes, not
        inputs): `topi.maximum(x, lo)` then `topi.minimum(., hi)`, each lowered to a PrimFunc of
        two buffers whose only block stores `max(x[i...], float32(c))` at the same indices;
        the bound lives in the TIR, not in the call's arguments.  Checked structurally: two
        float32 buffers of one shape, a nest of plain loops over exactly that shape, one
        spatial block, the store and the load at the block's own iteration variables."""
        if gv.name_hint not in self._clamps:
            self._clamps[gv.name_hint] = self._prim_clamp(gv)
        return self._clamps[gv.name_hint]

    def _prim_clamp(self, gv):
        if self.mod is None or gv not in self.mod.functions:
            return None
        f = self.mod[gv]
        params = list(getattr(f, "params", ()))
        if type(f).__name__ != "PrimFunc" or len(params) != 2:
            return None
        src, dst = params
        st, sb = getattr(src, "ty", None), getattr(dst, "ty", None)
        if type(st).__name__ != "BufferType" or type(sb).__name__ != "BufferType":
            return None
        if str(st.dtype) != "float32" or str(sb.dtype) != "float32":
            return None
        try:
            shape = [int(v) for v in sb.shape]
            if [int(v) for v in st.shape] != shape:
                return None
        except (TypeError, ValueError):  # symbolic
            return None
        root = f.body
        if type(root).__name__ != "SBlockRealize":
            return None
        rb = root.block
        if rb.alloc_buffers or rb.match_buffers or rb.init is not None or rb.iter_vars:
            return None
        stmt, loops = rb.body, []
        while type(stmt).__name__ == "For":
            if (int(stmt.kind) != 0 or int(stmt.min) != 0 or stmt.thread_binding is not None
                    or (stmt.step is not None and int(stmt.step) != 1)):
                return None
            loops.append(stmt)
            stmt = stmt.body
        if type(stmt).__name__ != "SBlockRealize" or len(loops) != len(shape):
            return None
        if [int(lp.extent) for lp in loops] != shape:
            return None
        pred = stmt.predicate
        if not (type(pred).__name__ == "IntImm" and int(pred.value) == 1):
            return None
        if len(stmt.iter_values) != len(loops) or not all(
                v.same_as(lp.loop_var) for v, lp in zip(stmt.iter_values, loops)):
            return None
        blk = stmt.block
        if blk.alloc_buffers or blk.match_buffers or blk.init is not None:
            return None
        ivs = list(blk.iter_vars)
        if len(ivs) != len(shape) or any(int(iv.iter_type) != 0 or int(iv.dom.min) != 0 or
                                         int(iv.dom.extent) != n for iv, n in zip(ivs, shape)):
            return None
        store = blk.body
        if type(store).__name__ != "BufferStore" or not store.buffer.same_as(dst):
            return None
        if len(store.indices) != len(ivs) or not all(i.same_as(iv.var) for i, iv in zip(store.indices, ivs)):
            return None
        val = store.value
        kind = {"Max": "max", "Min": "min"}.get(type(val).__name__)
        if kind is None:
            return None
        for load, c in ((val.a, val.b), (val.b, val.a)):
            if type(load).__name__ != "TensorLoad" or type(c).__name__ != "FloatImm":
                continue
            if not load.source.same_as(src) or len(load.indices) != len(ivs):
                continue
            if not all(i.same_as(j) for i, j in zip(load.indices, store.indices)):
                continue
            return kind, float(c.value)
        return None

    def single_user(self, var):
        """The binding var of the only user of `var` in the same block, if there is exactly one."""
        if var in self.escapes or not isinstance(var, relax.DataflowVar):
            return None
        users = self.users.get(var, [])
        if len(users) != 1 or self.block_of.get(users[0]) != self.block_of.get(var):
            return None
        return users[0]

    def value_of(self, expr):
        """Follow a Var to the expression bound to it (once)."""
        if isinstance(expr, relax.Var) and expr in self.defs:
            return self.defs[expr]
        return expr

    def const_value(self, expr) -> np.ndarray | None:
        """Numpy value of `expr` if it is a constant or computed from constants only.

        Evaluated here, not by FoldConstant, so that ``dequantize(int8 constant)`` weights
        keep their integer form for the quantized patterns.
        """
        key = expr
        if key in self._const_cache:
            return self._const_cache[key]
        val = self._const_value(expr)
        self._const_cache[key] = val
        return val

    def _const_value(self, expr):
        if isinstance(expr, tvm.ir.expr.Constant):
            return expr.value.numpy()
        if isinstance(expr, relax.Var):
            if expr not in self.defs:
                return None
            return self.const_value(self.defs[expr])
        name = _op_name(expr)
        if name is None:
            return None
        a = expr.attrs
        if name == "relax.permute_dims":
            x = self.const_value(expr.args[0])
            if x is None:
                return None
            axes = None if a.axes is None else _ints(a.axes)
            return np.transpose(x, axes)
        if name == "relax.reshape":
            x = self.const_value(expr.args[0])
            shape = _static_shape(expr.ty) if hasattr(expr, "ty") else None
            if x is None or shape is None:
                return None
            return x.reshape(shape)
        if name == "relax.astype":
            x = self.const_value(expr.args[0])
            return None if x is None else x.astype(str(a.dtype))
        if name in ("relax.expand_dims", "relax.squeeze"):
            x = self.const_value(expr.args[0])
            shape = _static_shape(expr.ty)
            return None if x is None or shape is None else x.reshape(shape)
        if name in ("relax.add", "relax.subtract", "relax.multiply", "relax.divide"):
            x, y = (self.const_value(e) for e in expr.args)
            if x is None or y is None:
                return None
            fn = {"relax.add": np.add, "relax.subtract": np.subtract, "relax.multiply": np.multiply,
                  "relax.divide": np.divide}[name]
            return fn(x, y).astype(np.result_type(x, y))
        if name == "relax.isnan":
            x = self.const_value(expr.args[0])
            return None if x is None else np.isnan(x)
        if name == "relax.where":
            c, x, y = (self.const_value(e) for e in expr.args)
            if c is None or x is None or y is None:
                return None
            return np.where(c, x, y).astype(np.result_type(x, y))
        if name == "relax.dequantize":
            q = self.dq_const(expr)
            if q is None:
                return None
            data, scale, zp, axis = q
            return _dequantize_np(data, scale, zp, axis).astype(str(a.out_dtype))
        return None

    def dq_const(self, expr):
        """(int data, scale[], zero_point[], axis) if `expr` is dequantize(constant), possibly
        behind permute_dims (the axis follows the permutation)."""
        expr = self.value_of(expr)
        name = _op_name(expr)
        if name == "relax.permute_dims":
            inner = self.dq_const(expr.args[0])
            if inner is None:
                return None
            data, scale, zp, axis = inner
            axes = list(range(data.ndim))[::-1] if expr.attrs.axes is None else _ints(expr.attrs.axes)
            return np.transpose(data, axes), scale, zp, axes.index(axis)
        if name != "relax.dequantize":
            return None
        data = self.const_value(expr.args[0])
        scale = self.const_value(expr.args[1])
        zp = self.const_value(expr.args[2])
        if data is None or scale is None or zp is None or data.dtype.kind not in "iu":
            return None
        axis = _norm_axis(int(expr.attrs.axis), data.ndim)
        return data, np.atleast_1d(scale).astype(np.float64), np.atleast_1d(zp).astype(np.int64), axis


def _dequantize_np(data, scale, zp, axis):
    shape = [1] * data.ndim
    if scale.size > 1 or zp.size > 1:
        shape[axis] = -1
    s = scale.reshape(shape) if scale.size > 1 else scale.reshape(())
    z = zp.reshape(shape) if zp.size > 1 else zp.reshape(())
    return s * (data.astype(np.float64) - z)


def _quant(scale, zp, axis) -> dict:
    scale = np.atleast_1d(np.asarray(scale, dtype=np.float64))
    zp = np.atleast_1d(np.asarray(zp, dtype=np.int64))
    if scale.size > 1 and zp.size == 1:
        zp = np.repeat(zp, scale.size)  # per-channel: one entry per channel in both lists
    return {"scale": [float(s) for s in scale], "zero_point": [int(z) for z in zp], "axis": int(axis)}


# --------------------------------------------------------------------------------------------
# Units: one subgraph node (sometimes two) built from one or more bindings
# --------------------------------------------------------------------------------------------


@dataclass
class _Tensor:
    shape: tuple
    dtype: str
    quant: dict | None = None
    const: np.ndarray | None = None


@dataclass
class _Unit:
    out_var: object  # the binding var whose value the unit computes
    absorbed: list  # binding vars the unit replaces (chain intermediates + out_var)
    nodes: list = field(default_factory=list)  # dicts: op, inputs, outputs, attrs
    tensors: dict = field(default_factory=dict)  # key (relax Var or int) -> _Tensor
    req: str | None = None  # 4-D layout this unit's ops are written in (None: agnostic)
    convertible: bool = True  # can be re-expressed in NHWC if req is NCHW/None
    extra_outs: list = field(default_factory=list)  # more vars it computes (split's pieces)


class _Keys:
    """Fresh integer keys for constants and unit-internal tensors."""

    def __init__(self):
        self.n = 0

    def __call__(self):
        self.n += 1
        return self.n


class _Matcher:
    def __init__(self, fi: _FuncInfo, target: _Target):
        self.fi = fi
        self.t = target
        self.keys = _Keys()

    # -- tensors -----------------------------------------------------------------------------

    def var_tensor(self, unit, var, quant=None) -> object | None:
        shape = _shape(var.ty)
        dt = _dtype(var.ty)
        if shape is None or dt is None:
            return None
        unit.tensors[var] = _Tensor(shape, dt, quant)
        return var

    def const_tensor(self, unit, arr, quant=None):
        k = self.keys()
        arr = np.ascontiguousarray(arr)
        unit.tensors[k] = _Tensor(tuple(arr.shape), str(arr.dtype), quant, arr)
        return k

    def operand(self, unit, expr, dtype="float32"):
        """A data operand: a Var (input tensor) or a constant (constant tensor)."""
        c = self.fi.const_value(expr)
        if c is not None:
            if str(c.dtype) != dtype:
                return None
            return self.const_tensor(unit, c)
        if isinstance(expr, relax.Var) and _dtype(expr.ty) == dtype:
            return self.var_tensor(unit, expr)
        return None

    # -- chains -------------------------------------------------------------------------------

    def follow(self, var, names):
        """If the only user of `var` is a call to one of `names`, return (user var, call)."""
        u = self.fi.single_user(var)
        if u is None:
            return None
        val = self.fi.defs.get(u)
        if _op_name(val) in names:
            return u, val
        return None

    def activation_of(self, call):
        name = _op_name(call)
        if name == "relax.nn.relu":
            return "relu"
        if name == "relax.clip":
            lo, hi = _scalar(call.args[1]), _scalar(call.args[2])
            if lo is None or hi is None:
                return None
            return self.clip_activation(lo, hi)
        return None

    def minmax(self, var, call):
        """("max"|"min", data, bound) if `var = call` is an elementwise maximum/minimum of a
        tensor with a scalar constant: relax.maximum/minimum, or the topi maximum/minimum
        call_tir that the ONNX importer emits for Clip: with the bound as a second argument
        (opset >= 11, bounds as inputs) or inside the PrimFunc (opset < 11, bounds as
        attributes; see _FuncInfo.prim_clamp)."""
        name = _op_name(call)
        if name in ("relax.maximum", "relax.minimum"):
            kind, args = name[6:9], list(call.args)
        elif name == "relax.call_tir":
            gv = call.args[0]
            m = re.fullmatch(r"(maximum|minimum)\d*", getattr(gv, "name_hint", ""))
            if m is None or not isinstance(call.args[1], relax.Tuple):
                return None
            kind, args = m.group(1)[:3], list(call.args[1].fields)
            if len(args) == 1:
                # The bound is a constant inside the kernel (an opset-7 Clip's attributes).
                clamp = self.fi.prim_clamp(gv)
                d = args[0]
                if clamp is None or clamp[0] != kind or not isinstance(d, relax.Var):
                    return None
                if self.fi.const_value(d) is not None or _dtype(d.ty) != "float32":
                    return None
                if _shape(d.ty) is None or _shape(d.ty) != _shape(var.ty):
                    return None
                return kind, d, clamp[1]
            if not self.fi.prim_has_block(gv, "T_" + m.group(1)):
                return None
        else:
            return None
        if len(args) != 2:
            return None
        for d, c in ((args[0], args[1]), (args[1], args[0])):
            cv = self.fi.const_value(c)
            if cv is None or cv.size != 1 or not isinstance(d, relax.Var) or self.fi.const_value(d) is not None:
                continue
            if _shape(d.ty) is None or _shape(d.ty) != _shape(var.ty):
                return None
            if _dtype(d.ty) != "float32":
                return None
            return kind, d, float(cv.reshape(-1)[0])
        return None

    def minmax_chain(self, var, call, absorbed):
        """A max (and/or min) with constants starting at `var = call`: (last var, data, lo, hi)."""
        first = self.minmax(var, call)
        if first is None:
            return None
        kind, data, bound = first
        lo, hi = (bound, math.inf) if kind == "max" else (-math.inf, bound)
        last = var
        u = self.fi.single_user(var)
        if u is not None and u in self.fi.defs:
            second = self.minmax(u, self.fi.defs[u])
            if second is not None and second[0] != kind and second[1].same_as(var):
                if second[0] == "min":
                    hi = second[2]
                else:
                    lo = second[2]
                absorbed.append(u)
                last = u
        return last, data, lo, hi

    @staticmethod
    def clip_activation(lo, hi):
        if lo == 0.0 and hi == 6.0:
            return "relu6"
        if lo == 0.0 and hi >= _F32_MAX:
            return "relu"
        # JSON has no infinities: an open side is the float32 limit.
        return {"clip": [max(lo, -_F32_LIMIT), min(hi, _F32_LIMIT)]}

    def take_activation(self, var, absorbed, v2=None):
        """The activation applied to `var` alone, if any: (its result var, activation), with the
        bindings it spans appended to `absorbed`; else (var, "none").  `v2`: whether version-2
        activations may be taken (default: the target fuses them)."""
        if v2 is None:
            v2 = self.t.fuse_v2_activations
        pat = self.act_pattern(var, v2)
        if pat is None or (isinstance(pat[1], str) and pat[1] in self.t.never_fused):
            return var, "none"
        last, act, spans = pat
        absorbed.extend(spans)
        return last, act

    def act_pattern(self, var, v2=True):
        """Recognise an activation computed from `var` and nothing else: (result var,
        activation, the binding vars it spans in binding order) or None.  Every user of `var`
        and of each intermediate must lie inside the pattern.  Version-2 activations (the ones
        TVM's ONNX importer spells as chains) only when `v2`."""
        # `var` may be a function parameter; the intermediates are dataflow vars (single_user).
        if _dtype(var.ty) != "float32" or var in self.fi.escapes:
            return None
        users = [u for u in self.fi.users.get(var, []) if u in self.fi.defs]
        block = self.fi.block_of.get(users[0]) if users else None
        if len(users) != len(self.fi.users.get(var, [])) or any(self.fi.block_of.get(u) != block for u in users):
            return None
        if var in self.fi.block_of and self.fi.block_of[var] != block:
            return None
        if len(users) == 1:
            u = users[0]
            call = self.fi.defs[u]
            act = self.activation_of(call)
            if act is not None and call.args[0].same_as(var):
                return u, act, [u]
            extra = []
            chain = self.minmax_chain(u, call, extra)
            if chain is not None and chain[1].same_as(var):
                return chain[0], self.clip_activation(chain[2], chain[3]), [u] + extra
            return self.v2_unary(var, u, call) if v2 else None
        if len(users) == 2 and v2:
            for first, second in (users, users[::-1]):
                for fn in (self.silu_chain, self.hardswish_chain, self.gelu_chain):
                    pat = fn(var, first, second)
                    if pat is not None:
                        return pat
        if len(users) >= 2 and v2:
            return self.gelu_tanh_chain(var, users)
        return None

    # The ops a written-out tanh GELU is made of.
    _GELU_TANH_OPS = {"relax.add": np.add, "relax.subtract": np.subtract, "relax.multiply": np.multiply,
                      "relax.divide": np.divide, "relax.power": np.power, "relax.tanh": np.tanh}

    def gelu_tanh_chain(self, var, users):
        """GELU's tanh form written out, as exporters do below ONNX opset 20:
        0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), with x^3 as power(x, 3) or
        x * (x * x), the constants and products in any order or grouping.

        The smallest set of bindings that starts at `var`'s users, reads nothing but `var`, its
        own members and scalar constants, uses only +, -, *, /, power and tanh, and is closed
        (every user of `var` and of each member but the last is a member) is grown in binding
        order; each time it is closed and holds a tanh, it is evaluated in float64 on sample
        points and compared with the formula.  (result var, "gelu_tanh", members) or None."""
        shape, block = _shape(var.ty), self.fi.block_of.get(users[0])
        members: list = []
        inside = {var}
        pending = set(users)
        xs = np.linspace(-6.0, 6.0, 49)
        want = 0.5 * xs * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (xs + 0.044715 * xs ** 3)))
        while pending and len(members) < 16:
            u = min(pending, key=lambda v: self.fi.index[v])
            pending.discard(u)
            call = self.fi.defs.get(u)
            fn = self._GELU_TANH_OPS.get(_op_name(call))
            if fn is None or self.fi.block_of.get(u) != block or _shape(u.ty) != shape \
                    or _dtype(u.ty) != "float32":
                return None
            for a in call.args:
                if not (isinstance(a, relax.Var) and a in inside):
                    c = self.fi.const_value(a)
                    if c is None or c.size != 1:
                        return None
            members.append(u)
            inside.add(u)
            # Closed: everything but the newest member is used only inside, and no member but
            # the newest leaves the block.
            closed = all(all(w in inside for w in self.fi.users.get(m, [])) and m not in self.fi.escapes
                         for m in [var] + members[:-1])
            if closed and any(_op_name(self.fi.defs[m]) == "relax.tanh" for m in members):
                got = self._eval_chain(var, members, xs)
                if got is not None and np.allclose(got, want, rtol=1e-5, atol=1e-6):
                    return u, "gelu_tanh", members
            pending.update(w for w in self.fi.users.get(u, []) if w not in inside)
        return None

    def _eval_chain(self, var, members, xs):
        """Evaluate the elementwise bindings `members` of `var` (in order) at `xs`, in float64."""
        env = {var: xs}
        with np.errstate(all="ignore"):
            for m in members:
                call = self.fi.defs[m]
                args = [env[a] if isinstance(a, relax.Var) and a in env
                        else np.float64(self.fi.const_value(a).reshape(-1)[0]) for a in call.args]
                env[m] = self._GELU_TANH_OPS[_op_name(call)](*args)
        out = env[members[-1]]
        return out if np.all(np.isfinite(out)) else None

    _V2_UNARY = {"relax.sigmoid": "sigmoid", "relax.tanh": "tanh", "relax.nn.silu": "silu",
                 "relax.nn.gelu": "gelu", "relax.nn.gelu_tanh": "gelu_tanh"}

    def v2_unary(self, var, u, call):
        """A version-2 activation of `var` that starts at binding `u = call` and does not read
        `var` again: one op (sigmoid, tanh, leaky_relu, TVM's own silu/gelu) or the HardSigmoid
        chain.  (result var, activation, binding vars) or None."""
        if _shape(u.ty) != _shape(var.ty) or _dtype(var.ty) != "float32":
            return None
        name = _op_name(call)
        if name in self._V2_UNARY and call.args[0].same_as(var):
            return u, self._V2_UNARY[name], [u]
        if name == "relax.nn.leakyrelu" and call.args[0].same_as(var):
            return u, {"leaky_relu": float(call.attrs.alpha)}, [u]
        return self.hardsigmoid_chain(var, u, call)

    def _scalar_operand(self, call, var):
        """For a binary `call` of `var` and a scalar constant: that constant as a float."""
        if len(call.args) != 2:
            return None
        a, b = call.args
        other = b if a.same_as(var) else a if b.same_as(var) else None
        if other is None or (a.same_as(var) and b.same_as(var)):
            return None
        c = self.fi.const_value(other)
        if c is None or c.size != 1:
            return None
        return float(c.reshape(-1)[0])

    def _step(self, var, names, const=None, tol=1e-6):
        """The only user of `var`, if it is a call to one of `names` of `var` and (if `const` is
        given) a scalar constant equal to it: (user var, call, the scalar or None)."""
        nxt = self.follow(var, names)
        if nxt is None or _shape(nxt[0].ty) != _shape(var.ty):
            return None
        u, call = nxt
        if _op_name(call) == "relax.clip":
            if not call.args[0].same_as(var):
                return None
            return u, call, None
        c = self._scalar_operand(call, var)
        if c is None:
            return None
        if const is not None and abs(c - const) > tol * max(1.0, abs(const)):
            return None
        if _op_name(call) in ("relax.divide", "relax.subtract") and not call.args[0].same_as(var):
            return None
        return u, call, c

    def _clip_bounds(self, call):
        return _scalar(call.args[1]), _scalar(call.args[2])

    def hardsigmoid_chain(self, var, u, call):
        """multiply(var, alpha) -> add(., beta) -> clip(., 0, 1): HardSigmoid as imported."""
        if _op_name(call) != "relax.multiply":
            return None
        alpha = self._scalar_operand(call, var)
        if alpha is None:
            return None
        add = self._step(u, ("relax.add",))
        if add is None:
            return None
        clip = self._step(add[0], ("relax.clip",))
        if clip is None or self._clip_bounds(clip[1]) != (0.0, 1.0):
            return None
        return clip[0], {"hardsigmoid": [alpha, add[2]]}, [u, add[0], clip[0]]

    def _other_factor_is(self, var, second, inner):
        """`second` = multiply(var, inner) in either order."""
        call = self.fi.defs.get(second)
        if _op_name(call) != "relax.multiply" or len(call.args) != 2:
            return False
        a, b = call.args
        return (a.same_as(var) and b.same_as(inner)) or (b.same_as(var) and a.same_as(inner))

    def silu_chain(self, var, first, second):
        """sigmoid(var), then multiply(var, that): SiLU."""
        call = self.fi.defs[first]
        if _op_name(call) != "relax.sigmoid" or self.fi.single_user(first) != second:
            return None
        if not self._other_factor_is(var, second, first):
            return None
        return second, "silu", [first, second]

    def hardswish_chain(self, var, first, second):
        """add(var, 3) -> clip(0, 6) -> divide(6) (or multiply(1/6)), times var: HardSwish as
        imported; or var times HardSigmoid(1/6, 1/2) of var."""
        call = self.fi.defs[first]
        hs = self.hardsigmoid_chain(var, first, call)
        if hs is not None:
            last, act, spans = hs
            a, b = act["hardsigmoid"]
            if abs(a - 1.0 / 6.0) > 1e-6 or abs(b - 0.5) > 1e-6:
                return None
        else:
            if _op_name(call) != "relax.add" or self._scalar_operand(call, var) != 3.0:
                return None
            clip = self._step(first, ("relax.clip",))
            if clip is None or self._clip_bounds(clip[1]) != (0.0, 6.0):
                return None
            scale = self._step(clip[0], ("relax.divide",), 6.0) or self._step(clip[0], ("relax.multiply",), 1.0 / 6.0)
            if scale is None:
                return None
            last, spans = scale[0], [first, clip[0], scale[0]]
        if self.fi.single_user(last) != second or not self._other_factor_is(var, second, last):
            return None
        return second, "hardswish", spans + [second]

    def gelu_chain(self, var, first, second):
        """divide(var, sqrt 2) (or multiply by 1/sqrt 2) -> erf -> add(1) -> times var -> times
        1/2, in either order of the two products: GELU (erf form) as imported."""
        call = self.fi.defs[first]
        r2 = math.sqrt(2.0)
        if _op_name(call) == "relax.divide":
            if self._scalar_operand(call, var) is None or not call.args[0].same_as(var):
                return None
            ok = abs(self._scalar_operand(call, var) - r2) <= 1e-6
        elif _op_name(call) == "relax.multiply":
            c = self._scalar_operand(call, var)
            ok = c is not None and abs(c - 1.0 / r2) <= 1e-6
        else:
            return None
        if not ok:
            return None
        erf = self.follow(first, ("relax.erf",))
        if erf is None:
            return None
        one = self._step(erf[0], ("relax.add",), 1.0)
        if one is None:
            return None
        spans = [first, erf[0], one[0]]
        # var * (erf + 1), then * 0.5
        if self.fi.single_user(one[0]) == second and self._other_factor_is(var, second, one[0]):
            half = self._step(second, ("relax.multiply",), 0.5)
            if half is None:
                return None
            return half[0], "gelu", spans + [second, half[0]]
        # (var * 0.5) * (erf + 1)
        h = self.fi.defs[second]
        if _op_name(h) == "relax.multiply" and self._scalar_operand(h, var) == 0.5:
            last = self.fi.single_user(second)
            if last is not None and last == self.fi.single_user(one[0]) and self._other_factor_is(second, last, one[0]):
                return last, "gelu", spans + [second, last]
        return None

    def minmax_unit(self, var, call):
        absorbed = [var]
        chain = self.minmax_chain(var, call, absorbed)
        if chain is None:
            return None
        last, data, lo, hi = chain
        unit = _Unit(last, absorbed)
        x = self.var_tensor(unit, data)
        if x is None or self.var_tensor(unit, last) is None:
            return None
        unit.nodes.append(self._act_node(x, last, self.clip_activation(lo, hi)))
        return unit

    @staticmethod
    def _act_node(x, out, act):
        """The node of a lone activation `act` (as activation_of / clip_activation give it)."""
        if isinstance(act, dict):
            lo, hi = act["clip"]
            return {"op": "clip", "inputs": [x], "outputs": [out], "attrs": {"min": lo, "max": hi}}
        return {"op": act, "inputs": [x], "outputs": [out], "attrs": {}}

    def take_bias(self, var, channel_axis, rank, n):
        """An `add` of a constant that broadcasts along `channel_axis` only: (user var, bias[n])."""
        nxt = self.follow(var, ("relax.add",))
        if nxt is None:
            return None
        u, call = nxt
        a, b = call.args
        other = b if a.same_as(var) else a if b.same_as(var) else None
        if other is None:
            return None
        c = self.fi.const_value(other)
        if c is None or c.ndim > rank:
            return None
        shape = (1,) * (rank - c.ndim) + tuple(c.shape)
        want = [1] * rank
        want[channel_axis] = n
        if list(shape) != want:
            return None
        if _shape(u.ty) != _shape(var.ty):
            return None
        return u, c.reshape(-1)

    def take_bias_act(self, unit, ins, axis, rank, n, bias_scale=None):
        """Fold the bias add (see take_bias) and the activation that follow unit.out_var into
        `unit`, appending the bias constant to `ins`: float32, or for a quantized op (with
        `bias_scale` = s_data * s_weight) int32 at that scale.  Returns (last var, activation),
        or None when the bias cannot be expressed."""
        out = unit.out_var
        bias = self.take_bias(out, axis, rank, n)
        if bias_scale is None:
            b = None
            if bias is not None:
                out, b = bias[0], bias[1].astype(np.float64)
                unit.absorbed.append(out)
            bn = self.take_batch_norm(out, axis, n)
            if bn is not None:
                # Fold: w' = w * s per output channel (axis 0 of every weight layout here),
                # b' = b * s + shift.
                out, scale, shift, spans = bn
                unit.absorbed.extend(spans)
                w = unit.tensors[ins[1]]
                w.const = (w.const.astype(np.float64) * scale.reshape((-1,) + (1,) * (w.const.ndim - 1))).astype("float32")
                b = shift if b is None else b * scale + shift
            if b is not None:
                ins.append(self.const_tensor(unit, b.astype("float32")))
            return self.take_activation(out, unit.absorbed)
        if bias is not None:
            out = bias[0]
            unit.absorbed.append(out)
            if bias_scale is None:
                ins.append(self.const_tensor(unit, bias[1].astype("float32")))
            else:
                # Whether the model had an int32 dequantized bias or a float one, the format wants
                # int32 at scale s_data * s_weight: re-express it (exact for the int32 case).
                b = np.rint(bias[1].astype(np.float64) / np.broadcast_to(bias_scale, (n,)))
                if np.any(np.abs(b) >= 2**31):
                    return None
                ins.append(self.const_tensor(unit, b.astype("int32"),
                                             _quant(bias_scale, np.zeros(bias_scale.size, np.int64), 0)))
        return self.take_activation(out, unit.absorbed, v2=False)

    def batch_norm_of(self, call, axis, n):
        """(scale, shift) of an inference `relax.nn.batch_norm` call with constant statistics on
        channel axis `axis` of extent n: y = x * scale + shift."""
        a = call.attrs
        if getattr(a, "training", False) or len(call.args) != 5:
            return None
        rank = len(_shape(call.args[0].ty) or ())
        if _norm_axis(int(a.axis), rank) != axis:
            return None
        gamma, beta, mean, var = (self.fi.const_value(e) for e in call.args[1:])
        if any(v is None or v.shape != (n,) for v in (gamma, beta, mean, var)):
            return None
        gamma = gamma.astype(np.float64) if bool(a.scale) else np.ones(n)
        beta = beta.astype(np.float64) if bool(a.center) else np.zeros(n)
        scale = gamma / np.sqrt(var.astype(np.float64) + float(a.epsilon))
        return scale, beta - mean.astype(np.float64) * scale

    def bn_result(self, bn_var):
        """The var bound to field 0 of a batch_norm's result, if that is its only use (the
        running statistics are dropped before matching when unused)."""
        u = self.fi.single_user(bn_var)
        val = self.fi.defs.get(u) if u is not None else None
        if not isinstance(val, relax.TupleGetItem) or int(val.index) != 0:
            return None
        return u

    def take_batch_norm(self, var, axis, n):
        """A batch_norm that is the only user of `var`, normalising axis `axis` (extent n):
        (its result var, scale, shift, the binding vars it spans)."""
        nxt = self.follow(var, ("relax.nn.batch_norm",))
        if nxt is None or not nxt[1].args[0].same_as(var):
            return None
        coef = self.batch_norm_of(nxt[1], axis, n)
        res = self.bn_result(nxt[0])
        if coef is None or res is None:
            return None
        return res, coef[0], coef[1], [nxt[0], res]

    def f32_tail(self, unit, ins, axis, rank, n):
        """take_bias_act for a float32 op, ending the unit there: the activation, or None."""
        out, act = self.take_bias_act(unit, ins, axis, rank, n)
        unit.out_var = out
        if self.var_tensor(unit, out) is None:
            return None
        return act

    # -- quantized (QDQ) ops -----------------------------------------------------------------------

    def q_input(self, dq):
        """(x, scale, zero point) of `dq` = dequantize(x) with per-tensor int8/uint8 parameters,
        if this target takes quantized ops."""
        if not self.t.quantized:
            return None
        x_var = dq.args[0]
        xs, xz = self.fi.const_value(dq.args[1]), self.fi.const_value(dq.args[2])
        if not isinstance(x_var, relax.Var) or _dtype(x_var.ty) not in _QDTYPES or xs is None or xz is None:
            return None
        if xs.size != 1 or xz.size != 1:
            return None
        return x_var, xs, xz

    @staticmethod
    def q_weight_ok(ws, wz, waxis):
        """Per-channel scales only along the output channels (axis 0), one zero point."""
        return not (ws.size > 1 and waxis != 0) and not (wz.size > 1 and np.any(wz != wz[0]))

    def q_weight(self, unit, wdata, ws, wz):
        return self.const_tensor(unit, wdata, _quant(ws, wz[:1] if wz.size > 1 else wz, 0))

    def q_tail(self, unit, ins, xs, ws, axis, rank, n):
        """take_bias_act for a quantized op, then the quantize that must end it (per-tensor
        int8/uint8, its axis `axis`): (quantized var, activation), or None."""
        tail = self.take_bias_act(unit, ins, axis, rank, n, float(xs.reshape(-1)[0]) * ws)
        if tail is None:
            return None
        out, act = tail
        q = self.follow(out, ("relax.quantize",))
        if q is None:
            return None
        qvar, qcall = q
        os_, oz = self.fi.const_value(qcall.args[1]), self.fi.const_value(qcall.args[2])
        if os_ is None or oz is None or os_.size != 1 or oz.size != 1 or _dtype(qvar.ty) not in _QDTYPES:
            return None
        unit.absorbed.append(qvar)
        unit.out_var = qvar
        if self.var_tensor(unit, qvar, _quant(os_, oz, axis)) is None:
            return None
        return qvar, act

    def qdq_unit(self, var, call, fn):
        """`dequantize -> op -> quantize` with per-tensor 8-bit parameters on every data input
        and on every output, as `op` on the 8-bit tensors themselves: each input described as
        the quantized var with its dequantize's parameters, each output as its quantize's
        result with the quantize's.  The runtime then does what TVM does (every input
        dequantized with its own parameters, the float op, the result quantized with the
        output's; ties to even), inside the region, so it no longer ends at each quantized
        add, pool, concatenation or reshape.  Ops the runtime runs as byte moves (transpose,
        split) are taken only when every output has its input's parameters, where TVM's
        dequantize/quantize round trip gives the same bytes back.

        `fn` builds the float unit (binary, pool2d, ...); its input vars must all be such
        dequantizes (no float constant operand), and each var it ends at (the op's result, or
        an activation the format allows on a quantized op) must have a quantize as its only
        user."""
        if _op_name(call) == "relax.reshape":
            unit = self.qdq_channel_shuffle(var, call)
            if unit is not None:
                return unit
        unit = fn(var, call)
        if unit is None:
            return None
        produced = {o for n in unit.nodes for o in n["outputs"]}
        rename, tensors, in_quants = {}, {}, []
        for k, t in unit.tensors.items():
            if k in produced:
                continue
            if isinstance(k, int) or t.dtype != "float32":
                return None  # a constant operand, or not a float view of quantized data
            dq = self.fi.value_of(k)
            if _op_name(dq) != "relax.dequantize" or str(dq.attrs.out_dtype) != "float32":
                return None
            qx = self.q_input(dq)
            if qx is None:
                return None
            x_var, xs, xz = qx
            if _shape(x_var.ty) != t.shape:
                return None
            rename[k] = x_var
            quant = _quant(xs, xz, _norm_axis(int(dq.attrs.axis), len(t.shape)))
            tensors[x_var] = _Tensor(t.shape, _dtype(x_var.ty), quant)
            in_quants.append((_dtype(x_var.ty), quant))
        if not rename:
            return None
        moves = any(n["op"] in ("transpose", "split") for n in unit.nodes)
        if moves and len(in_quants) != 1:
            return None
        outs = unit.extra_outs + [unit.out_var]
        qouts = []
        for out in outs:
            q = self.follow(out, ("relax.quantize",))
            if q is None:
                return None
            qvar, qcall = q
            os_, oz = self.fi.const_value(qcall.args[1]), self.fi.const_value(qcall.args[2])
            odt = _dtype(qvar.ty)
            if os_ is None or oz is None or os_.size != 1 or oz.size != 1 or odt not in _QDTYPES:
                return None
            if not qcall.args[0].same_as(out) or _shape(qvar.ty) != unit.tensors[out].shape:
                return None
            quant = _quant(os_, oz, _norm_axis(int(qcall.attrs.axis), len(unit.tensors[out].shape)))
            if moves and (odt != in_quants[0][0] or not _same_quant(quant, in_quants[0][1])):
                return None
            rename[out] = qvar
            tensors[qvar] = _Tensor(unit.tensors[out].shape, odt, quant)
            qouts.append(qvar)
        # Tensors between the unit's nodes or not read (a global pool's rank-4 result before the
        # reshape of keepdims=False; a split piece nobody reads): the parameters of the output
        # (of the input, for a byte move), with which the reshape after is a copy.
        odt, oquant = (in_quants[0] if moves else (tensors[qouts[-1]].dtype, tensors[qouts[-1]].quant))
        for k in produced:
            if k not in rename:
                shape = unit.tensors[k].shape
                tensors[k] = _Tensor(shape, odt, dict(oquant, axis=min(oquant["axis"], max(len(shape) - 1, 0))))
        for n in unit.nodes:
            act = n["attrs"].get("activation", "none")
            if not (act in ("none", "relu", "relu6") or (isinstance(act, dict) and "clip" in act)):
                return None  # the format takes only the clamps on quantized ops
            n["inputs"] = [rename.get(k, k) for k in n["inputs"]]
            n["outputs"] = [rename.get(k, k) for k in n["outputs"]]
        unit.tensors = tensors
        unit.absorbed.extend(qouts)
        unit.extra_outs = qouts[:-1]
        unit.out_var = qouts[-1]
        return unit

    def qdq_channel_shuffle(self, var, call):
        """ShuffleNet's channel shuffle (reshape [N,C,H,W] -> [N,g,C/g,H,W], permute_dims
        (0,2,1,3,4), reshape back) with every step between dequantize and quantize, all with
        the same per-tensor parameters: one `channel_shuffle` node on the 8-bit tensors (each
        dequantize/quantize round trip with one set of parameters gives the same codes back)."""
        dq = self.fi.value_of(call.args[0])
        if _op_name(dq) != "relax.dequantize":
            return None
        qx = self.q_input(dq)
        if qx is None:
            return None
        x_var, xs, xz = qx
        src, mid = _static_shape(x_var.ty), _static_shape(var.ty)
        if src is None or mid is None or len(src) != 4 or len(mid) != 5:
            return None
        n, c, h, w = src
        g = mid[1]
        if g < 1 or c % g or mid != (n, g, c // g, h, w):
            return None
        dt = _dtype(x_var.ty)
        absorbed = [var]

        def same_q(v):  # v = quantize(.) with x's dtype and parameters, then its dequantize
            q = self.follow(v, ("relax.quantize",))
            if q is None or _dtype(q[0].ty) != dt:
                return None
            s_, z_ = self.fi.const_value(q[1].args[1]), self.fi.const_value(q[1].args[2])
            if s_ is None or z_ is None or s_.size != 1 or z_.size != 1 or float(s_.reshape(-1)[0]) != float(
                    xs.reshape(-1)[0]) or int(z_.reshape(-1)[0]) != int(xz.reshape(-1)[0]):
                return None
            absorbed.append(q[0])
            return q[0]

        def then(v, names):
            nxt = self.follow(v, names)
            if nxt is not None:
                absorbed.append(nxt[0])
            return nxt

        def dq_of(qv):
            d = then(qv, ("relax.dequantize",)) if qv is not None else None
            if d is None or self.q_input(d[1]) is None or not self.q_input(d[1])[0].same_as(qv):
                return None
            s_, z_ = self.q_input(d[1])[1:]
            if float(s_.reshape(-1)[0]) != float(xs.reshape(-1)[0]) or int(z_.reshape(-1)[0]) != int(xz.reshape(-1)[0]):
                return None
            return d[0]

        d1 = dq_of(same_q(var))
        p = then(d1, ("relax.permute_dims",)) if d1 is not None else None
        if p is None or p[1].attrs.axes is None or _ints(p[1].attrs.axes) != [0, 2, 1, 3, 4]:
            return None
        d2 = dq_of(same_q(p[0]))
        r = then(d2, ("relax.reshape",)) if d2 is not None else None
        if r is None or _static_shape(r[0].ty) != src:
            return None
        out = same_q(r[0])
        if out is None:
            return None
        unit = _Unit(out, absorbed, req="NCHW")
        quant = _quant(xs, xz, 1)
        unit.tensors[x_var] = _Tensor(src, dt, quant)
        unit.tensors[out] = _Tensor(src, dt, quant)
        unit.nodes.append({"op": "channel_shuffle", "inputs": [x_var], "outputs": [out],
                           "attrs": {"layout": "NCHW", "groups": g}})
        return unit

    # -- dispatch ------------------------------------------------------------------------------

    def match(self, var, call) -> _Unit | None:
        name = _op_name(call)
        try:
            unit = self.activation_unit(var, call)
        except (AttributeError, TypeError, ValueError, IndexError, KeyError):
            unit = None
        if unit is not None:
            return unit
        fn = {
            "relax.nn.conv2d": self.conv2d,
            "relax.matmul": self.matmul,
            "relax.nn.max_pool2d": self.pool2d,
            "relax.nn.avg_pool2d": self.pool2d,
            "relax.nn.adaptive_avg_pool2d": self.adaptive_pool,
            "relax.mean": self.reduce_pool,
            "relax.max": self.reduce_pool,
            "relax.add": self.binary,
            "relax.multiply": self.binary,
            "relax.subtract": self.binary,
            "relax.divide": self.binary,
            "relax.nn.batch_norm": self.scale_shift,
            "relax.split": self.split,
            "relax.nn.layer_norm": self.layer_norm,
            "relax.permute_dims": self.transpose,
            "relax.nn.relu": self.activation,
            "relax.clip": self.activation,
            "relax.nn.softmax": self.softmax,
            "relax.reshape": self.reshape,
            "relax.concat": self.concat,
            "relax.maximum": self.minmax_unit,
            "relax.minimum": self.minmax_unit,
            "relax.call_tir": self.minmax_unit,
        }.get(name)
        if fn is None:
            return None
        unit = None
        if self.t.quantized and name in _QDQ_OPS:
            try:
                unit = self.qdq_unit(var, call, fn)
            except (AttributeError, TypeError, ValueError, IndexError, KeyError):
                unit = None
        try:
            unit = unit or fn(var, call)
        except (AttributeError, TypeError, ValueError, IndexError, KeyError):
            # Never fail the build on an op form we did not foresee: leave it to TVM.
            return None
        if unit is None:
            return None
        for t in unit.tensors.values():
            if any(isinstance(d, int) and d <= 0 for d in t.shape) and t.shape:
                return None
        if not _sym_unit_ok(unit):
            return None
        # A unit with several results is emitted where its last binding was: a binding it
        # does not absorb must not read one of the others before that point (a split piece
        # quantized or used before the next piece is taken, as a QDQ graph has them).
        at = self.fi.index.get(unit.out_var)
        inside = set(unit.absorbed)
        for v in unit.extra_outs:
            if any(u not in inside and self.fi.index.get(u, -1) < at for u in self.fi.users.get(v, [])):
                return None
        return unit

    # -- conv2d --------------------------------------------------------------------------------

    def conv2d(self, var, call):
        a = call.attrs
        dl, kl, ol = str(a.data_layout), str(a.kernel_layout), str(a.out_layout)
        if dl not in ("NCHW", "NHWC") or ol != dl or sorted(kl) != sorted("OIHW"):
            return None
        if self.t.name == "bnns" and dl != "NCHW":
            return None
        data, weight = call.args
        dshape = _static_shape(data.ty)
        if dshape is None or len(dshape) != 4:
            return None
        c_axis = dl.index("C")
        c_in = dshape[c_axis]
        groups = int(a.groups)
        padding = _ints(a.padding)
        if len(padding) == 2:
            padding = padding * 2
        # A zero-valued constant pad over H and W only folds into the conv's own padding.
        pv = self.fi.value_of(data)
        if _op_name(pv) == "relax.nn.pad" and str(pv.attrs.pad_mode) == "constant":
            pw = _ints(pv.attrs.pad_width)
            pval = _scalar(pv.args[1]) if len(pv.args) > 1 else float(getattr(pv.attrs, "pad_value", 0) or 0)
            if pval is None:
                pval = float(getattr(pv.attrs, "pad_value", 0) or 0)
            h, w = dl.index("H"), dl.index("W")
            if len(pw) == 8 and pval == 0.0 and all(pw[2 * i] == 0 == pw[2 * i + 1] for i in (0, c_axis)):
                padding = [padding[0] + pw[2 * h], padding[1] + pw[2 * w], padding[2] + pw[2 * h + 1],
                           padding[3] + pw[2 * w + 1]]
                data = pv.args[0]
        perm = _layout_perm(kl, "OIHW" if dl == "NCHW" else "OHWI")

        dq = self.fi.value_of(data)
        if _op_name(dq) == "relax.dequantize":
            wq = self.fi.dq_const(weight)
            if wq is None:
                return None
            return self.qconv2d(var, call, dq, wq, perm, dl, padding, groups, c_in)

        if _dtype(data.ty) != "float32" or _dtype(var.ty) != "float32":
            return None
        w = self.fi.const_value(weight)
        if w is None or w.ndim != 4 or str(w.dtype) != "float32":
            return None
        w = np.transpose(w, perm)
        n_out = w.shape[0]
        if not self.groups_ok(groups, c_in, n_out):
            return None
        unit = _Unit(var, [var], req=dl)
        x = self.var_tensor(unit, data)
        if x is None:
            return None
        ins = [x, self.const_tensor(unit, w)]
        act = self.f32_tail(unit, ins, c_axis, 4, n_out)
        if act is None:
            return None
        unit.nodes.append(self._conv_node(ins, unit.out_var, dl, a, padding, groups, act))
        return unit

    def groups_ok(self, groups, c_in, n_out, quantized=False):
        if groups == 1:
            return True
        depthwise = groups == c_in and n_out % c_in == 0
        # Grouped (not depthwise) convolutions are float32 only on every backend.
        return depthwise or (self.t.any_groups and not quantized and c_in % groups == 0 and n_out % groups == 0)

    @staticmethod
    def _conv_node(ins, out, layout, a, padding, groups, act):
        return {
            "op": "conv2d",
            "inputs": ins,
            "outputs": [out],
            "attrs": {
                "layout": layout,
                "strides": _ints(a.strides),
                "padding": [int(p) for p in padding],
                "dilation": _ints(a.dilation),
                "groups": groups,
                "activation": act,
            },
        }

    def qconv2d(self, var, call, dq, wq, perm, dl, padding, groups, c_in):
        """dequantize(x) -> conv2d(., dequantize(w)) -> add(bias)? -> act? -> quantize."""
        qx = self.q_input(dq)
        if qx is None:
            return None
        x_var, xs, xz = qx
        wdata, ws, wz, waxis = wq
        if wdata.ndim != 4 or str(wdata.dtype) not in _QDTYPES:
            return None
        wdata = np.transpose(wdata, perm)
        n_out = wdata.shape[0]
        if not self.q_weight_ok(ws, wz, perm.index(waxis)) or not self.groups_ok(groups, c_in, n_out, quantized=True):
            return None
        c_axis = dl.index("C")
        unit = _Unit(var, [var], req=dl)
        x = self.var_tensor(unit, x_var, _quant(xs, xz, c_axis))
        if x is None:
            return None
        ins = [x, self.q_weight(unit, wdata, ws, wz)]
        tail = self.q_tail(unit, ins, xs, ws, c_axis, 4, n_out)
        if tail is None:
            return None
        unit.nodes.append(self._conv_node(ins, tail[0], dl, call.attrs, padding, groups, tail[1]))
        return unit

    # -- dense / matmul --------------------------------------------------------------------------

    def matmul(self, var, call):
        a, b = call.args
        ashape, bshape = _shape(a.ty), _shape(b.ty)
        if ashape is None or bshape is None or len(ashape) < 2:
            return None
        av = self.fi.value_of(a)
        if _op_name(av) == "relax.dequantize" and len(bshape) == 2:
            return self.qdense(var, call, av)
        if _dtype(a.ty) != "float32" or _dtype(var.ty) != "float32":
            return None
        wb = self.fi.const_value(b)
        if wb is not None and wb.ndim == 2 and str(wb.dtype) == "float32":
            # matmul with a constant [K, N] matrix is a dense layer with weight [N, K].
            n = wb.shape[1]
            unit = _Unit(var, [var], convertible=len(ashape) != 4)
            x = self.var_tensor(unit, a)
            if x is None:
                return None
            ins = [x, self.const_tensor(unit, np.ascontiguousarray(wb.T))]
            act = self.f32_tail(unit, ins, len(ashape) - 1, len(ashape), n)
            if act is None:
                return None
            unit.nodes.append({"op": "dense", "inputs": ins, "outputs": [unit.out_var], "attrs": {"activation": act}})
            return unit
        if len(bshape) < 2:
            return None
        unit = _Unit(var, [var], convertible=len(ashape) != 4 and len(bshape) != 4)
        x = self.var_tensor(unit, a)
        y = self.operand(unit, b)
        if x is None or y is None or self.var_tensor(unit, var) is None:
            return None
        unit.nodes.append({"op": "matmul", "inputs": [x, y], "outputs": [var], "attrs": {}})
        return unit

    def qdense(self, var, call, dq):
        """dequantize(x) -> matmul(., dequantize(W)[K,N]) -> add(bias)? -> act? -> quantize."""
        qx = self.q_input(dq)
        if qx is None:
            return None
        x_var, xs, xz = qx
        wq = self.fi.dq_const(call.args[1])
        if wq is None:
            return None
        wdata, ws, wz, waxis = wq
        if wdata.ndim != 2 or str(wdata.dtype) not in _QDTYPES:
            return None
        wdata = np.ascontiguousarray(wdata.T)  # [N, K]
        if not self.q_weight_ok(ws, wz, 1 - waxis):
            return None
        n_out = wdata.shape[0]
        rank = len(_shape(x_var.ty) or ())
        if rank < 2:
            return None
        unit = _Unit(var, [var], convertible=rank != 4)
        x = self.var_tensor(unit, x_var, _quant(xs, xz, rank - 1))
        if x is None:
            return None
        ins = [x, self.q_weight(unit, wdata, ws, wz)]
        tail = self.q_tail(unit, ins, xs, ws, rank - 1, rank, n_out)
        if tail is None:
            return None
        unit.nodes.append({"op": "dense", "inputs": ins, "outputs": [tail[0]], "attrs": {"activation": tail[1]}})
        return unit

    # -- pooling ----------------------------------------------------------------------------------

    def _f32_unary(self, var, call, req=None, convertible=True):
        x = call.args[0]
        if _dtype(x.ty) != "float32" or _dtype(var.ty) != "float32":
            return None, None
        unit = _Unit(var, [var], req=req, convertible=convertible)
        xi = self.var_tensor(unit, x) if isinstance(x, relax.Var) else None
        if xi is None or self.var_tensor(unit, var) is None:
            return None, None
        return unit, xi

    def _pool_unary(self, var, call):
        """_f32_unary for a pooling op in a 4-D layout this target takes: (unit, x, layout)."""
        layout = str(call.attrs.layout)
        if layout not in ("NCHW", "NHWC") or str(call.attrs.out_layout) != layout:
            return None, None, None
        if self.t.name == "bnns" and layout != "NCHW":
            return None, None, None
        unit, x = self._f32_unary(var, call, req=layout)
        return unit, x, layout

    def pool2d(self, var, call):
        a = call.attrs
        unit, x, layout = self._pool_unary(var, call)
        if unit is None:
            return None
        padding = _ints(a.padding)
        if len(padding) == 2:
            padding = padding * 2
        attrs = {
            "layout": layout,
            "pool_size": _ints(a.pool_size),
            "strides": _ints(a.strides),
            "padding": padding,
            "dilation": _ints(a.dilation),
            "ceil_mode": bool(a.ceil_mode),
        }
        op = "max_pool2d" if _op_name(call) == "relax.nn.max_pool2d" else "avg_pool2d"
        if op == "avg_pool2d":
            attrs["count_include_pad"] = bool(a.count_include_pad)
        unit.nodes.append({"op": op, "inputs": [x], "outputs": [var], "attrs": attrs})
        return unit

    def adaptive_pool(self, var, call):
        a = call.attrs
        if a.output_size is None or _ints(a.output_size) not in ([1, 1], [1]):
            return None
        unit, x, layout = self._pool_unary(var, call)
        if unit is None:
            return None
        unit.nodes.append({"op": "global_avg_pool2d", "inputs": [x], "outputs": [var], "attrs": {"layout": layout}})
        return unit

    def reduce_pool(self, var, call):
        """mean / max over the two spatial axes of a 4-D tensor = global pooling."""
        x = call.args[0]
        shape = _static_shape(x.ty)
        if shape is None or len(shape) != 4 or call.attrs.axis is None:
            return None
        axes = sorted(_norm_axis(int(v), 4) for v in call.attrs.axis)
        layout = {(2, 3): "NCHW", (1, 2): "NHWC"}.get(tuple(axes))
        if layout is None or (self.t.name == "bnns" and layout != "NCHW"):
            return None
        unit, xi = self._f32_unary(var, call, req=layout)
        if unit is None:
            return None
        op = "global_avg_pool2d" if _op_name(call) == "relax.mean" else "global_max_pool2d"
        if bool(call.attrs.keepdims):
            unit.nodes.append({"op": op, "inputs": [xi], "outputs": [var], "attrs": {"layout": layout}})
        else:
            # keepdims=False: global pool to rank 4, then a reshape (element order is unchanged
            # because H = W = 1).
            tshape = [shape[0], 1, 1, shape[3]] if layout == "NHWC" else [shape[0], shape[1], 1, 1]
            k = self.keys()
            unit.tensors[k] = _Tensor(tuple(tshape), "float32")
            unit.nodes.append({"op": op, "inputs": [xi], "outputs": [k], "attrs": {"layout": layout}})
            unit.nodes.append({"op": "reshape", "inputs": [k], "outputs": [var], "attrs": {}})
        return unit

    # -- elementwise ----------------------------------------------------------------------------

    def binary(self, var, call):
        if _dtype(var.ty) != "float32":
            return None
        if _op_name(call) == "relax.multiply":
            lrn = self.lrn(var, call)
            if lrn is not None:
                return lrn
        oshape = _shape(var.ty)
        if oshape is None:
            return None
        unit = _Unit(var, [var])
        ins = []
        for e in call.args:
            c = self.fi.const_value(e)
            if c is not None:
                if str(c.dtype) != "float32" or c.ndim > len(oshape):
                    return None
                # Constants are given the output's rank so that a layout change transposes
                # them together with the data.
                ins.append(self.const_tensor(unit, c.reshape((1,) * (len(oshape) - c.ndim) + c.shape)))
            elif isinstance(e, relax.Var) and _dtype(e.ty) == "float32":
                k = self.var_tensor(unit, e)
                if k is None:
                    return None
                if len(unit.tensors[k].shape) != len(oshape) and len(oshape) == 4:
                    unit.convertible = False
                ins.append(k)
            else:
                return None
        out, act = self.take_activation(var, unit.absorbed)
        unit.out_var = out
        if self.var_tensor(unit, out) is None:
            return None
        op = _op_name(call)[len("relax."):]
        unit.nodes.append({"op": op, "inputs": ins, "outputs": [out], "attrs": {"activation": act}})
        return unit

    def activation_unit(self, var, call):
        """A standalone activation whose first binding is `var` (one that no producer took):
        the v1 ops relu/relu6/clip are matched elsewhere; this takes the version-2 ones."""
        if not isinstance(call, relax.Call):
            return None
        for x in call.args:
            if not isinstance(x, relax.Var) or self.fi.const_value(x) is not None:
                continue
            # A pattern that reads x twice (SiLU, HardSwish, GELU) must own all of x's uses;
            # a one-way chain (sigmoid, HardSigmoid, ...) may share x with others.
            pat = self.act_pattern(x) or self.v2_unary(x, var, call)
            if pat is None or not pat[2][0].same_as(var):
                continue
            last, act, spans = pat
            if act in ("relu", "relu6") or (isinstance(act, dict) and "clip" in act):
                return None
            unit = _Unit(last, list(spans))
            xi = self.var_tensor(unit, x)
            if xi is None or self.var_tensor(unit, last) is None:
                return None
            unit.nodes.append({"op": "activation", "inputs": [xi], "outputs": [last], "attrs": {"activation": act}})
            return unit
        return None

    def lrn(self, var, call):
        """TVM's ONNX LRN: multiply(x, x) -> expand_dims(1) -> avg_pool3d([size,1,1]) ->
        squeeze(1) -> multiply(alpha) -> add(bias) -> power(beta), then divide(x, that)."""
        x = call.args[0]
        if not (isinstance(x, relax.Var) and call.args[1].same_as(x)):
            return None
        shape = _static_shape(x.ty)
        if shape is None or len(shape) != 4:
            return None
        users = self.fi.users.get(x, [])
        if len(users) != 2 or var not in users:
            return None
        e = self.follow(var, ("relax.expand_dims",))
        if e is None or _ints(e[1].attrs.axis) != [1]:
            return None
        p = self.follow(e[0], ("relax.nn.avg_pool3d",))
        if p is None:
            return None
        pa = p[1].attrs
        size = _ints(pa.pool_size)[0]
        pad = _ints(pa.padding)
        if (_ints(pa.pool_size)[1:] != [1, 1] or _ints(pa.strides) != [1, 1, 1] or not bool(pa.count_include_pad)
                or str(pa.layout) != "NCDHW" or pad[1:3] + pad[4:6] != [0, 0, 0, 0]
                or pad[0] != (size - 1) // 2 or pad[3] != size - 1 - (size - 1) // 2):
            return None
        sq = self.follow(p[0], ("relax.squeeze",))
        if sq is None or _ints(sq[1].attrs.axis) != [1]:
            return None
        alpha = self._step(sq[0], ("relax.multiply",))
        bias = self._step(alpha[0], ("relax.add",)) if alpha else None
        power = self._step(bias[0], ("relax.power",)) if bias else None
        if power is None or not power[1].args[0].same_as(bias[0]):
            return None
        div = self.follow(power[0], ("relax.divide",))
        if div is None or not div[1].args[0].same_as(x) or not div[1].args[1].same_as(power[0]):
            return None
        if div[0] not in users:
            return None
        unit = _Unit(div[0], [var, e[0], p[0], sq[0], alpha[0], bias[0], power[0], div[0]], req="NCHW")
        xi = self.var_tensor(unit, x)
        if xi is None or self.var_tensor(unit, div[0]) is None:
            return None
        unit.nodes.append({"op": "lrn", "inputs": [xi], "outputs": [div[0]],
                           "attrs": {"layout": "NCHW", "size": size, "alpha": alpha[2], "beta": power[2],
                                     "bias": bias[2]}})
        return unit

    def scale_shift(self, var, call):
        """An inference batch_norm that no conv2d/dense took: y = x * scale + shift."""
        x = call.args[0]
        shape = _shape(x.ty)
        if shape is None or _dtype(x.ty) != "float32" or not isinstance(x, relax.Var):
            return None
        axis = _norm_axis(int(call.attrs.axis), len(shape))
        coef = self.batch_norm_of(call, axis, shape[axis])
        res = self.bn_result(var)
        if coef is None or res is None:
            return None
        # A 4-D tensor normalised on axis 1 is NCHW data; anything else stays as it is.
        unit = _Unit(res, [var, res], convertible=len(shape) != 4 or axis == 1)
        xi = self.var_tensor(unit, x)
        if xi is None:
            return None
        ins = [xi, self.const_tensor(unit, coef[0].astype("float32")), self.const_tensor(unit, coef[1].astype("float32"))]
        out, act = self.take_activation(res, unit.absorbed)
        unit.out_var = out
        if self.var_tensor(unit, out) is None:
            return None
        unit.nodes.append({"op": "scale_shift", "inputs": ins, "outputs": [out],
                           "attrs": {"axis": axis, "activation": act}})
        return unit

    def split(self, var, call):
        """split into a tuple whose fields are read by TupleGetItem: one node, several outputs."""
        x = call.args[0]
        shape = _shape(x.ty)
        ty = var.ty
        if shape is None or _dtype(x.ty) != "float32" or not isinstance(x, relax.Var):
            return None
        if not isinstance(ty, relax.TupleType):
            return None
        axis = _norm_axis(int(call.attrs.axis), len(shape))
        pieces = [_shape(f) for f in ty.fields]
        if any(p is None for p in pieces) or sum(p[axis] for p in pieces) != shape[axis]:
            return None
        items = {}
        for u in self.fi.users.get(var, []):
            val = self.fi.defs.get(u)
            if not isinstance(val, relax.TupleGetItem) or self.fi.block_of.get(u) != self.fi.block_of.get(var):
                return None
            items.setdefault(int(val.index), []).append(u)
        if not items or any(len(v) != 1 for v in items.values()):
            return None
        block = self.fi.func.body.blocks[self.fi.block_of[var]]
        order = [b.var for b in block.bindings]
        got = sorted((order.index(v[0]), i, v[0]) for i, v in items.items())
        unit = _Unit(got[-1][2], [var] + [v for _, _, v in got], convertible=len(shape) != 4 or axis == 1)
        unit.extra_outs = [v for _, _, v in got[:-1]]
        xi = self.var_tensor(unit, x)
        if xi is None:
            return None
        outs = []
        for i, p in enumerate(pieces):
            if i in items:
                if self.var_tensor(unit, items[i][0]) is None:
                    return None
                outs.append(items[i][0])
            else:
                k = self.keys()
                unit.tensors[k] = _Tensor(tuple(p), "float32")
                outs.append(k)
        unit.nodes.append({"op": "split", "inputs": [xi], "outputs": outs, "attrs": {"axis": axis}})
        return unit

    def layer_norm(self, var, call):
        a = call.attrs
        x = call.args[0]
        shape = _shape(x.ty)
        if shape is None or not isinstance(x, relax.Var) or _dtype(x.ty) != "float32":
            return None
        if [_norm_axis(int(v), len(shape)) for v in a.axes] != [len(shape) - 1]:
            return None
        d = shape[-1]
        gamma, beta = self.fi.const_value(call.args[1]), self.fi.const_value(call.args[2])
        if gamma is None or beta is None or gamma.shape != (d,) or beta.shape != (d,):
            return None
        gamma = gamma if bool(a.scale) else np.ones(d, "float32")
        beta = beta if bool(a.center) else np.zeros(d, "float32")
        unit, xi = self._f32_unary(var, call, convertible=len(shape) != 4)
        if unit is None:
            return None
        ins = [xi, self.const_tensor(unit, gamma.astype("float32")), self.const_tensor(unit, beta.astype("float32"))]
        unit.nodes.append({"op": "layer_norm", "inputs": ins, "outputs": [var],
                           "attrs": {"axis": -1, "epsilon": float(a.epsilon)}})
        return unit

    def transpose(self, var, call):
        shape = _shape(call.args[0].ty)
        if shape is None or not 1 <= len(shape) <= 6:
            return None
        axes = list(range(len(shape)))[::-1] if call.attrs.axes is None else [_norm_axis(int(v), len(shape)) for v in call.attrs.axes]
        # In a region converted to NHWC, a rank-4 transpose's axes are rewritten (_describe).
        unit, xi = self._f32_unary(var, call)
        if unit is None:
            return None
        unit.nodes.append({"op": "transpose", "inputs": [xi], "outputs": [var], "attrs": {"axes": axes}})
        return unit

    def channel_shuffle(self, var, call):
        """reshape [N,C,H,W] -> [N,g,C/g,H,W] -> permute_dims(0,2,1,3,4) -> reshape [N,C,H,W]."""
        x = call.args[0]
        src, mid = _static_shape(x.ty), _static_shape(var.ty)
        if src is None or mid is None or len(src) != 4 or len(mid) != 5:
            return None
        n, c, h, w = src
        g = mid[1]
        if mid != (n, g, c // g, h, w) or g < 1 or c % g:
            return None
        p = self.follow(var, ("relax.permute_dims",))
        if p is None or p[1].attrs.axes is None or _ints(p[1].attrs.axes) != [0, 2, 1, 3, 4]:
            return None
        r = self.follow(p[0], ("relax.reshape",))
        if r is None or _static_shape(r[0].ty) != src:
            return None
        unit = _Unit(r[0], [var, p[0], r[0]], req="NCHW")
        xi = self.var_tensor(unit, x)
        if xi is None or _dtype(x.ty) != "float32" or self.var_tensor(unit, r[0]) is None:
            return None
        unit.nodes.append({"op": "channel_shuffle", "inputs": [xi], "outputs": [r[0]],
                           "attrs": {"layout": "NCHW", "groups": g}})
        return unit

    def activation(self, var, call):
        act = self.activation_of(call)
        if act is None:
            return None
        unit, x = self._f32_unary(var, call)
        if unit is None:
            return None
        unit.nodes.append(self._act_node(x, var, act))
        return unit

    def softmax(self, var, call):
        unit, x = self._f32_unary(var, call)
        if unit is None:
            return None
        unit.nodes.append({"op": "softmax", "inputs": [x], "outputs": [var], "attrs": {"axis": int(call.attrs.axis)}})
        return unit

    def reshape(self, var, call):
        shuffle = self.channel_shuffle(var, call)
        if shuffle is not None:
            return shuffle
        unit, x = self._f32_unary(var, call)
        if unit is None:
            return None

        def order_kept(shape):  # NCHW -> NHWC keeps the element order iff C == 1 or H*W == 1
            return len(shape) != 4 or shape[1] == 1 or shape[2] * shape[3] == 1

        # A reshape that depends on the NCHW element order stays convertible: in a region
        # converted to NHWC, _describe puts transposes around it (a version-2 op).
        unit.nodes.append({"op": "reshape", "inputs": [x], "outputs": [var], "attrs": {},
                           "nchw_order": not (order_kept(unit.tensors[x].shape) and order_kept(unit.tensors[var].shape))})
        return unit

    def concat(self, var, call):
        if not self.t.concat or _dtype(var.ty) != "float32":
            return None
        tup = self.fi.value_of(call.args[0])
        if not isinstance(tup, relax.Tuple) or call.attrs.axis is None:
            return None
        unit = _Unit(var, [var])
        ins = []
        for e in tup.fields:
            k = self.operand(unit, e)
            if k is None:
                return None
            ins.append(k)
        if self.var_tensor(unit, var) is None:
            return None
        unit.nodes.append({"op": "concatenate", "inputs": ins, "outputs": [var], "attrs": {"axis": int(call.attrs.axis)}})
        return unit


def _sym_unit_ok(unit) -> bool:
    """A unit whose tensors have symbolic dimensions is taken only when the description can
    say so (bare, well-named variables, one variable per name) and each node holds for every
    value of them.  Layout ops (those with a 4-D layout, `req`) stay static: their attributes
    carry extents, and an NCHW region converted to NHWC is kept simple."""
    shapes = [t.shape for t in unit.tensors.values()]
    if not any(isinstance(d, _Sym) for s in shapes for d in s):
        return True
    if unit.req is not None or _syms_of(shapes) is None:
        return False
    return all(_sym_node_ok(n, unit.tensors) for n in unit.nodes)


def _unit_syms(unit) -> dict:
    return _syms_of(t.shape for t in unit.tensors.values()) or {}


# --------------------------------------------------------------------------------------------
# Regions
# --------------------------------------------------------------------------------------------


class _Region:
    def __init__(self):
        self.units: list[_Unit] = []
        self.req: str | None = None
        self.quants: dict = {}
        self.syms: dict = {}  # name -> _Sym of the symbolic dimensions of the units so far

    def can_add(self, unit: _Unit, target: _Target) -> bool:
        if unit.req and self.req and unit.req != self.req:
            return False
        req = self.req or unit.req
        usyms = _unit_syms(unit)
        if usyms or self.syms:
            # Symbolic regions have no layout ops (so are never converted to NHWC), and one
            # name means one variable in a description.
            if req is not None or any(self.syms.get(k, v) != v for k, v in usyms.items()):
                return False
        if target.layout == "NHWC" and req == "NCHW":
            if not unit.convertible or not all(u.convertible for u in self.units):
                return False
        # One tensor, one set of quantization parameters.
        for k, t in unit.tensors.items():
            if isinstance(k, int) or t.quant is None:
                continue
            if k in self.quants and not _same_quant(self.quants[k], t.quant):
                return False
        return True

    def add(self, unit: _Unit):
        self.units.append(unit)
        self.req = self.req or unit.req
        self.syms.update(_unit_syms(unit))
        for k, t in unit.tensors.items():
            if not isinstance(k, int) and t.quant is not None:
                self.quants.setdefault(k, t.quant)


def _same_quant(a: dict, b: dict) -> bool:
    """Whether two `quant` dicts mean the same; with one scale the axis means nothing."""
    if a["scale"] != b["scale"] or a["zero_point"] != b["zero_point"]:
        return False
    return len(a["scale"]) == 1 or a["axis"] == b["axis"]


def _convert_axis(axis: int, rank: int) -> int:
    if rank != 4:
        return axis
    return _NCHW_TO_NHWC.index(_norm_axis(axis, 4))


def _nchw_order_nodes(nodes, tensors, literal, name):
    """For a region described in NHWC: reshapes that depend on the NCHW element order get
    transposes around them (NHWC -> NCHW before, NCHW -> NHWC after, through tensors described
    literally in NCHW), and rank-4 transposes get their axes rewritten for NHWC operands."""
    out = []
    for n in nodes:
        if n["op"] == "transpose" and len(n["attrs"]["axes"]) == 4:
            # y_nchw = x_nchw.transpose(a); x_nchw = x_nhwc.transpose(0,3,1,2) and
            # y_nhwc = y_nchw.transpose(0,2,3,1), so y_nhwc = x_nhwc.transpose(p) with
            # p[i] = (0,3,1,2)[a[(0,2,3,1)[i]]].
            a = n["attrs"]["axes"]
            p = [_NHWC_TO_NCHW[a[_NCHW_TO_NHWC[i]]] for i in range(4)]
            out.append(dict(n, attrs={"axes": p}))
            continue
        if n["op"] != "reshape" or not n.get("nchw_order"):
            out.append(n)
            continue
        (x,), (y,) = n["inputs"], n["outputs"]
        if len(tensors[x].shape) == 4:
            k = f"{name}:{len(tensors)}"
            tensors[k] = _Tensor(tensors[x].shape, tensors[x].dtype, tensors[x].quant)
            literal.add(k)
            out.append({"op": "transpose", "inputs": [x], "outputs": [k], "attrs": {"axes": list(_NHWC_TO_NCHW)}})
            x = k
        if len(tensors[y].shape) == 4:
            k = f"{name}:{len(tensors)}"
            tensors[k] = _Tensor(tensors[y].shape, tensors[y].dtype, tensors[y].quant)
            literal.add(k)
            out.append({"op": "reshape", "inputs": [x], "outputs": [k], "attrs": {}})
            out.append({"op": "transpose", "inputs": [k], "outputs": [y], "attrs": {"axes": list(_NCHW_TO_NHWC)}})
        else:
            out.append({"op": "reshape", "inputs": [x], "outputs": [y], "attrs": {}})
    return out


def _describe(region: _Region, fi: _FuncInfo, target: _Target, name: str, dead=frozenset(), tensor_users=None):
    """Build the JSON description of a region; returns (desc dict, input vars, constants,
    output vars, convert) where `convert` says that 4-D boundary tensors are NHWC views of
    NCHW values."""
    convert = target.layout == "NHWC" and region.req == "NCHW"
    produced = {}
    internal = set()
    for u in region.units:
        internal.update(u.absorbed)
        for n in u.nodes:
            for o in n["outputs"]:
                produced[o] = u
    tensors: dict = {}
    for u in region.units:
        for k, t in u.tensors.items():
            if k in tensors:
                # A var tensor seen by two units: keep the one carrying quantization params.
                if tensors[k].quant is None:
                    tensors[k] = t
            else:
                tensors[k] = t
    nodes = [n for u in region.units for n in u.nodes]
    literal = set()  # tensors described with their shape as given, also in a converted region
    if convert:
        nodes = _nchw_order_nodes(nodes, tensors, literal, name)
        produced.update((k, None) for k in literal)

    inputs, consts, seen = [], [], set()
    for n in nodes:
        for k in n["inputs"]:
            if k in seen or k in produced:
                continue
            seen.add(k)
            (consts if isinstance(k, int) else inputs).append(k)
    outputs = []
    for v in (v for u in region.units for v in u.extra_outs + [u.out_var]):
        # Used outside: by a TVM binding that stays, or by a unit of another region (units may
        # read a var through a pad/dequantize binding that is dropped as dead).
        used_outside = v in fi.escapes or not isinstance(v, relax.DataflowVar) or any(
            user not in internal and user not in dead for user in fi.users.get(v, [])
        ) or any(all(w is not x for w in region.units) for x in (tensor_users or {}).get(v, []))
        if used_outside:
            outputs.append(v)
    if not outputs:
        outputs.append(region.units[-1].out_var)

    order = list(inputs) + list(consts)
    for n in nodes:
        for o in n["outputs"]:
            if o not in order:
                order.append(o)
    index = {k: i for i, k in enumerate(order)}

    def tensor_json(k):
        t = tensors[k]
        shape = list(t.shape)
        quant = t.quant
        if convert and len(shape) == 4 and k not in literal:
            shape = [shape[i] for i in _NCHW_TO_NHWC]
            if quant is not None:
                quant = dict(quant, axis=_NCHW_TO_NHWC.index(quant["axis"]))
        # A symbolic dimension is written as its variable's name (version 3).
        d = {"shape": [x.name if isinstance(x, _Sym) else x for x in shape], "dtype": t.dtype}
        if quant is not None:
            d["quant"] = quant
        return d

    const_arrays = []
    for k in consts:
        arr = tensors[k].const
        if convert and arr.ndim == 4:
            arr = np.ascontiguousarray(np.transpose(arr, _NCHW_TO_NHWC))
        const_arrays.append(arr)

    jnodes = []
    counts: dict = {}
    for n in nodes:
        attrs = dict(n["attrs"])
        if convert:
            if "layout" in attrs:
                attrs["layout"] = "NHWC"
            if n["op"] in ("softmax", "concatenate", "scale_shift", "split"):
                rank = len(tensors[n["inputs"][0]].shape)
                attrs["axis"] = _convert_axis(attrs["axis"], rank)
        i = counts.get(n["op"], 0)
        counts[n["op"]] = i + 1
        jnodes.append({
            "op": n["op"],
            "name": f"{n['op']}_{i}",
            "inputs": [index[k] for k in n["inputs"]],
            "outputs": [index[k] for k in n["outputs"]],
            "attrs": attrs,
        })
    jtensors = [tensor_json(k) for k in order]
    if any(isinstance(x, str) for t in jtensors for x in t["shape"]):
        version = 3
    else:
        version = 2 if any(needs_version_2(n) for n in jnodes) else 1
    desc = {
        "format": SUBGRAPH_FUNC,
        "version": version,
        "target": target.name,
        "name": name,
        "tensors": jtensors,
        "inputs": [index[k] for k in inputs],
        "constants": [index[k] for k in consts],
        "outputs": [index[k] for k in outputs],
        "nodes": jnodes,
    }
    return desc, inputs, const_arrays, outputs, convert


def _new_var(name, ty, dataflow):
    return relax.DataflowVar(name, ty) if dataflow else relax.Var(name, ty)


def _partition_function(func: relax.Function, target: _Target, counter: list, mod=None) -> relax.Function:
    fi = _FuncInfo(func, mod)
    m = _Matcher(fi, target)
    new_blocks = []
    bb = relax.BlockBuilder()
    changed = False
    for block in func.body.blocks:
        if not isinstance(block, relax.DataflowBlock):
            new_blocks.append(block)
            continue
        # 1. units, in binding order
        absorbed, final = set(), {}
        for b in block.bindings:
            if not isinstance(b, relax.VarBinding) or b.var in absorbed:
                continue
            if _op_name(b.value) is None:
                continue
            if fi.const_value(b.var) is not None:
                continue  # computed from constants only: folded into whoever uses it
            unit = m.match(b.var, b.value)
            if unit is None:
                continue
            absorbed.update(unit.absorbed)
            final[unit.out_var] = unit
        # 2. items: a unit stands where its last binding was.  Two kinds of leftover bindings
        #    must not split regions: those computed from constants only (weight transposes,
        #    dequantized weights) are hoisted to the block start, which is always valid; and
        #    those only the units looked through (a pad or dequantize whose users all became
        #    units) are dead after the rewrite, so they are dropped.
        looked_at = set()
        for u in final.values():
            looked_at.update(k for k in u.tensors if not isinstance(k, int))
        dead: set = set()
        changed_dead = True
        while changed_dead:
            changed_dead = False
            for b in reversed(block.bindings):
                v = b.var
                if v in absorbed or v in dead or v in looked_at or not isinstance(v, relax.DataflowVar):
                    continue
                if v in fi.escapes:
                    continue
                users = fi.users.get(v, [])
                if users and all(x in absorbed or x in dead for x in users):
                    dead.add(v)
                    changed_dead = True
        tensor_users: dict = {}
        for u in final.values():
            produced_here = {o for n in u.nodes for o in n["outputs"]}
            for k in u.tensors:
                if not isinstance(k, int) and k not in produced_here:
                    tensor_users.setdefault(k, []).append(u)
        hoisted, items = [], []
        for b in block.bindings:
            if b.var in final:
                items.append(("u", final[b.var]))
            elif b.var in absorbed or b.var in dead:
                continue
            elif isinstance(b, relax.VarBinding) and fi.const_value(b.var) is not None:
                hoisted.append(b)
            else:
                items.append(("b", b))
        items = [("b", b) for b in hoisted] + items
        # 3. regions: runs of consecutive units that fit together
        groups: list = []
        for kind, x in items:
            if kind == "u":
                if groups and isinstance(groups[-1], _Region) and groups[-1].can_add(x, target):
                    groups[-1].add(x)
                    continue
                r = _Region()
                r.add(x)
                groups.append(r)
            else:
                groups.append(x)
        # 4. emit
        bindings = []
        for g in groups:
            if not isinstance(g, _Region):
                bindings.append(g)
                continue
            emitted = None
            if not all(n["op"] == "reshape" for u in g.units for n in u.nodes):
                emitted = _emit_region(g, fi, target, counter, bb, dead, tensor_users)
            if emitted is None:
                # Nothing to compute (reshapes only: not worth a call), or nothing the format
                # can say: the original bindings stay.  They may read a dequantize that was
                # dropped as dead (a quantized reshape reads the 8-bit var through it): bring
                # those back too.
                orig = [b for u in g.units for b in _original_bindings(block, u)]
                need = set()
                for b in orig:
                    need.update(relax.analysis.free_vars(b.value))
                revive = [b for b in block.bindings if b.var in dead and b.var in need]
                dead.difference_update(b.var for b in revive)
                bindings.extend(revive + orig)
                continue
            changed = True
            bindings.extend(emitted)
        new_blocks.append(relax.DataflowBlock(bindings))
    if not changed:
        return func
    body = relax.SeqExpr(new_blocks, func.body.body)
    return relax.Function(func.params, body, func.ret_ty, func.is_pure, func.attrs)


def _original_bindings(block, unit):
    keep = set(unit.absorbed)
    return [b for b in block.bindings if b.var in keep]


def _unbound_symbols(desc) -> set:
    """The symbol names of a description that no input's shape carries: the runtime binds
    symbols from the inputs it is called with, so a description with any cannot run."""
    named = {x for t in desc["tensors"] for x in t["shape"] if isinstance(x, str)}
    bound = {x for i in desc["inputs"] for x in desc["tensors"][i]["shape"] if isinstance(x, str)}
    return named - bound


def _emit_region(region, fi, target, counter, bb, dead, tensor_users):
    """The bindings that replace `region`, or None when it cannot be described (a symbol
    that no input binds)."""
    name = f"mote_{target.name}_{counter[0]}"
    desc, inputs, consts, outputs, convert = _describe(region, fi, target, name, dead, tensor_users)
    if _unbound_symbols(desc):
        return None
    counter[0] += 1
    out = []
    args = [tvm.ir.StringImm(json.dumps(desc, separators=(",", ":")))]
    for v in inputs:
        if convert and len(_static_shape(v.ty)) == 4:
            call = relax.op.permute_dims(v, list(_NCHW_TO_NHWC))
            t = relax.DataflowVar(f"{v.name}_nhwc", bb.normalize(call).ty)
            out.append(relax.VarBinding(t, call))
            args.append(t)
        else:
            args.append(v)
    args.extend(relax.const(c) for c in consts)
    out_tys = []
    for i, v in zip(desc["outputs"], outputs):
        t = desc["tensors"][i]
        if desc["version"] >= 3:
            # The output's own shape, with TVM's variables where the description has names
            # (never converted, so it is the var's type as it was).
            out_tys.append(relax.TensorType(list(v.ty.shape.values), t["dtype"]))
        else:
            out_tys.append(relax.TensorType(t["shape"], t["dtype"]))
    call = relax.call_dps_packed(SUBGRAPH_FUNC, args, out_tys if len(out_tys) > 1 else out_tys[0])

    def finish(var, expr, nhwc_ty):
        if convert and len(nhwc_ty.shape.values) == 4:
            tmp = relax.DataflowVar(f"{var.name}_nhwc", nhwc_ty)
            out.append(relax.VarBinding(tmp, expr))
            out.append(relax.VarBinding(var, relax.op.permute_dims(tmp, list(_NHWC_TO_NCHW))))
        else:
            out.append(relax.VarBinding(var, expr))

    if len(outputs) == 1:
        finish(outputs[0], call, out_tys[0])
    else:
        tup = relax.DataflowVar(f"{name}_out", bb.normalize(call).ty)
        out.append(relax.VarBinding(tup, call))
        for i, v in enumerate(outputs):
            finish(v, relax.TupleGetItem(tup, i), out_tys[i])
    return out


# --------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------


def _nary_sum_terms(value, defs):
    """The terms of TVM's import of an n-ary ONNX Sum, ``sum(stack(broadcast_to(x_i)), axis 0)``
    over float32 tensors: [x_0, ..., x_n-1], or None."""
    if _op_name(value) != "relax.sum" or value.attrs.axis is None or _ints(value.attrs.axis) != [0]:
        return None
    if bool(value.attrs.keepdims) or _dtype(value.ty) != "float32":
        return None
    stack = defs.get(value.args[0]) if isinstance(value.args[0], relax.Var) else None
    if _op_name(stack) != "relax.stack" or int(stack.attrs.axis) != 0 or not isinstance(stack.args[0], relax.Tuple):
        return None
    terms = []
    for f in stack.args[0].fields:
        b = defs.get(f) if isinstance(f, relax.Var) else None
        if _op_name(b) == "relax.broadcast_to" and isinstance(b.args[0], (relax.Var, tvm.ir.expr.Constant)):
            f = b.args[0]  # add broadcasts by itself
        if isinstance(f, tvm.ir.expr.Constant):
            if str(f.value.dtype) != "float32":
                return None
        elif not isinstance(f, relax.Var) or _dtype(f.ty) != "float32":
            return None
        terms.append(f)
    return terms if len(terms) >= 2 else None


def _simplify_exports(func: relax.Function) -> relax.Function:
    """Rewrite what exported graphs contain into what the matcher takes:
    - field 0 of an inference ``relax.nn.dropout`` is bound to the dropout's input (TVM would
      compile a dropout into a copy and a ones-filled mask); CanonicalizeBindings then replaces
      those var-to-var bindings by their source;
    - an n-ary Sum (stack + sum, see _nary_sum_terms) becomes a chain of adds, left to right as
      the reduction runs."""
    defs = {b.var: b.value for block in func.body.blocks for b in block.bindings if isinstance(b, relax.VarBinding)}
    bb = relax.BlockBuilder()
    blocks, changed = [], False
    for block in func.body.blocks:
        bindings = []
        for b in block.bindings:
            v = b.value if isinstance(b, relax.VarBinding) else None
            if isinstance(v, relax.TupleGetItem) and int(v.index) == 0 and isinstance(v.tuple_value, relax.Var):
                src = defs.get(v.tuple_value)
                if _op_name(src) == "relax.nn.dropout" and isinstance(src.args[0], relax.Var):
                    b = relax.VarBinding(b.var, src.args[0])
                    changed = True
            terms = _nary_sum_terms(v, defs) if isinstance(block, relax.DataflowBlock) else None
            if terms is not None:
                acc = terms[0]
                for i, t in enumerate(terms[1:], 1):
                    call = bb.normalize(relax.op.add(acc, t))
                    if i == len(terms) - 1:
                        b = relax.VarBinding(b.var, call)
                    else:
                        acc = relax.DataflowVar(f"{b.var.name}_sum{i}", call.ty)
                        bindings.append(relax.VarBinding(acc, call))
                changed = True
            bindings.append(b)
        blocks.append(relax.DataflowBlock(bindings) if isinstance(block, relax.DataflowBlock) else relax.BindingBlock(bindings))
    if not changed:
        return func
    body = relax.SeqExpr(blocks, func.body.body)
    return relax.Function(func.params, body, func.ret_ty, func.is_pure, func.attrs)


def _drop_training_leftovers(mod: tvm.IRModule) -> tvm.IRModule:
    """Dropout becomes the identity and n-ary sums adds, then unused bindings go (Dropout itself, its mask,
    BatchNorm's running-statistics fields), so that they neither split regions nor hide the
    single use of a BatchNorm's result."""
    out = tvm.IRModule(dict(mod.functions), attrs=mod.attrs) if mod.attrs else tvm.IRModule(dict(mod.functions))
    for gv, func in mod.functions.items():
        if isinstance(func, relax.Function):
            out[gv] = _simplify_exports(func)
    out = relax.transform.CanonicalizeBindings()(out)
    return relax.transform.DeadCodeElimination()(out)


def _bind_params(mod: tvm.IRModule, params) -> tvm.IRModule:
    if not params:
        return mod
    consts = {k: v if isinstance(v, tvm.runtime.Tensor) else tvm.runtime.tensor(np.asarray(v))
              for k, v in params.items()}
    for gv, func in list(mod.functions.items()):
        if isinstance(func, relax.Function):
            names = {p.name for p in func.params}
            sub = {k: v for k, v in consts.items() if k in names}
            if sub:
                mod = relax.transform.BindParams(gv.name_hint, sub)(mod)
    return mod


def _partition(mod: tvm.IRModule, params, target: _Target, code_free=None) -> tvm.IRModule:
    if code_free not in _CODE_FREE_MODES:
        raise ValueError(f"code_free must be one of {_CODE_FREE_MODES}, not {code_free!r}")
    mod = _bind_params(mod, params)
    mod = relax.transform.Normalize()(mod)
    mod = relax.transform.ConvertToDataflow()(mod)
    mod = _drop_training_leftovers(mod)
    counter = [0]
    out = tvm.IRModule(dict(mod.functions), attrs=mod.attrs) if mod.attrs else tvm.IRModule(dict(mod.functions))
    for gv, func in mod.functions.items():
        if not isinstance(func, relax.Function):
            continue
        if func.attrs is not None and any(k in func.attrs for k in ("Codegen", "Composite", "Primitive")):
            continue
        new = _partition_function(func, target, counter, mod)
        if new is not func:
            out[gv] = new
    out = relax.transform.Normalize()(out)
    # The pads, dequantizes and weight transposes the regions absorbed are dead now.
    out = relax.transform.DeadCodeElimination()(out)
    if code_free is not None:
        _check_code_free(out, target, code_free)
    return out


# What a caller may ask about code-free results (docs/code-free.md): nothing, a report on
# stderr, or an error when anything would stay in TVM.
_CODE_FREE_MODES = (None, "report", "require")

# Relax operators that TVM 0.27 lowers to VM builtins or to calls of packed functions rather
# than to compiled kernels (docs/code-free.md, "What the partitioner reports").  Every other
# operator is legalized to a TIR kernel, which the code-free loader refuses.
_NO_KERNEL_OPS = frozenset({
    "relax.call_dps_packed", "relax.call_pure_packed", "relax.call_builtin_with_ctx", "relax.reshape",
    "relax.null_value", "relax.shape_of", "relax.tensor_to_shape", "relax.print", "relax.assert_op",
})


class NotCodeFree(ValueError):
    """Raised by the partitioners with ``code_free="require"`` when operators stay in TVM.

    ``residue`` is what :func:`tvm_residue` returned."""

    def __init__(self, message: str, residue: list):
        super().__init__(message)
        self.residue = residue


def tvm_residue(mod: tvm.IRModule) -> list[str]:
    """The operators of `mod`'s Relax functions that TVM would compile into kernels: one entry
    per call, ``"<function>: <op>"`` (``call_tir <PrimFunc>`` for a call_tir), in module
    order.  Empty means every operator is offloaded or runs as a VM builtin, so the exported
    library calls no compiled kernel and Mote can load it code-free (docs/code-free.md).

    Calls whose arguments are all constants are counted too: TVM may fold them, but nothing
    promises it.

    A function that computes a tensor whose shape has a symbolic dimension adds one entry
    ``"<function>: shape_func"``: the VM sizes that tensor's storage (the extents' product
    times the element size) in a compiled host function TVM names ``shape_func``, even when
    every operator is offloaded."""
    found = []
    for gv, func in mod.functions.items():
        if not isinstance(func, relax.Function):
            continue
        if func.attrs is not None and any(k in func.attrs for k in ("Codegen", "Composite", "Primitive")):
            continue
        calls = []

        def visit(expr, calls=calls):
            name = _op_name(expr)
            if name is None or name in _NO_KERNEL_OPS or name.startswith(("relax.memory.", "relax.vm.")):
                return
            if name == "relax.call_tir":
                calls.append(f"call_tir {getattr(expr.args[0], 'name_hint', '?')}")
            else:
                calls.append(name)

        relax.analysis.post_order_visit(func.body, visit)
        found.extend(f"{gv.name_hint}: {c}" for c in calls)
        if _allocates_symbolic(func):
            found.append(f"{gv.name_hint}: shape_func")
    return found


# Ops whose result TVM's VM does not allocate (a view, or a shape).
_NO_ALLOC_OPS = frozenset({"relax.reshape", "relax.shape_of", "relax.tensor_to_shape", "relax.null_value",
                           "relax.print", "relax.assert_op"})


def _allocates_symbolic(func: relax.Function) -> bool:
    """Whether a call in `func` produces a tensor with a non-static shape (which TVM's VM
    allocates with a size computed at run time)."""
    def symbolic(ty):
        if isinstance(ty, relax.TupleType):
            return any(symbolic(f) for f in ty.fields)
        if not isinstance(ty, relax.TensorType):
            return False
        if not isinstance(ty.shape, relax.ShapeExpr):
            return False  # unknown shapes: not what the partitioner writes
        return any(not isinstance(v, tvm.tirx.IntImm) for v in ty.shape.values)

    for block in func.body.blocks:
        for b in block.bindings:
            if isinstance(b, relax.VarBinding) and isinstance(b.value, relax.Call) \
                    and _op_name(b.value) not in _NO_ALLOC_OPS and symbolic(b.var.ty):
                return True
    return False


def _check_code_free(mod: tvm.IRModule, target: _Target, mode: str) -> None:
    residue = tvm_residue(mod)
    if not residue:
        if mode == "report":
            print(f"mote_tvm: partition_for_{target.name}: code-free (every operator offloaded or a VM "
                  f"builtin)", file=sys.stderr)
        return
    counts: dict = {}
    for r in residue:
        counts[r] = counts.get(r, 0) + 1
    listing = ", ".join(f"{r} (x{n})" if n > 1 else r for r, n in counts.items())
    message = (f"partition_for_{target.name}: {len(residue)} operator call(s) would stay in TVM as "
               f"compiled kernels, so the library is not code-free: {listing}")
    if mode == "require":
        raise NotCodeFree(message, residue)
    print(f"mote_tvm: {message}", file=sys.stderr)


def partition_for_acl(mod: tvm.IRModule, params=None, code_free=None) -> tvm.IRModule:
    """Offload the regions Arm Compute Library can run (NHWC data, OHWI weights).

    `params` (name -> numpy array or tvm Tensor) are bound as constants first: only ops with
    constant weights are offloaded.  fp32 conv2d (with folded pad, bias, batch norm and
    activation; any groups), depthwise conv2d, uint8/int8 QDQ conv2d and dense, pooling, global
    pooling (adaptive pool to 1x1, mean/max over H and W), dense/matmul (+bias, batch norm,
    activation), add, subtract, multiply, divide, activations (relu, relu6, clip, sigmoid, tanh,
    HardSwish, HardSigmoid, SiLU, GELU, leaky relu), batch norm (scale_shift), LRN, softmax,
    reshape, transpose, channel shuffle, split, layer norm and concatenate are recognised;
    Dropout is removed; adjacent ones become one ``mote.subgraph`` call.  NCHW regions are
    described in NHWC with TVM transposes at the region boundary (so an NCHW model is never
    code-free for ACL: write it in NHWC).
    Unsupported ops are left to TVM; this function never fails because of one, unless
    `code_free` is ``"require"``.

    `code_free`: ``None`` (default) checks nothing; ``"report"`` prints to stderr the operators
    that stay in TVM (:func:`tvm_residue`), or that the result is code-free; ``"require"``
    raises :class:`NotCodeFree` listing them (docs/code-free.md).  Returns a new IRModule.
    """
    return _partition(mod, params, _ACL, code_free)


def partition_for_bnns(mod: tvm.IRModule, params=None, code_free=None) -> tvm.IRModule:
    """Offload the regions Apple BNNS can run (float32, NCHW data, OIHW weights).

    Like ``partition_for_acl`` but without quantized ops, and without layout
    conversion (NHWC ops are left to TVM); version-2 activations are separate nodes rather than
    fused (docs/subgraph-format.md).  `code_free` as for
    ``partition_for_acl``.  Returns a new IRModule.
    """
    return _partition(mod, params, _BNNS, code_free)


def subgraph_descriptions(mod: tvm.IRModule) -> list[dict]:
    """The parsed descriptions of every ``mote.subgraph`` call in `mod`, in module order."""
    found = []

    def visit(expr):
        if isinstance(expr, relax.Call) and _op_name(expr) == "relax.call_dps_packed":
            f = expr.args[0]
            if isinstance(f, relax.ExternFunc) and str(f.global_symbol) == SUBGRAPH_FUNC:
                args = expr.args[1]
                first = args.fields[0] if isinstance(args, relax.Tuple) else None
                if isinstance(first, tvm.ir.StringImm):
                    found.append(json.loads(str(first.value)))

    for _, func in mod.functions.items():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func.body, visit)
    return found

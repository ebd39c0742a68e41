"""Numpy reference implementation of the ``mote.subgraph`` format (versions 1 to 3).

Every op of ``docs/subgraph-format.md`` in both layouts, float32 and quantized, and the
version-2 ops and activations (refused in a description that says version 1, as the runtime
refuses them).  Quantized
tensors are handled uniformly: a node reads its inputs as real values
(``scale * (q - zero_point)``, per tensor or per channel), computes in float64, and writes an
output with ``quant`` back as ``clip(rint(real / scale) + zero_point)``.  For conv2d/dense this
is the integer accumulation ``sum((x - zx) * (w - zw)) + bias`` times ``s_x * s_w``, with the
activation applied in real units before requantization, as the format specifies.

Version 3 lets a tensor's shape name a symbolic dimension (a string) instead of giving its
extent.  Each run binds every name from the shapes of the input arrays it is given (they must
agree, and every name must occur in some input), substitutes the values into every tensor's
shape, and then runs the description as a static one.

``register_reference()`` registers ``run_description`` as the global packed function
``mote.subgraph`` so that TVM's own ``relax.VirtualMachine`` can run a partitioned module.
"""

from __future__ import annotations

import json
import re

import numpy as np

FORMAT = "mote.subgraph"
VERSION = 3
VERSIONS = (1, 2, 3)
# A symbolic dimension's name (version 3).
SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")

# What only version 2 has (docs/subgraph-format.md, "Version 2").
V2_OPS = frozenset({"activation", "subtract", "divide", "scale_shift", "lrn", "transpose", "channel_shuffle",
                    "split", "layer_norm"})
V2_ACTIVATIONS = frozenset({"sigmoid", "tanh", "hardswish", "hardsigmoid", "silu", "gelu", "gelu_tanh",
                            "leaky_relu"})


def activation_name(act) -> str:
    """The name of an activation attribute: a string, or the one key of a parameterised one."""
    if isinstance(act, dict) and len(act) == 1:
        return next(iter(act))
    return str(act)


def needs_version_2(node: dict) -> bool:
    """Whether a node uses an op or activation that version 1 does not have."""
    act = node.get("attrs", {}).get("activation")
    return node["op"] in V2_OPS or (act is not None and activation_name(act) in V2_ACTIVATIONS)

_QRANGE = {"int8": (-128, 127), "uint8": (0, 255), "int32": (-(2**31), 2**31 - 1)}


class SubgraphError(ValueError):
    """A description the reference cannot run (bad version, unknown op, bad arguments)."""


# --------------------------------------------------------------------------------------------
# Quantization
# --------------------------------------------------------------------------------------------


def _per_axis(values, axis, ndim):
    v = np.asarray(values, dtype=np.float64)
    if v.size == 1:
        return v.reshape(())
    shape = [1] * ndim
    shape[axis] = v.size
    return v.reshape(shape)


def _to_real(arr: np.ndarray, t: dict) -> np.ndarray:
    q = t.get("quant")
    if q is None:
        return arr.astype(np.float64)
    s = _per_axis(q["scale"], q.get("axis", 0), arr.ndim)
    z = _per_axis(q["zero_point"], q.get("axis", 0), arr.ndim)
    return s * (arr.astype(np.float64) - z)


def _from_real(real: np.ndarray, t: dict) -> np.ndarray:
    dtype = t["dtype"]
    q = t.get("quant")
    if q is not None:
        s = _per_axis(q["scale"], q.get("axis", 0), real.ndim)
        z = _per_axis(q["zero_point"], q.get("axis", 0), real.ndim)
        real = np.rint(real / s) + z
    elif dtype in _QRANGE:
        real = np.rint(real)
    if dtype in _QRANGE:
        lo, hi = _QRANGE[dtype]
        real = np.clip(real, lo, hi)
    return real.astype(dtype).reshape(t["shape"])


# --------------------------------------------------------------------------------------------
# Ops (float64, NCHW internally for the 4-D ones)
# --------------------------------------------------------------------------------------------


def _act(x, act):
    if act in (None, "none"):
        return x
    if act == "relu":
        return np.maximum(x, 0.0)
    if act == "relu6":
        return np.clip(x, 0.0, 6.0)
    if isinstance(act, dict) and "clip" in act:
        lo, hi = act["clip"]
        return np.clip(x, lo, hi)
    if act == "sigmoid":
        return _sigmoid(x)
    if act == "tanh":
        return np.tanh(x)
    if act == "hardswish":
        return x * np.clip(x + 3.0, 0.0, 6.0) / 6.0
    if isinstance(act, dict) and "hardsigmoid" in act:
        a, b = act["hardsigmoid"]
        return np.clip(a * x + b, 0.0, 1.0)
    if act == "silu":
        return x * _sigmoid(x)
    if act == "gelu":
        return 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0)))
    if act == "gelu_tanh":
        return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))
    if isinstance(act, dict) and "leaky_relu" in act:
        return np.where(x >= 0.0, x, float(act["leaky_relu"]) * x)
    raise SubgraphError(f"unknown activation {act!r}")


def _sigmoid(x):
    # exp of a large positive argument overflows to inf and gives the right limit, 0
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _erf(x):
    import math

    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _to_nchw(x, layout):
    if layout == "NCHW":
        return x
    if layout == "NHWC":
        return np.transpose(x, (0, 3, 1, 2))
    raise SubgraphError(f"unknown layout {layout!r}")


def _from_nchw(x, layout):
    return x if layout == "NCHW" else np.transpose(x, (0, 2, 3, 1))


def _out_hw(shape, layout):
    return (shape[2], shape[3]) if layout == "NCHW" else (shape[1], shape[2])


def _conv2d(x, w, b, attrs, out_shape):
    layout = attrs["layout"]
    x = _to_nchw(x, layout)
    w = w if layout == "NCHW" else np.transpose(w, (0, 3, 1, 2))  # OHWI -> OIHW
    n, c, _, _ = x.shape
    o, cg, kh, kw = w.shape
    groups = int(attrs.get("groups", 1))
    if c != cg * groups or o % groups:
        raise SubgraphError(f"conv2d: C={c}, weight {w.shape}, groups={groups} do not fit")
    sh, sw = attrs.get("strides", [1, 1])
    dh, dw = attrs.get("dilation", [1, 1])
    pt, pl, pb, pr = attrs.get("padding", [0, 0, 0, 0])
    oh, ow = _out_hw(out_shape, layout)
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    xg = xp.reshape(n, groups, cg, xp.shape[2], xp.shape[3])
    wg = w.reshape(groups, o // groups, cg, kh, kw)
    out = np.zeros((n, groups, o // groups, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xg[:, :, :, i * dh : i * dh + sh * (oh - 1) + 1 : sh, j * dw : j * dw + sw * (ow - 1) + 1 : sw]
            out += np.einsum("ngchw,goc->ngohw", patch, wg[:, :, :, i, j])
    out = out.reshape(n, o, oh, ow)
    if b is not None:
        out = out + b.reshape(1, o, 1, 1)
    return _from_nchw(_act(out, attrs.get("activation", "none")), layout)


def _pool2d(x, kind, attrs, out_shape):
    layout = attrs["layout"]
    x = _to_nchw(x, layout)
    n, c, h, w = x.shape
    kh, kw = attrs["pool_size"]
    sh, sw = attrs.get("strides", [1, 1])
    dh, dw = attrs.get("dilation", [1, 1])
    pt, pl, pb, pr = attrs.get("padding", [0, 0, 0, 0])
    oh, ow = _out_hw(out_shape, layout)
    # Windows may run past the padded input in ceil mode: pad further, and count separately
    # what lies inside the input and inside the padded input.
    eh = max(0, (oh - 1) * sh + (kh - 1) * dh + 1 - (h + pt + pb))
    ew = max(0, (ow - 1) * sw + (kw - 1) * dw + 1 - (w + pl + pr))
    widths = ((0, 0), (0, 0), (pt, pb + eh), (pl, pr + ew))
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, widths, constant_values=fill)
    inside = np.pad(np.ones((h, w)), widths[2:])
    padded = np.pad(np.ones((h + pt + pb, w + pl + pr)), ((0, eh), (0, ew)))
    count_mask = padded if attrs.get("count_include_pad", False) else inside
    acc = np.full((n, c, oh, ow), fill)
    cnt = np.zeros((oh, ow))
    for i in range(kh):
        for j in range(kw):
            sl = (slice(i * dh, i * dh + sh * (oh - 1) + 1, sh), slice(j * dw, j * dw + sw * (ow - 1) + 1, sw))
            if kind == "max":
                acc = np.maximum(acc, xp[:, :, sl[0], sl[1]])
            else:
                acc = acc + xp[:, :, sl[0], sl[1]]
                cnt = cnt + count_mask[sl[0], sl[1]]
    if kind == "avg":
        acc = acc / np.maximum(cnt, 1.0)
    return _from_nchw(acc, layout)


def _global_pool(x, kind, layout):
    axes = (2, 3) if layout == "NCHW" else (1, 2)
    return x.mean(axis=axes, keepdims=True) if kind == "avg" else x.max(axis=axes, keepdims=True)


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _lrn(x, attrs):
    x = _to_nchw(x, attrs["layout"])
    size = int(attrs["size"])
    c = x.shape[1]
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2  # floor and ceil of (size-1)/2
    sq = np.zeros_like(x)
    x2 = x * x
    for k in range(c):
        sq[:, k] = x2[:, max(0, k - lo) : min(c, k + hi + 1)].sum(axis=1)
    y = x / (float(attrs["bias"]) + float(attrs["alpha"]) / size * sq) ** float(attrs["beta"])
    return _from_nchw(y, attrs["layout"])


def _channel_shuffle(x, attrs):
    x = _to_nchw(x, attrs["layout"])
    n, c, h, w = x.shape
    g = int(attrs["groups"])
    if g < 1 or c % g:
        raise SubgraphError(f"channel_shuffle: {c} channels in {g} groups")
    y = x.reshape(n, g, c // g, h, w).transpose(0, 2, 1, 3, 4).reshape(n, c, h, w)
    return _from_nchw(y, attrs["layout"])


def _layer_norm(x, gamma, beta, attrs):
    axis = int(attrs["axis"])
    if axis not in (-1, x.ndim - 1):
        raise SubgraphError(f"layer_norm: axis {axis} is not the last axis of a rank-{x.ndim} tensor")
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + float(attrs["epsilon"])) * gamma + beta


def _scale_shift(x, scale, shift, attrs):
    axis = int(attrs["axis"])
    axis = axis + x.ndim if axis < 0 else axis
    shape = [1] * x.ndim
    shape[axis] = -1
    return _act(x * scale.reshape(shape) + shift.reshape(shape), attrs.get("activation", "none"))


def _split(x, node, tensors):
    axis = int(node["attrs"]["axis"])
    axis = axis + x.ndim if axis < 0 else axis
    sizes = [tensors[o]["shape"][axis] for o in node["outputs"]]
    if sum(sizes) != x.shape[axis]:
        raise SubgraphError(f"split: pieces {sizes} do not add up to {x.shape[axis]}")
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


def _run_node(node, vals, tensors):
    op = node["op"]
    attrs = node.get("attrs", {})
    ins = [vals[i] for i in node["inputs"]]
    out_t = tensors[node["outputs"][0]]
    shape = out_t["shape"]
    if op == "conv2d":
        return _conv2d(ins[0], ins[1], ins[2] if len(ins) > 2 else None, attrs, shape)
    if op in ("max_pool2d", "avg_pool2d"):
        return _pool2d(ins[0], op[:3], attrs, shape)
    if op in ("global_max_pool2d", "global_avg_pool2d"):
        return _global_pool(ins[0], op[7:10], attrs["layout"])
    if op == "dense":
        y = ins[0] @ ins[1].T
        if len(ins) > 2:
            y = y + ins[2]
        return _act(y, attrs.get("activation", "none"))
    if op == "matmul":
        return np.matmul(ins[0], ins[1])
    if op in ("add", "multiply", "subtract", "divide"):
        fn = {"add": np.add, "multiply": np.multiply, "subtract": np.subtract, "divide": np.divide}[op]
        return _act(fn(ins[0], ins[1]), attrs.get("activation", "none"))
    if op == "activation":
        return _act(ins[0], attrs["activation"])
    if op == "scale_shift":
        return _scale_shift(ins[0], ins[1], ins[2], attrs)
    if op == "lrn":
        return _lrn(ins[0], attrs)
    if op == "transpose":
        return np.transpose(ins[0], [int(a) for a in attrs["axes"]])
    if op == "channel_shuffle":
        return _channel_shuffle(ins[0], attrs)
    if op == "layer_norm":
        return _layer_norm(ins[0], ins[1], ins[2], attrs)
    if op == "relu":
        return np.maximum(ins[0], 0.0)
    if op == "relu6":
        return np.clip(ins[0], 0.0, 6.0)
    if op == "clip":
        return np.clip(ins[0], attrs["min"], attrs["max"])
    if op == "softmax":
        return _softmax(ins[0], int(attrs.get("axis", -1)))
    if op == "reshape":
        return ins[0].reshape(shape)
    if op == "concatenate":
        return np.concatenate(ins, axis=int(attrs.get("axis", 0)))
    raise SubgraphError(f"unknown op {op!r} (node {node.get('name')!r})")


# --------------------------------------------------------------------------------------------
# Whole descriptions
# --------------------------------------------------------------------------------------------


def parse_description(desc) -> dict:
    """Parse (if needed) and check the header of a description; returns the dict."""
    if isinstance(desc, (bytes, bytearray)):
        desc = desc.decode("utf-8")
    if isinstance(desc, str):
        desc = json.loads(desc)
    if desc.get("format") != FORMAT:
        raise SubgraphError(f"not a {FORMAT} description (format={desc.get('format')!r})")
    if desc.get("version") not in VERSIONS:
        raise SubgraphError(f"description version {desc.get('version')!r}; this reference knows versions {VERSIONS}")
    for i, t in enumerate(desc.get("tensors", [])):
        for d in t["shape"]:
            if isinstance(d, str):
                if desc["version"] < 3:
                    raise SubgraphError(f"tensor {i} has the symbolic dimension {d!r}, which needs subgraph "
                                        f"format version 3; this description says version {desc['version']}")
                if SYMBOL.fullmatch(d) is None:
                    raise SubgraphError(f"tensor {i}: {d!r} is not a symbol name")
            elif not isinstance(d, int) or isinstance(d, bool):
                raise SubgraphError(f"tensor {i}: dimension {d!r} is neither an extent nor a symbol")
    if desc["version"] == 1:
        for node in desc.get("nodes", []):
            if needs_version_2(node):
                raise SubgraphError(f"node {node.get('name')!r} ({node['op']}) needs subgraph format version 2; "
                                    f"this description says version 1")
    return desc


def bind_symbols(desc: dict, inputs) -> list[dict]:
    """The description's tensors with every symbolic dimension replaced by its value, read from
    the shapes of `inputs` (numpy arrays, in ``desc["inputs"]`` order)."""
    tensors = desc["tensors"]
    values: dict[str, int] = {}
    for i, a in zip(desc["inputs"], inputs):
        shape = tensors[i]["shape"]
        a_shape = np.shape(a)
        if len(a_shape) != len(shape):
            continue  # run_description reports the rank mismatch
        for d, n in zip(shape, a_shape):
            if not isinstance(d, str):
                continue
            if n < 1:
                raise SubgraphError(f"{desc.get('name')}: input tensor {i} gives symbol {d!r} the value {n}")
            if values.setdefault(d, int(n)) != n:
                raise SubgraphError(f"{desc.get('name')}: symbol {d!r} is {values[d]} in one input and {n} in "
                                    f"input tensor {i}")
    out = []
    for i, t in enumerate(tensors):
        names = [d for d in t["shape"] if isinstance(d, str)]
        if names:
            if i in desc["constants"]:
                raise SubgraphError(f"{desc.get('name')}: constant tensor {i} has a symbolic shape {t['shape']}")
            unbound = sorted(set(names) - set(values))
            if unbound:
                raise SubgraphError(f"{desc.get('name')}: symbol(s) {unbound} of tensor {i} occur in no input's shape")
            t = dict(t, shape=[values[d] if isinstance(d, str) else d for d in t["shape"]])
        out.append(t)
    return out


def run_description(desc, inputs, constants) -> list[np.ndarray]:
    """Run a description on numpy `inputs` and `constants` (in description order).

    Returns the outputs in ``desc["outputs"]`` order, with the dtypes and shapes the
    description gives them.
    """
    desc = parse_description(desc)
    tensors = bind_symbols(desc, inputs)
    vals: dict[int, np.ndarray] = {}
    stored: dict[int, np.ndarray] = {}
    for kind, idxs, arrays in (("input", desc["inputs"], inputs), ("constant", desc["constants"], constants)):
        if len(idxs) != len(arrays):
            raise SubgraphError(f"{desc.get('name')}: {len(arrays)} {kind}s given, {len(idxs)} described")
        for i, a in zip(idxs, arrays):
            t = tensors[i]
            a = np.asarray(a)
            if list(a.shape) != list(t["shape"]) or str(a.dtype) != t["dtype"]:
                raise SubgraphError(
                    f"{desc.get('name')}: {kind} tensor {i} is {a.dtype}{list(a.shape)}, "
                    f"described as {t['dtype']}{t['shape']}"
                )
            stored[i] = a
            vals[i] = _to_real(a, t)
    for node in desc["nodes"]:
        if node["op"] == "split":
            reals = _split(vals[node["inputs"][0]], node, tensors)
        elif len(node["outputs"]) != 1:
            raise SubgraphError(f"node {node.get('name')!r}: {len(node['outputs'])} outputs (only split has several)")
        else:
            reals = [_run_node(node, vals, tensors)]
        for o, real in zip(node["outputs"], reals):
            # Store in the tensor's own dtype (requantized if quantized), as a runtime would.
            stored[o] = _from_real(np.asarray(real), tensors[o])
            vals[o] = _to_real(stored[o], tensors[o])
    return [stored[i] for i in desc["outputs"]]


_REGISTERED = False


def register_reference() -> None:
    """Register ``run_description`` as the global function ``mote.subgraph`` (override=True).

    The Relax VM calls it as ``(desc, inputs..., constants..., outputs...)``; the results are
    written into the destination tensors.
    """
    global _REGISTERED
    import tvm

    def subgraph(desc, *args):
        d = parse_description(str(desc))
        n_in, n_c, n_out = len(d["inputs"]), len(d["constants"]), len(d["outputs"])
        if len(args) != n_in + n_c + n_out:
            raise SubgraphError(
                f"{d.get('name')}: called with {len(args)} tensors, expected {n_in} inputs + "
                f"{n_c} constants + {n_out} outputs"
            )
        arrays = [a.numpy() for a in args[: n_in + n_c]]
        results = run_description(d, arrays[:n_in], arrays[n_in:])
        for dst, res in zip(args[n_in + n_c :], results):
            if tuple(dst.shape) != res.shape or str(dst.dtype) != str(res.dtype):
                raise SubgraphError(
                    f"{d.get('name')}: destination {dst.dtype}{tuple(dst.shape)} vs result {res.dtype}{res.shape}"
                )
            dst.copyfrom(np.ascontiguousarray(res))

    tvm.register_global_func(FORMAT, subgraph, override=True)
    _REGISTERED = True

"""More architectures for the architecture benchmark (issue 31): the shapes python/onnx_archs.py's
models hide, and what mobile apps ship. Same conventions as onnx_archs.py (whose graph builder
``_G`` they use), with these exceptions: mobilenet_v2_onnx mirrors the ONNX model zoo's opset-7
file (Clip with attributes, IR version 3), and bert_mini takes int64 token ids with a symbolic
sequence dimension (``INPUT_SPECS``).

Kept apart from onnx_archs.py because the offload zoo (python/offload_zoo.py) builds with that
file's ``_G`` and is keyed by its hash: adding benchmark models must not rebuild the zoo.
``ARCHS`` here is onnx_archs.ARCHS plus these; python/bench_archs.py reads this one.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import onnx_archs
from onnx_archs import _GAIN2, CNN_INPUT, OPSET, _G, _gain2, _make_div, _se  # noqa: F401  (the builders use them)


# ----------------------------------------------------------------------------------------------
# ShuffleNet v1, SqueezeNet 1.0, BN-Inception (issue 31: shapes the suite's v2/1.1 models hide)
# ----------------------------------------------------------------------------------------------


def _shufflenet_v1(name, seed, groups):
    """ShuffleNet 1x with `groups` groups (see shufflenet_v1_g3)."""
    stage_out = {1: (144, 288, 576), 2: (200, 400, 800), 3: (240, 480, 960), 4: (272, 544, 1088),
                 8: (384, 768, 1536)}[groups]
    g = _G(seed)
    x = g.cba("input", 3, 24, 3, 2, in_act="unit")
    x = g.maxpool(x, 3, 2, pad=1)
    c, hw = 24, 56

    def shuffle(x, c, hw):
        y = g.node("Reshape", [x, g.shape([1, groups, c // groups, hw, hw])])
        y = g.node("Transpose", [y], perm=[0, 2, 1, 3, 4])
        return g.node("Reshape", [y, g.shape([1, c, hw, hw])])

    for stage, (c_out, n) in enumerate(zip(stage_out, (4, 8, 4))):
        mid = c_out // 4
        for i in range(n):
            stride = 2 if i == 0 else 1
            # Stride-2 units concatenate the avg-pooled input: their last GConv makes the rest.
            c_res = c_out - c if stride == 2 else c_out
            # "we do not apply group convolution on the first pointwise layer [of Stage 2]"
            g1 = 1 if (stage == 0 and i == 0) else groups
            y = g.cba(x, c, mid, 1, groups=g1, in_act="relu")
            y = shuffle(y, mid, hw)
            hw_out = hw // stride
            y = g.cba(y, mid, mid, 3, stride, groups=mid, act=None, in_act="relu")
            y = g.cba(y, mid, c_res, 1, groups=groups, act=None, in_act=None, gamma=0.5)
            if stride == 2:
                sc = g.avgpool(x, 3, 2, pad=1)
                x = g.node("Relu", [g.node("Concat", [sc, y], axis=1)])
            else:
                x = g.node("Relu", [g.node("Add", [x, y])])
            c, hw = c_out, hw_out
    x = g.head(x, c, dropout=False, gain2=2.0)
    return g.model(name, CNN_INPUT, x, [1, 1000])


def shufflenet_v1_g3(seed: int = 3103) -> onnx.ModelProto:
    """ShuffleNet 1x, g = 3: Zhang, Zhou, Lin, Sun, "ShuffleNet: An Extremely Efficient
    Convolutional Neural Network for Mobile Devices" (CVPR 2018), Table 1 (stage outputs
    240/480/960, 4/8/4 units, conv1 3x3/2 24 + MaxPool 3/2) and the units of Fig. 2(b)/(c): 1x1
    group conv (bottleneck = 1/4 of the unit's output) + BN + ReLU, channel shuffle, 3x3 depthwise
    + BN (no ReLU), 1x1 group conv + BN, then Add with the identity and ReLU; in the stride-2 unit
    the depthwise conv has stride 2, the shortcut is AveragePool 3/2 and the two are joined by
    Concat (the last group conv makes out - in channels), then ReLU.  Stage 2's first 1x1 conv is
    not grouped (Section 3.3).  Written the way an exporter writes such a model (the ONNX zoo's
    ShuffleNet-v1 is a Caffe2 export, opsets 3-9): unfolded BatchNormalization, the shuffle as
    Reshape [1,g,C/g,H,W] -> Transpose(0,2,1,3,4) -> Reshape (also after the ungrouped conv),
    GlobalAveragePool -> Flatten -> Gemm; logits out (the zoo's file ends in a Softmax)."""
    return _shufflenet_v1("shufflenet_v1_g3", seed, 3)


def shufflenet_v1_g8(seed: int = 3108) -> onnx.ModelProto:
    """ShuffleNet 1x, g = 8: as shufflenet_v1_g3 with Table 1's g = 8 column (stage outputs
    384/768/1536): narrower groups (12-24 input channels per group in the 1x1 convs)."""
    return _shufflenet_v1("shufflenet_v1_g8", seed, 8)


def squeezenet1_0(seed: int = 1001) -> onnx.ModelProto:
    """SqueezeNet 1.0: Iandola, Han, Moskewicz, Ashraf, Dally, Keutzer, "SqueezeNet: AlexNet-level
    accuracy with 50x fewer parameters and <0.5MB model size" (2016), Table 1 and Section 3.3:
    conv1 7x7/2 with 96 filters (no padding: 224 -> 109), MaxPool 3/2 after conv1, fire4 and fire8
    (ceil_mode: 109 -> 54 -> 27 -> 13), fire modules 2-9 with squeeze 16/16/32/32/48/48/64/64 and
    expand (1x1 and 3x3 each) 64/64/128/128/192/192/256/256, each squeeze 1x1 -> ReLU feeding a 1x1
    and a 3x3 (padding 1) expand -> ReLU joined by Concat; Dropout(0.5) after fire9; conv10 1x1
    1000 -> ReLU -> GlobalAveragePool -> Flatten.  No batch norm (convs with bias), as
    squeezenet() (1.1); 1.0 has the 2.4x costlier 7x7/96 stem and the later pools."""
    g = _G(seed)

    def fire(x, c_in, sq, ex):
        s = g.node("Relu", [g.conv(x, c_in, sq, 1, pad=0, bias=True)])
        e1 = g.node("Relu", [g.conv(s, sq, ex, 1, pad=0, bias=True)])
        e3 = g.node("Relu", [g.conv(s, sq, ex, 3, pad=1, bias=True)])
        return g.node("Concat", [e1, e3], axis=1), 2 * ex

    x = g.node("Relu", [g.conv("input", 3, 96, 7, 2, pad=0, bias=True, gain2=1.0)])
    x = g.maxpool(x, 3, 2, ceil=1)
    c = 96
    for i, (sq, ex) in enumerate(((16, 64), (16, 64), (32, 128), (32, 128), (48, 192), (48, 192),
                                  (64, 256), (64, 256)), start=2):
        x, c = fire(x, c, sq, ex)
        if i in (4, 8):
            x = g.maxpool(x, 3, 2, ceil=1)
    x = g.dropout(x)
    x = g.node("Relu", [g.conv(x, c, 1000, 1, pad=0, bias=True)])
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x])], axis=1)
    return g.model("squeezenet1_0", CNN_INPUT, x, [1, 1000])


def inception_v2(seed: int = 2222) -> onnx.ModelProto:
    """Inception v2 / BN-Inception: Ioffe, Szegedy, "Batch Normalization: Accelerating Deep Network
    Training by Reducing Internal Covariate Shift" (ICML 2015), Appendix, Figure 5's table: conv
    7x7/2 64, MaxPool 3/2, conv 1x1 64 + 3x3 192, MaxPool 3/2, inception 3a-3c, 4a-4e, 5a-5b with
    four branches: 1x1; 1x1 reduce -> 3x3; 1x1 reduce -> 3x3 -> 3x3 (the 5x5 of GoogLeNet as two
    3x3); pool (average, max in 5b) -> 1x1 projection.  3c and 4e are stride-2 modules: no 1x1
    branch, the last 3x3 of the two conv branches has stride 2, the pool branch is MaxPool 3/2
    passed through.  BN after every conv (a bias-free Conv, then a separate BatchNormalization
    node, as an exporter writes it), then ReLU; no LRN, no Dropout (the paper removes both); final
    AveragePool 7x7 -> Flatten -> Gemm.  Pools pad 1 (224 -> 112 -> 56 -> 28 -> 14 -> 7)."""
    g = _G(seed)

    def cbr(x, cin, cout, k, stride=1):
        return g.cba(x, cin, cout, k, stride, in_act="relu")

    def inception(x, cin, c1, c3r, c3, d3r, d3, pool, pp, stride=1):
        br = []
        if c1:
            br.append(cbr(x, cin, c1, 1))
        br.append(cbr(cbr(x, cin, c3r, 1), c3r, c3, 3, stride))
        d = cbr(cbr(x, cin, d3r, 1), d3r, d3, 3)
        br.append(cbr(d, d3, d3, 3, stride))
        if stride == 2:
            br.append(g.maxpool(x, 3, 2, pad=1))
            pp = cin
        else:
            p = g.avgpool(x, 3, 1, pad=1) if pool == "avg" else g.maxpool(x, 3, 1, pad=1)
            br.append(cbr(p, cin, pp, 1))
        return g.node("Concat", br, axis=1), c1 + c3 + d3 + pp

    x = g.cba("input", 3, 64, 7, 2, pad=3, in_act="unit")
    x = g.maxpool(x, 3, 2, pad=1)
    x = cbr(cbr(x, 64, 64, 1), 64, 192, 3)
    x = g.maxpool(x, 3, 2, pad=1)
    c = 192
    for cfg in ((64, 64, 64, 64, 96, "avg", 32), (64, 64, 96, 64, 96, "avg", 64)):
        x, c = inception(x, c, *cfg)
    x, c = inception(x, c, 0, 128, 160, 64, 96, "max", 0, stride=2)
    for cfg in ((224, 64, 96, 96, 128, "avg", 128), (192, 96, 128, 96, 128, "avg", 128),
                (160, 128, 160, 128, 160, "avg", 96), (96, 128, 192, 160, 192, "avg", 96)):
        x, c = inception(x, c, *cfg)
    x, c = inception(x, c, 0, 128, 192, 192, 256, "max", 0, stride=2)
    x, c = inception(x, c, 352, 192, 320, 160, 224, "avg", 128)
    x, c = inception(x, c, 352, 192, 320, 192, 224, "max", 128)
    assert c == 1024, c
    x = g.avgpool(x, 7, 1)
    x = g.head(x, c, pool=False, dropout=False, gain2=2.0)
    return g.model("inception_v2", CNN_INPUT, x, [1, 1000])


# ----------------------------------------------------------------------------------------------
# MobileNetV2 as the ONNX model zoo's file, EfficientNet-Lite0
# ----------------------------------------------------------------------------------------------


def mobilenet_v2_onnx(seed: int = 2007, opset: int = 7) -> onnx.ModelProto:
    """MobileNetV2 1.0 laid out as the ONNX model zoo's mobilenetv2-7.onnx, which is an MXNet Gluon
    model (the zoo's README: "MXNet ... gluon", ONNX 1.2.1, opset 7) exported by MXNet's ONNX
    exporter.  The network is Sandler et al. (CVPR 2018), Table 2, as mobilenet_v2(); what differs
    from the torchvision-style export, and is mirrored here:

    - opset 7 (IR version 3): ReLU6 is Clip with min=0/max=6 *attributes* (TVM imports it as two
      TE ops, not relax.clip); every BatchNormalization is its own node after a bias-free Conv;
    - the initializers are also listed as graph inputs, as IR-3 exporters wrote them (ONNX Runtime
      then may not constant-fold them: a caller could override them);
    - Gluon's LinearBottleneck always has the 1x1 expansion conv, so the first block (t = 1) is
      1x1 32->32 + BN + ReLU6 -> depthwise 3x3 + BN + ReLU6 -> 1x1 + BN (torchvision drops the 1x1);
    - the classifier is GlobalAveragePool -> 1x1 Conv 1280->1000 without bias -> Flatten (Gluon's
      "pred" conv), no Dropout and no Gemm.
    The input keeps this suite's name "input" (the zoo's is "data").  With `opset` 12 (what
    onnx.version_converter or a re-export at opset >= 11 writes): Clip takes
    min/max as inputs (initializers), IR version 7, and the initializers are *not* graph inputs
    (at IR >= 4 ONNX Runtime would treat them as overridable and skip folding them, which would
    slow ONNX Runtime rather than test Mote); same seed, same weights."""
    cfg = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
    g = _G(seed)

    def cbr(x, c_in, c_out, k, stride=1, groups=1, relu6=True, in_act="relu6"):
        y = g.conv(x, c_in, c_out, k, stride, groups=groups, gain2=_GAIN2[in_act] if in_act != "unit" else 1.0)
        y = g.bn(y, c_out)
        if not relu6:
            return y
        if opset >= 11:
            return g.act(y, "relu6")
        return g.node("Clip", [y], min=0.0, max=6.0)

    x = cbr("input", 3, 32, 3, 2, in_act="unit")
    c, in_act = 32, "relu6"
    for t, c_out, n, s in cfg:
        for i in range(n):
            stride = s if i == 0 else 1
            hid = c * t
            y = cbr(x, c, hid, 1, in_act=in_act)
            y = cbr(y, hid, hid, 3, stride, groups=hid)
            y = cbr(y, hid, c_out, 1, relu6=False)
            if stride == 1 and c == c_out:
                y = g.node("Add", [y, x])
            x, c, in_act = y, c_out, None
    x = cbr(x, c, 1280, 1, in_act=None)
    x = g.node("GlobalAveragePool", [x])
    x = g.conv(x, 1280, 1000, 1, pad=0, gain2=_GAIN2["relu6"])
    x = g.node("Flatten", [x], axis=1)
    name = "mobilenet_v2_onnx" if opset == 7 else f"mobilenet_v2_onnx{opset}"
    m = g.model(name, CNN_INPUT, x, [1, 1000], opset=opset)
    if opset < 8:
        for init in m.graph.initializer:
            m.graph.input.append(helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
        m.ir_version = 3
    else:
        m.ir_version = 7
    onnx.checker.check_model(m)
    return m


def mobilenet_v2_onnx12(seed: int = 2007) -> onnx.ModelProto:
    """mobilenet_v2_onnx at opset 12: Clip(x, 0, 6) with min/max inputs, initializers not listed
    as inputs; otherwise the same graph and weights (isolates the opset-7 Clip's cost)."""
    return mobilenet_v2_onnx(seed, opset=12)


def efficientnet_lite0(seed: int = 7070) -> onnx.ModelProto:
    """EfficientNet-Lite0: Tan, Le, "EfficientNet: Rethinking Model Scaling for Convolutional Neural
    Networks" (ICML 2019), Table 1 (B0's stages: MBConv1 3x3 16; MBConv6 3x3 24 x2; 5x5 40 x2;
    3x3 80 x3; 5x5 112 x3; 5x5 192 x4; 3x3 320), with the Lite changes of the authors' TPU
    repository (EfficientNet-Lite, 2020) for mobile accelerators and quantisation: no
    squeeze-and-excitation, ReLU6 instead of swish, stem (32) and head (1280) kept fixed when
    scaling (Lite0 is the 1.0/1.0/224 member, so as B0).  Exported like mobilenet_v2(): bias-free
    Conv + unfolded BatchNormalization + Clip(0, 6), residual Add, GlobalAveragePool -> Flatten ->
    Dropout(0.2) -> Gemm.  Stochastic depth is the identity at inference."""
    cfg = [(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3), (6, 5, 1, 112, 3),
           (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]  # expansion, kernel, first stride, out, repeats
    g = _G(seed)
    x = g.cba("input", 3, 32, 3, 2, act="relu6", in_act="unit")
    c, in_act = 32, "relu6"
    for t, k, s, c_out, n in cfg:
        for i in range(n):
            stride = s if i == 0 else 1
            hid = c * t
            y, ya = x, in_act
            if t != 1:
                y = g.cba(y, c, hid, 1, act="relu6", in_act=ya)
                ya = "relu6"
            y = g.cba(y, hid, hid, k, stride, groups=hid, act="relu6", in_act=ya)
            y = g.cba(y, hid, c_out, 1, act=None, in_act="relu6")
            if stride == 1 and c == c_out:
                y = g.node("Add", [y, x])
            x, c, in_act = y, c_out, None
    x = g.cba(x, c, 1280, 1, act="relu6", in_act=None)
    x = g.head(x, 1280, gain2=_GAIN2["relu6"])
    return g.model("efficientnet_lite0", CNN_INPUT, x, [1, 1000])


# ----------------------------------------------------------------------------------------------
# A BERT-style encoder with a dynamic sequence length
# ----------------------------------------------------------------------------------------------

BERT_VOCAB = 30522
BERT_SEQ = 128  # the length the benchmark feeds; the ONNX input's sequence dimension is "seq"


def bert_mini(seed: int = 4444, layers: int = 4, d: int = 256, heads: int = 4, ff: int = 1024,
              vocab: int = BERT_VOCAB, max_pos: int = 512) -> onnx.ModelProto:
    """BERT-Mini (L=4, H=256, A=4, FFN 1024): the architecture of Devlin, Chang, Lee, Toutanova,
    "BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding" (NAACL
    2019), Section 3 and 3.2 (token + position + segment embeddings summed, LayerNorm, post-LN
    encoder layers with GELU), at the size of Turc, Chang, Lee, Toutanova, "Well-Read Students Learn
    Better" (2019), Table 6's BERT-Mini: the small encoders phones ship for on-device text.
    Input "input": int64 token ids [1, "seq"] with a *symbolic* sequence dimension, as exporters
    write it with dynamic axes; output: the last hidden states [1, "seq", 256] (no pooler).
    Written like PyTorch's export: the word embedding as Gather; position embeddings sliced to the
    input's length (Shape -> Gather(1) -> Unsqueeze -> Slice of the [512, 256] table); segment 0's
    embedding added as a constant (single-sentence input); LayerNormalization; linear layers as
    MatMul + Add; heads split by Reshape [1, -1, A, d_k] and Transpose; Div sqrt(d_k); Softmax;
    Dropout kept; GELU as Div/Erf/Add/Mul/Mul.  Deviation: no attention-mask input (no padding)."""
    g = _G(seed)
    dk = d // heads

    def linear(x, k, n):
        w = (g.rng.standard_normal((k, n)) / math.sqrt(k)).astype("float32")
        b = (0.02 * g.rng.standard_normal(n)).astype("float32")
        return g.node("Add", [g.node("MatMul", [x, g.const("lin_w", w)]), g.const("lin_b", b)])

    def ln(x):
        gamma = g.rng.uniform(0.8, 1.2, d).astype("float32")
        beta = (0.05 * g.rng.standard_normal(d)).astype("float32")
        return g.node("LayerNormalization", [x, g.const("ln_g", gamma), g.const("ln_b", beta)], axis=-1, epsilon=1e-12)

    def heads_of(x, perm):
        return g.node("Transpose", [g.node("Reshape", [x, g.shape([1, -1, heads, dk])])], perm=perm)

    word = (0.5 * g.rng.standard_normal((vocab, d))).astype("float32")
    pos = (0.5 * g.rng.standard_normal((max_pos, d))).astype("float32")
    seg0 = (0.5 * g.rng.standard_normal(d)).astype("float32")
    x = g.node("Gather", [g.const("word_emb", word), "input"], axis=0)
    one_i = g.name("one_i")  # a 0-d index (g.const's ascontiguousarray would make it 1-d)
    g.inits.append(numpy_helper.from_array(np.array(1, "int64"), one_i))
    n = g.node("Gather", [g.node("Shape", ["input"]), one_i], axis=0)
    n = g.node("Unsqueeze", [n, g.const("axes", np.array([0], "int64"))])
    p = g.node("Slice", [g.const("pos_emb", pos), g.const("zero", np.array([0], "int64")), n,
                         g.const("axis0", np.array([0], "int64"))])
    x = g.node("Add", [g.node("Add", [x, p]), g.const("seg_emb", seg0)])
    x = g.dropout(ln(x))
    for _ in range(layers):
        q = heads_of(linear(x, d, d), [0, 2, 1, 3])
        k = heads_of(linear(x, d, d), [0, 2, 3, 1])
        v = heads_of(linear(x, d, d), [0, 2, 1, 3])
        s = g.node("Div", [g.node("MatMul", [q, k]), g.const("sqrt_dk", np.array(math.sqrt(dk), "float32"))])
        pr = g.dropout(g.node("Softmax", [s], axis=-1))
        a = g.node("Transpose", [g.node("MatMul", [pr, v])], perm=[0, 2, 1, 3])
        a = g.node("Reshape", [a, g.shape([1, -1, d])])
        a = g.dropout(linear(a, d, d))
        x = ln(g.node("Add", [a, x]))
        h = linear(x, d, ff)
        e = g.node("Erf", [g.node("Div", [h, g.const("sqrt2", np.array(math.sqrt(2.0), "float32"))])])
        h = g.node("Mul", [g.node("Mul", [h, g.node("Add", [e, g.const("one", np.array(1.0, "float32"))])]),
                           g.const("half", np.array(0.5, "float32"))])
        h = g.dropout(linear(h, ff, d))
        x = ln(g.node("Add", [h, x]))
    g.nodes.append(helper.make_node("Identity", [x], ["output"], name="output"))
    graph = helper.make_graph(
        g.nodes, "bert_mini",
        [helper.make_tensor_value_info("input", TensorProto.INT64, [1, "seq"])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, "seq", d])],
        g.inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="mote-bench-archs")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


# name -> (builder, input shape): onnx_archs.ARCHS, then these.
ARCHS = {
    **onnx_archs.ARCHS,
    # issue 31: shapes the models above hide, and what mobile apps ship
    "shufflenet_v1_g3": (shufflenet_v1_g3, CNN_INPUT),
    "shufflenet_v1_g8": (shufflenet_v1_g8, CNN_INPUT),
    "squeezenet1_0": (squeezenet1_0, CNN_INPUT),
    "inception_v2": (inception_v2, CNN_INPUT),
    "mobilenet_v2_onnx": (mobilenet_v2_onnx, CNN_INPUT),
    "mobilenet_v2_onnx12": (mobilenet_v2_onnx12, CNN_INPUT),
    "efficientnet_lite0": (efficientnet_lite0, CNN_INPUT),
    "bert_mini": (bert_mini, [1, BERT_SEQ]),
    "bert_mini_dyn": (bert_mini, [1, BERT_SEQ]),
}

# Inputs that are not float32 N(0, 1) of the shape above: dtype, the exclusive upper bound of the
# integer values, the ONNX input's symbolic dimensions with the value the benchmark feeds, and
# whether bench_archs.py pins them at import (from_onnx's shape_dict) or keeps them symbolic.
# bert_mini and bert_mini_dyn are the same ONNX file built both ways.
INPUT_SPECS = {
    "bert_mini": {"dtype": "int64", "high": BERT_VOCAB, "dynamic": {"seq": BERT_SEQ}, "pin": True},
    "bert_mini_dyn": {"dtype": "int64", "high": BERT_VOCAB, "dynamic": {"seq": BERT_SEQ}, "pin": False},
}

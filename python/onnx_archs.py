"""Well-known architectures as ONNX graphs, written from their papers, for the architecture benchmark.

Every function returns an ``onnx.ModelProto`` (opset 17, IR version 8) with seeded random weights
as initializers, input "input" and output "output".  The graphs are shaped the way PyTorch's
exporter writes a model in eval mode, not the way an optimiser would leave them:

- a Conv without bias followed by an unfolded BatchNormalization (random gamma/beta and running
  statistics, variance > 0) wherever the paper has batch norm; convs with a bias where it has none;
- ReLU as Relu, ReLU6 as Clip(0, 6), h-swish as HardSwish, h-sigmoid as HardSigmoid(1/6, 0.5),
  SiLU as Mul(x, Sigmoid(x)), GELU as Div(x, sqrt 2), Erf, Add 1, Mul x, Mul 0.5 (what PyTorch
  writes below opset 20);
- Dropout nodes kept (inference: identity), Flatten before the classifier, fully connected
  layers as Gemm(transB=1), PyTorch's ``x @ W.T + b`` in the transformer as MatMul + Add;
- channel shuffle as Reshape -> Transpose -> Reshape, ``chunk`` as Split, DenseNet's and
  Inception's joins as Concat, residuals as Add.

Weights are He-initialised (gain chosen for each activation) and batch-norm statistics roughly
normalise, so activations stay in range over depth; the classifier outputs are logits.
CNNs take [1, 3, 224, 224] float32 and return [1, 1000].  ``ARCHS`` maps names to builders.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def _gain2(act: str | None) -> float:
    """1 / E[act(z)^2] for z ~ N(0, 1): the weight variance factor that keeps a unit second moment."""
    z = np.random.default_rng(0).standard_normal(200_000)
    f = {
        None: lambda v: v,
        "relu": lambda v: np.maximum(v, 0),
        "relu6": lambda v: np.clip(v, 0, 6),
        "hswish": lambda v: v * np.clip(v + 3, 0, 6) / 6,
        "silu": lambda v: v / (1 + np.exp(-v)),
    }[act]
    return float(1.0 / np.mean(f(z) ** 2))


_GAIN2 = {a: _gain2(a) for a in (None, "relu", "relu6", "hswish", "silu")}


class _G:
    """Graph builder: nodes, initializers, fresh names, and the layers the exporters write."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.n = 0

    def name(self, base: str) -> str:
        self.n += 1
        return f"{base}_{self.n}"

    def const(self, base: str, arr) -> str:
        nm = self.name(base)
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), nm))
        return nm

    def node(self, op: str, inputs: list, n_out: int = 1, **attrs):
        outs = [self.name(op.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=outs[0], **attrs))
        return outs[0] if n_out == 1 else outs

    # -- activations ---------------------------------------------------------------------------
    def act(self, x: str, act: str | None) -> str:
        if act is None:
            return x
        if act == "relu":
            return self.node("Relu", [x])
        if act == "relu6":
            return self.node("Clip", [x, self.const("lo", np.array(0.0, "float32")),
                                      self.const("hi", np.array(6.0, "float32"))])
        if act == "hswish":
            return self.node("HardSwish", [x])
        if act == "silu":
            return self.node("Mul", [x, self.node("Sigmoid", [x])])
        raise ValueError(act)

    # -- layers --------------------------------------------------------------------------------
    def conv(self, x, c_in, c_out, k, stride=1, pad=None, groups=1, bias=False, gain2=2.0):
        """Conv; weights N(0, gain2 / fan_in); a small random bias when `bias`."""
        kh, kw = (k, k) if isinstance(k, int) else k
        pad = (kh // 2) if pad is None else pad
        fan_in = (c_in // groups) * kh * kw
        w = (self.rng.standard_normal((c_out, c_in // groups, kh, kw)) * math.sqrt(gain2 / fan_in)).astype("float32")
        ins = [x, self.const("w", w)]
        if bias:
            ins.append(self.const("b", (0.05 * self.rng.standard_normal(c_out)).astype("float32")))
        return self.node("Conv", ins, kernel_shape=[kh, kw], strides=[stride, stride], pads=[pad] * 4,
                         group=groups, dilations=[1, 1])

    def bn(self, x, c, gamma=1.0):
        """Inference BatchNormalization with statistics that roughly normalise a unit-scale input."""
        r = self.rng
        scale = (gamma * r.uniform(0.8, 1.2, c)).astype("float32")
        beta = (0.1 * r.standard_normal(c)).astype("float32")
        mean = (0.1 * r.standard_normal(c)).astype("float32")
        var = r.uniform(0.8, 1.25, c).astype("float32")
        return self.node("BatchNormalization", [x, self.const("bn_scale", scale), self.const("bn_b", beta),
                                                self.const("bn_mean", mean), self.const("bn_var", var)],
                         epsilon=1e-5)

    def cba(self, x, c_in, c_out, k, stride=1, pad=None, groups=1, act="relu", gamma=1.0, in_act=None):
        """Conv (no bias) -> BatchNormalization -> activation, as PyTorch exports conv-bn-act blocks.

        The weight gain is chosen for `in_act`, the activation the input came through ("unit" for
        the network's input, None for a linear one), so the conv output has about unit variance."""
        y = self.conv(x, c_in, c_out, k, stride, pad, groups, gain2=_GAIN2[in_act] if in_act != "unit" else 1.0)
        y = self.bn(y, c_out, gamma)
        return self.act(y, act)

    def maxpool(self, x, k, s, pad=0, ceil=0):
        return self.node("MaxPool", [x], kernel_shape=[k, k], strides=[s, s], pads=[pad] * 4, ceil_mode=ceil)

    def avgpool(self, x, k, s, pad=0):
        return self.node("AveragePool", [x], kernel_shape=[k, k], strides=[s, s], pads=[pad] * 4,
                         count_include_pad=0)

    def lrn(self, x, size=5, alpha=1e-4, beta=0.75, bias=1.0):
        return self.node("LRN", [x], size=size, alpha=alpha, beta=beta, bias=bias)

    def gemm(self, x, k, n, gain2=1.0):
        w = (self.rng.standard_normal((n, k)) * math.sqrt(gain2 / k)).astype("float32")
        b = (0.05 * self.rng.standard_normal(n)).astype("float32")
        return self.node("Gemm", [x, self.const("fc_w", w), self.const("fc_b", b)], alpha=1.0, beta=1.0, transB=1)

    def head(self, x, c, classes=1000, dropout=True, pool=True, gain2=1.0):
        """GlobalAveragePool -> Flatten -> Dropout -> Gemm: the torchvision classifier head."""
        if pool:
            x = self.node("GlobalAveragePool", [x])
        x = self.node("Flatten", [x], axis=1)
        if dropout:
            x = self.dropout(x)
        return self.gemm(x, c, classes, gain2)

    def dropout(self, x):
        return self.node("Dropout", [x])

    def shape(self, dims) -> str:
        return self.const("shape", np.array(dims, dtype="int64"))

    def model(self, name, x_shape, out, out_shape, opset=OPSET) -> onnx.ModelProto:
        self.nodes.append(helper.make_node("Identity", [out], ["output"], name="output"))
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info("output", TensorProto.FLOAT, out_shape)],
            self.inits,
        )
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="mote-bench-archs")
        m.ir_version = 8
        # The 2 GB protobuf limit: VGG-16 is about 550 MB, so the full check is fine.
        onnx.checker.check_model(m)
        return m


CNN_INPUT = [1, 3, 224, 224]


# ----------------------------------------------------------------------------------------------
# ResNet
# ----------------------------------------------------------------------------------------------


def _resnet(name, seed, block, layers, expansion):
    g = _G(seed)
    x = g.cba("input", 3, 64, 7, stride=2, pad=3, in_act="unit")
    x = g.maxpool(x, 3, 2, pad=1)
    c_in = 64
    for stage, (width, n) in enumerate(zip((64, 128, 256, 512), layers)):
        for i in range(n):
            stride = 2 if (stage > 0 and i == 0) else 1
            c_out = width * expansion
            if block == "basic":
                y = g.cba(x, c_in, width, 3, stride, in_act="relu")
                y = g.cba(y, width, width, 3, 1, act=None, in_act="relu", gamma=0.5)
            else:
                # The paper puts the stride on the first 1x1 convolution of the bottleneck.
                y = g.cba(x, c_in, width, 1, stride, in_act="relu")
                y = g.cba(y, width, width, 3, 1, in_act="relu")
                y = g.cba(y, width, c_out, 1, 1, act=None, in_act="relu", gamma=0.5)
            sc = x
            if stride != 1 or c_in != c_out:
                sc = g.cba(x, c_in, c_out, 1, stride, act=None, in_act="relu")
            x = g.node("Relu", [g.node("Add", [y, sc])])
            c_in = c_out
    x = g.head(x, c_in, dropout=False)
    return g.model(name, CNN_INPUT, x, [1, 1000])


def resnet18(seed: int = 1801) -> onnx.ModelProto:
    """ResNet-18: He, Zhang, Ren, Sun, "Deep Residual Learning for Image Recognition" (2015/CVPR 2016),
    Table 1, basic blocks [2, 2, 2, 2], projection shortcuts (option B) where shapes change.
    Exported like torchvision: conv-BN-ReLU, MaxPool 3/2, GlobalAveragePool, Flatten, Gemm."""
    return _resnet("resnet18", seed, "basic", (2, 2, 2, 2), 1)


def resnet50(seed: int = 5001) -> onnx.ModelProto:
    """ResNet-50: He et al., "Deep Residual Learning for Image Recognition" (2015), Table 1,
    bottleneck blocks [3, 4, 6, 3] with expansion 4.  As in the paper (v1), the stride-2 of a stage is
    on the first 1x1 convolution (torchvision's v1.5 puts it on the 3x3: ~4.1 vs 3.9 GMAC)."""
    return _resnet("resnet50", seed, "bottleneck", (3, 4, 6, 3), 4)


# ----------------------------------------------------------------------------------------------
# MobileNets
# ----------------------------------------------------------------------------------------------


def mobilenet_v2(seed: int = 2002) -> onnx.ModelProto:
    """MobileNetV2 (width 1.0): Sandler, Howard, Zhu, Zhmoginov, Chen, "MobileNetV2: Inverted
    Residuals and Linear Bottlenecks" (CVPR 2018), Table 2.  ReLU6 as Clip(0, 6), unfolded BN,
    classifier GlobalAveragePool -> Flatten -> Dropout -> Gemm as torchvision exports it."""
    cfg = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
    g = _G(seed)
    x = g.cba("input", 3, 32, 3, 2, act="relu6", in_act="unit")
    c, in_act = 32, "relu6"
    for t, c_out, n, s in cfg:
        for i in range(n):
            stride = s if i == 0 else 1
            hid = c * t
            y = x
            a = in_act
            if t != 1:
                y = g.cba(y, c, hid, 1, act="relu6", in_act=a)
                a = "relu6"
            y = g.cba(y, hid, hid, 3, stride, groups=hid, act="relu6", in_act=a)
            y = g.cba(y, hid, c_out, 1, act=None, in_act="relu6")
            if stride == 1 and c == c_out:
                y = g.node("Add", [x, y])
            x, c, in_act = y, c_out, None
    x = g.cba(x, c, 1280, 1, act="relu6", in_act=None)
    x = g.head(x, 1280, gain2=_GAIN2["relu6"])
    return g.model("mobilenet_v2", CNN_INPUT, x, [1, 1000])


def _make_div(v, d=8):
    n = max(d, int(v + d / 2) // d * d)
    return n + d if n < 0.9 * v else n


def _se(g: _G, x, c, squeeze, act_sq, gate):
    """Squeeze-and-excitation: GlobalAveragePool, 1x1 conv (bias) + act, 1x1 conv (bias) + gate, Mul."""
    s = g.node("GlobalAveragePool", [x])
    s = g.act(g.conv(s, c, squeeze, 1, pad=0, bias=True, gain2=2.0), act_sq)
    s = g.conv(s, squeeze, c, 1, pad=0, bias=True, gain2=2.0)
    if gate == "hsigmoid":
        s = g.node("HardSigmoid", [s], alpha=1.0 / 6.0, beta=0.5)
    else:
        s = g.node("Sigmoid", [s])
    return g.node("Mul", [x, s])


def mobilenet_v3_large(seed: int = 3003) -> onnx.ModelProto:
    """MobileNetV3-Large (width 1.0): Howard et al., "Searching for MobileNetV3" (ICCV 2019), Table 1.
    h-swish as HardSwish, SE gate h-sigmoid as HardSigmoid(alpha=1/6, beta=0.5), SE squeeze width
    make_divisible(expansion/4, 8) as torchvision.  The last two layers ("1x1 conv, NBN" 1280 and
    the classifier) are Gemm layers after pooling, as torchvision exports them (equivalent on a
    1x1 map), with Dropout between."""
    cfg = [  # kernel, expansion, out, SE, activation, stride
        (3, 16, 16, False, "relu", 1), (3, 64, 24, False, "relu", 2), (3, 72, 24, False, "relu", 1),
        (5, 72, 40, True, "relu", 2), (5, 120, 40, True, "relu", 1), (5, 120, 40, True, "relu", 1),
        (3, 240, 80, False, "hswish", 2), (3, 200, 80, False, "hswish", 1), (3, 184, 80, False, "hswish", 1),
        (3, 184, 80, False, "hswish", 1), (3, 480, 112, True, "hswish", 1), (3, 672, 112, True, "hswish", 1),
        (5, 672, 160, True, "hswish", 2), (5, 960, 160, True, "hswish", 1), (5, 960, 160, True, "hswish", 1),
    ]
    g = _G(seed)
    x = g.cba("input", 3, 16, 3, 2, act="hswish", in_act="unit")
    c, in_act = 16, "hswish"
    for k, exp, c_out, se, a, s in cfg:
        y, ya = x, in_act
        if exp != c:
            y = g.cba(y, c, exp, 1, act=a, in_act=ya)
            ya = a
        y = g.cba(y, exp, exp, k, s, groups=exp, act=a, in_act=ya)
        if se:
            y = _se(g, y, exp, _make_div(exp // 4), "relu", "hsigmoid")
        y = g.cba(y, exp, c_out, 1, act=None, in_act=a)
        if s == 1 and c == c_out:
            y = g.node("Add", [x, y])
        x, c, in_act = y, c_out, None
    x = g.cba(x, c, 960, 1, act="hswish", in_act=None)
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x])], axis=1)
    x = g.act(g.gemm(x, 960, 1280, gain2=_GAIN2["hswish"]), "hswish")
    x = g.dropout(x)
    x = g.gemm(x, 1280, 1000, gain2=_GAIN2["hswish"])
    return g.model("mobilenet_v3_large", CNN_INPUT, x, [1, 1000])


# ----------------------------------------------------------------------------------------------
# ShuffleNetV2, SqueezeNet
# ----------------------------------------------------------------------------------------------


def shufflenet_v2(seed: int = 4004) -> onnx.ModelProto:
    """ShuffleNetV2 1.0x: Ma, Zhang, Zheng, Sun, "ShuffleNet V2: Practical Guidelines for Efficient
    CNN Architecture Design" (ECCV 2018), Table 5 (channels 116/232/464, conv5 1024), units of
    Fig. 3(c)/(d).  Exported like torchvision: channel split as Split, the branches joined by
    Concat, channel shuffle as Reshape [1,2,C/2,H,W] -> Transpose(0,2,1,3,4) -> Reshape; global
    pooling as GlobalAveragePool + Flatten (torchvision writes ReduceMean)."""
    g = _G(seed)
    x = g.cba("input", 3, 24, 3, 2, in_act="unit")
    x = g.maxpool(x, 3, 2, pad=1)
    c, hw = 24, 56

    def shuffle(x, c, hw):
        y = g.node("Reshape", [x, g.shape([1, 2, c // 2, hw, hw])])
        y = g.node("Transpose", [y], perm=[0, 2, 1, 3, 4])
        return g.node("Reshape", [y, g.shape([1, c, hw, hw])])

    for c_out, n in ((116, 4), (232, 8), (464, 4)):
        half = c_out // 2
        for i in range(n):
            if i == 0:
                hw //= 2
                b1 = g.cba(x, c, c, 3, 2, groups=c, act=None, in_act="relu")
                b1 = g.cba(b1, c, half, 1, in_act=None)
                b2 = g.cba(x, c, half, 1, in_act="relu")
                b2 = g.cba(b2, half, half, 3, 2, groups=half, act=None, in_act="relu")
                b2 = g.cba(b2, half, half, 1, in_act=None)
            else:
                b1, b2 = g.node("Split", [x, g.const("split", np.array([half, half], "int64"))], n_out=2, axis=1)
                b2 = g.cba(b2, half, half, 1, in_act="relu")
                b2 = g.cba(b2, half, half, 3, 1, groups=half, act=None, in_act="relu")
                b2 = g.cba(b2, half, half, 1, in_act=None)
            x = shuffle(g.node("Concat", [b1, b2], axis=1), c_out, hw)
            c = c_out
    x = g.cba(x, c, 1024, 1, in_act="relu")
    x = g.head(x, 1024, dropout=False, gain2=2.0)
    return g.model("shufflenet_v2", CNN_INPUT, x, [1, 1000])


def squeezenet(seed: int = 1101) -> onnx.ModelProto:
    """SqueezeNet 1.1: Iandola et al., "SqueezeNet: AlexNet-level accuracy with 50x fewer parameters
    and <0.5MB model size" (2016); version 1.1 from the authors' repository (3x3/2 stem with 64
    filters, pooling after fire 3 and 5), as torchvision.  No batch norm in the paper: convs with
    bias + ReLU; MaxPool 3/2 with ceil_mode; head Dropout -> conv 1x1 (1000) -> ReLU ->
    GlobalAveragePool -> Flatten."""
    g = _G(seed)

    def fire(x, c_in, sq, ex):
        s = g.node("Relu", [g.conv(x, c_in, sq, 1, pad=0, bias=True)])
        e1 = g.node("Relu", [g.conv(s, sq, ex, 1, pad=0, bias=True)])
        e3 = g.node("Relu", [g.conv(s, sq, ex, 3, pad=1, bias=True)])
        return g.node("Concat", [e1, e3], axis=1)

    x = g.node("Relu", [g.conv("input", 3, 64, 3, 2, pad=0, bias=True, gain2=1.0)])
    x = g.maxpool(x, 3, 2, ceil=1)
    x = fire(x, 64, 16, 64)
    x = fire(x, 128, 16, 64)
    x = g.maxpool(x, 3, 2, ceil=1)
    x = fire(x, 128, 32, 128)
    x = fire(x, 256, 32, 128)
    x = g.maxpool(x, 3, 2, ceil=1)
    x = fire(x, 256, 48, 192)
    x = fire(x, 384, 48, 192)
    x = fire(x, 384, 64, 256)
    x = fire(x, 512, 64, 256)
    x = g.dropout(x)
    x = g.node("Relu", [g.conv(x, 512, 1000, 1, pad=0, bias=True)])
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x])], axis=1)
    return g.model("squeezenet1_1", CNN_INPUT, x, [1, 1000])


# ----------------------------------------------------------------------------------------------
# DenseNet, GoogLeNet
# ----------------------------------------------------------------------------------------------


def densenet121(seed: int = 1211) -> onnx.ModelProto:
    """DenseNet-121 (DenseNet-BC, k=32, blocks 6/12/24/16, compression 0.5): Huang, Liu, van der
    Maaten, Weinberger, "Densely Connected Convolutional Networks" (CVPR 2017), Table 1.
    Pre-activation layers (BN -> ReLU -> conv 1x1 (4k) -> BN -> ReLU -> conv 3x3 (k)): the BNs are
    standalone, not after a conv.  Each layer's input is a Concat of every earlier feature map of
    the block, as torchvision's export writes it; transitions BN-ReLU-conv 1x1-AveragePool 2/2."""
    g = _G(seed)
    x = g.cba("input", 3, 64, 7, 2, pad=3, in_act="unit")
    x = g.maxpool(x, 3, 2, pad=1)
    c = 64
    for b, n in enumerate((6, 12, 24, 16)):
        feats = [x]
        for _ in range(n):
            inp = feats[0] if len(feats) == 1 else g.node("Concat", feats, axis=1)
            cin = c + 32 * (len(feats) - 1)
            y = g.node("Relu", [g.bn(inp, cin)])
            y = g.conv(y, cin, 128, 1, pad=0)
            y = g.node("Relu", [g.bn(y, 128)])
            y = g.conv(y, 128, 32, 3, pad=1)
            feats.append(y)
        x = g.node("Concat", feats, axis=1)
        c = c + 32 * n
        if b < 3:
            x = g.node("Relu", [g.bn(x, c)])
            x = g.conv(x, c, c // 2, 1, pad=0)
            x = g.avgpool(x, 2, 2)
            c //= 2
    x = g.node("Relu", [g.bn(x, c)])
    x = g.head(x, c, dropout=False, gain2=2.0)
    return g.model("densenet121", CNN_INPUT, x, [1, 1000])


def googlenet(seed: int = 1414) -> onnx.ModelProto:
    """GoogLeNet (Inception v1): Szegedy et al., "Going Deeper with Convolutions" (CVPR 2015), Table 1
    and Fig. 2(b), with the paper's two LRNs (size 5, alpha 1e-4, beta 0.75, bias 1) after the first
    convolution/pool and after the 3x3 reduce/3x3 pair.  No batch norm (the paper has none): convs
    with bias + ReLU; 5x5 convolutions in the 5x5 branches (torchvision uses 3x3 there).
    Deviations: pools are 3/2 with padding 1 (224 -> 112 -> 56 -> 28 -> 14 -> 7), the auxiliary
    classifiers are left out (inference), the final pool is AveragePool 7x7, Dropout(0.4) kept."""
    g = _G(seed)

    def cr(x, cin, cout, k, s=1):
        return g.node("Relu", [g.conv(x, cin, cout, k, s, bias=True)])

    def inception(x, cin, c1, c3r, c3, c5r, c5, pp):
        b1 = cr(x, cin, c1, 1)
        b2 = cr(cr(x, cin, c3r, 1), c3r, c3, 3)
        b3 = cr(cr(x, cin, c5r, 1), c5r, c5, 5)
        b4 = cr(g.maxpool(x, 3, 1, pad=1), cin, pp, 1)
        return g.node("Concat", [b1, b2, b3, b4], axis=1), c1 + c3 + c5 + pp

    x = g.node("Relu", [g.conv("input", 3, 64, 7, 2, pad=3, bias=True, gain2=1.0)])
    x = g.lrn(g.maxpool(x, 3, 2, pad=1))
    x = cr(x, 64, 64, 1)
    x = cr(x, 64, 192, 3)
    x = g.maxpool(g.lrn(x), 3, 2, pad=1)
    c = 192
    x, c = inception(x, c, 64, 96, 128, 16, 32, 32)
    x, c = inception(x, c, 128, 128, 192, 32, 96, 64)
    x = g.maxpool(x, 3, 2, pad=1)
    for cfg in ((192, 96, 208, 16, 48, 64), (160, 112, 224, 24, 64, 64), (128, 128, 256, 24, 64, 64),
                (112, 144, 288, 32, 64, 64), (256, 160, 320, 32, 128, 128)):
        x, c = inception(x, c, *cfg)
    x = g.maxpool(x, 3, 2, pad=1)
    x, c = inception(x, c, 256, 160, 320, 32, 128, 128)
    x, c = inception(x, c, 384, 192, 384, 48, 128, 128)
    x = g.avgpool(x, 7, 1)
    x = g.head(x, c, pool=False, gain2=2.0)
    return g.model("googlenet", CNN_INPUT, x, [1, 1000])


# ----------------------------------------------------------------------------------------------
# EfficientNet
# ----------------------------------------------------------------------------------------------


def efficientnet_b0(seed: int = 7007) -> onnx.ModelProto:
    """EfficientNet-B0: Tan, Le, "EfficientNet: Rethinking Model Scaling for Convolutional Neural
    Networks" (ICML 2019), Table 1: MBConv blocks with squeeze-and-excitation (squeeze = block input
    channels / 4, SiLU inside, Sigmoid gate), SiLU written as Mul(x, Sigmoid(x)), unfolded BN.
    Stochastic depth is the identity at inference; head conv 1x1 1280 -> GlobalAveragePool ->
    Flatten -> Dropout(0.2) -> Gemm."""
    cfg = [(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3), (6, 5, 1, 112, 3),
           (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]  # expansion, kernel, first stride, out, repeats
    g = _G(seed)
    x = g.cba("input", 3, 32, 3, 2, act="silu", in_act="unit")
    c, in_act = 32, "silu"
    for t, k, s, c_out, n in cfg:
        for i in range(n):
            stride = s if i == 0 else 1
            hid = c * t
            y, ya = x, in_act
            if t != 1:
                y = g.cba(y, c, hid, 1, act="silu", in_act=ya)
                ya = "silu"
            y = g.cba(y, hid, hid, k, stride, groups=hid, act="silu", in_act=ya)
            sq = max(1, c // 4)
            s_ = g.node("GlobalAveragePool", [y])
            s_ = g.act(g.conv(s_, hid, sq, 1, pad=0, bias=True, gain2=2.0), "silu")
            s_ = g.node("Sigmoid", [g.conv(s_, sq, hid, 1, pad=0, bias=True, gain2=2.0)])
            y = g.node("Mul", [y, s_])
            y = g.cba(y, hid, c_out, 1, act=None, in_act="silu")
            if stride == 1 and c == c_out:
                y = g.node("Add", [y, x])
            x, c, in_act = y, c_out, None
    x = g.cba(x, c, 1280, 1, act="silu", in_act=None)
    x = g.head(x, 1280, gain2=_GAIN2["silu"])
    return g.model("efficientnet_b0", CNN_INPUT, x, [1, 1000])


# ----------------------------------------------------------------------------------------------
# VGG, AlexNet
# ----------------------------------------------------------------------------------------------


def vgg16(seed: int = 1616) -> onnx.ModelProto:
    """VGG-16 (configuration D): Simonyan, Zisserman, "Very Deep Convolutional Networks for Large-Scale
    Image Recognition" (ICLR 2015), Table 1.  Convs 3x3 with bias + ReLU, MaxPool 2/2, Flatten,
    Gemm 25088->4096 -> ReLU -> Dropout -> Gemm 4096->4096 -> ReLU -> Dropout -> Gemm 4096->1000.
    torchvision's AdaptiveAvgPool(7x7) is the identity at 224x224 and is left out (~138M weights)."""
    g = _G(seed)
    x, c = "input", 3
    for v in (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"):
        if v == "M":
            x = g.maxpool(x, 2, 2)
        else:
            x = g.node("Relu", [g.conv(x, c, v, 3, pad=1, bias=True, gain2=1.0 if c == 3 else 2.0)])
            c = v
    x = g.node("Flatten", [x], axis=1)
    x = g.dropout(g.node("Relu", [g.gemm(x, 512 * 49, 4096, gain2=2.0)]))
    x = g.dropout(g.node("Relu", [g.gemm(x, 4096, 4096, gain2=2.0)]))
    x = g.gemm(x, 4096, 1000, gain2=2.0)
    return g.model("vgg16", CNN_INPUT, x, [1, 1000])


def alexnet_grouped(seed: int = 1212) -> onnx.ModelProto:
    """AlexNet with the paper's two-GPU grouping: Krizhevsky, Sutskever, Hinton, "ImageNet
    Classification with Deep Convolutional Neural Networks" (NIPS 2012), Section 3 and Fig. 2:
    conv 11x11/4 96 -> ReLU -> LRN(5, 1e-4, 0.75, k=2) -> MaxPool 3/2; conv 5x5 256 groups=2 ->
    ReLU -> LRN -> MaxPool 3/2; conv 3x3 384 (all-to-all); conv 3x3 384 groups=2; conv 3x3 256
    groups=2 -> MaxPool 3/2; Flatten -> Dropout -> Gemm 9216->4096 -> ReLU -> Dropout -> Gemm
    4096->4096 -> ReLU -> Gemm 4096->1000.  Deviation: a 224x224 input with padding 2 on the first
    conv (55x55 maps as in the paper) instead of the paper's 224 (which does not divide)."""
    g = _G(seed)
    x = g.node("Relu", [g.conv("input", 3, 96, 11, 4, pad=2, bias=True, gain2=1.0)])
    x = g.maxpool(g.lrn(x, bias=2.0), 3, 2)
    x = g.node("Relu", [g.conv(x, 96, 256, 5, 1, pad=2, groups=2, bias=True)])
    x = g.maxpool(g.lrn(x, bias=2.0), 3, 2)
    x = g.node("Relu", [g.conv(x, 256, 384, 3, 1, pad=1, bias=True)])
    x = g.node("Relu", [g.conv(x, 384, 384, 3, 1, pad=1, groups=2, bias=True)])
    x = g.node("Relu", [g.conv(x, 384, 256, 3, 1, pad=1, groups=2, bias=True)])
    x = g.maxpool(x, 3, 2)
    x = g.dropout(g.node("Flatten", [x], axis=1))
    x = g.dropout(g.node("Relu", [g.gemm(x, 256 * 36, 4096, gain2=2.0)]))
    x = g.node("Relu", [g.gemm(x, 4096, 4096, gain2=2.0)])
    x = g.gemm(x, 4096, 1000, gain2=2.0)
    return g.model("alexnet_grouped", CNN_INPUT, x, [1, 1000])


# ----------------------------------------------------------------------------------------------
# Transformer encoder
# ----------------------------------------------------------------------------------------------


def transformer_encoder(seed: int = 4242, layers: int = 4, d: int = 256, heads: int = 4, seq: int = 128,
                        ff: int = 1024) -> onnx.ModelProto:
    """A small Transformer encoder: Vaswani et al., "Attention Is All You Need" (NeurIPS 2017),
    Section 3.1-3.3: 4 post-LN layers, d_model 256, 4 heads (d_k 64), d_ff 1024, GELU in the
    feed-forward (as BERT; the paper uses ReLU).  Input: float embeddings "input" [1,128,256]
    (token embedding and positional encoding left out); output: the last layer's hidden states
    [1,128,256] (no pooling, no classifier).  Exported like PyTorch: linear layers as MatMul with
    the transposed weight + Add, heads split by Reshape/Transpose, scores scaled by Div sqrt(d_k),
    Softmax, Dropout kept, LayerNormalization (opset 17), GELU as Div/Erf/Add/Mul/Mul."""
    g = _G(seed)
    dk = d // heads

    def linear(x, k, n):
        w = (g.rng.standard_normal((k, n)) / math.sqrt(k)).astype("float32")
        b = (0.02 * g.rng.standard_normal(n)).astype("float32")
        return g.node("Add", [g.node("MatMul", [x, g.const("lin_w", w)]), g.const("lin_b", b)])

    def ln(x):
        gamma = g.rng.uniform(0.8, 1.2, d).astype("float32")
        beta = (0.05 * g.rng.standard_normal(d)).astype("float32")
        return g.node("LayerNormalization", [x, g.const("ln_g", gamma), g.const("ln_b", beta)], axis=-1, epsilon=1e-5)

    def heads_of(x, perm):
        return g.node("Transpose", [g.node("Reshape", [x, g.shape([1, seq, heads, dk])])], perm=perm)

    x = "input"
    for _ in range(layers):
        q = heads_of(linear(x, d, d), [0, 2, 1, 3])
        k = heads_of(linear(x, d, d), [0, 2, 3, 1])
        v = heads_of(linear(x, d, d), [0, 2, 1, 3])
        s = g.node("Div", [g.node("MatMul", [q, k]), g.const("sqrt_dk", np.array(math.sqrt(dk), "float32"))])
        p = g.dropout(g.node("Softmax", [s], axis=-1))
        a = g.node("Transpose", [g.node("MatMul", [p, v])], perm=[0, 2, 1, 3])
        a = g.node("Reshape", [a, g.shape([1, seq, d])])
        a = g.dropout(linear(a, d, d))
        x = ln(g.node("Add", [x, a]))
        h = linear(x, d, ff)
        e = g.node("Erf", [g.node("Div", [h, g.const("sqrt2", np.array(math.sqrt(2.0), "float32"))])])
        h = g.node("Mul", [g.node("Mul", [h, g.node("Add", [e, g.const("one", np.array(1.0, "float32"))])]),
                           g.const("half", np.array(0.5, "float32"))])
        h = g.dropout(linear(h, ff, d))
        x = ln(g.node("Add", [x, h]))
    return g.model("transformer_encoder", [1, seq, d], x, [1, seq, d])


# name -> (builder, input shape)
ARCHS = {
    "resnet18": (resnet18, CNN_INPUT),
    "resnet50": (resnet50, CNN_INPUT),
    "mobilenet_v2": (mobilenet_v2, CNN_INPUT),
    "mobilenet_v3_large": (mobilenet_v3_large, CNN_INPUT),
    "shufflenet_v2": (shufflenet_v2, CNN_INPUT),
    "squeezenet1_1": (squeezenet, CNN_INPUT),
    "densenet121": (densenet121, CNN_INPUT),
    "googlenet": (googlenet, CNN_INPUT),
    "efficientnet_b0": (efficientnet_b0, CNN_INPUT),
    "vgg16": (vgg16, CNN_INPUT),
    "alexnet_grouped": (alexnet_grouped, CNN_INPUT),
    "transformer_encoder": (transformer_encoder, [1, 128, 256]),
}

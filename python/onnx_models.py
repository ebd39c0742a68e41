"""ONNX models for the offload benchmark, built with onnx.helper and seeded random weights.

    mobilenet_v2()  MobileNetV2-shaped network (width 1.0, the standard inverted-residual table),
                    input [1,3,224,224] float32 -> logits [1,1000]; batch norm is folded into the
                    conv biases, ReLU6 is Clip(0, 6).
    mobilenet_v2_tiny()  the same structure in miniature ([1,3,32,32] -> [1,10]).
    small_cnn()     the offload zoo's small CNN (conv 3->8 3x3 + relu, max pool 2, flatten,
                    Gemm 512->10, softmax) on [1,3,16,16].

Both return an ``onnx.ModelProto`` (opset 13) whose weights are initializers.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13

# (expansion t, output channels c, repeats n, first stride s), as in the MobileNetV2 paper.
MOBILENET_V2_CONFIG = [
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
]


class _Graph:
    """A tiny builder: nodes, initializers and fresh names."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.n = 0

    def name(self, base: str) -> str:
        self.n += 1
        return f"{base}_{self.n}"

    def const(self, base: str, arr: np.ndarray) -> str:
        nm = self.name(base)
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), nm))
        return nm

    def node(self, op: str, inputs: list, **attrs) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def conv(self, x, c_in, c_out, k, stride=1, groups=1, act=None):
        """Conv (+ bias, standing for a folded batch norm) (+ Clip(0,6) or Relu)."""
        fan_in = (c_in // groups) * k * k
        # He-style scale keeps the activations of a 50-layer random network in range.
        w = (self.rng.standard_normal((c_out, c_in // groups, k, k)) * np.sqrt(2.0 / fan_in)).astype("float32")
        b = (0.05 * self.rng.standard_normal(c_out)).astype("float32")
        p = k // 2
        y = self.node("Conv", [x, self.const("w", w), self.const("b", b)], kernel_shape=[k, k],
                      strides=[stride, stride], pads=[p, p, p, p], group=groups)
        if act == "relu6":
            y = self.node("Clip", [y, self.const("lo", np.array(0.0, "float32")),
                                   self.const("hi", np.array(6.0, "float32"))])
        elif act == "relu":
            y = self.node("Relu", [y])
        return y

    def model(self, name, x_shape, out, out_shape) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)],
            self.inits,
        )
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="mote")
        m.ir_version = 8  # readable by older runtimes too
        onnx.checker.check_model(m)
        return m


def mobilenet_v2(seed: int = 2024, num_classes: int = 1000, size: int = 224, config=None,
                 stem: int = 32, head: int = 1280) -> onnx.ModelProto:
    """MobileNetV2 with random weights: input "input" [1,3,size,size] -> [1,num_classes].

    The defaults are the standard network (width 1.0, 224x224, MOBILENET_V2_CONFIG, stem 32,
    head 1280); smaller `config`/`stem`/`head`/`size` give the same structure in miniature.
    """
    config = MOBILENET_V2_CONFIG if config is None else config
    g = _Graph(seed)
    x = g.conv("input", 3, stem, 3, stride=2, act="relu6")
    c = stem
    for t, c_out, n, s in config:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = c * t
            y = x
            if t != 1:
                y = g.conv(y, c, hidden, 1, act="relu6")
            y = g.conv(y, hidden, hidden, 3, stride=stride, groups=hidden, act="relu6")
            y = g.conv(y, hidden, c_out, 1)
            if stride == 1 and c == c_out:
                y = g.node("Add", [x, y])
            x, c = y, c_out
    x = g.conv(x, c, head, 1, act="relu6")
    x = g.node("GlobalAveragePool", [x])
    x = g.node("Flatten", [x], axis=1)
    w = (g.rng.standard_normal((num_classes, head)) / np.sqrt(head)).astype("float32")
    b = (0.05 * g.rng.standard_normal(num_classes)).astype("float32")
    x = g.node("Gemm", [x, g.const("fc_w", w), g.const("fc_b", b)], transB=1)
    return g.model("mobilenet_v2", [1, 3, size, size], x, [1, num_classes])


def mobilenet_v2_tiny(seed: int = 7) -> onnx.ModelProto:
    """The MobileNetV2 structure in miniature ([1,3,32,32] -> [1,10]) for the offload zoo."""
    return mobilenet_v2(seed, num_classes=10, size=32, config=[(1, 8, 1, 1), (6, 12, 2, 2)], stem=8, head=32)


def small_cnn(seed: int = 103) -> onnx.ModelProto:
    """conv 3->8 3x3 pad 1 + relu, max pool 2, flatten, Gemm 512->10, softmax: [1,3,16,16] -> [1,10]."""
    g = _Graph(seed)
    x = g.conv("input", 3, 8, 3, act="relu")
    x = g.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = g.node("Flatten", [x], axis=1)
    w = (g.rng.standard_normal((10, 512)) / np.sqrt(512)).astype("float32")
    b = (0.1 * g.rng.standard_normal(10)).astype("float32")
    x = g.node("Gemm", [x, g.const("fc_w", w), g.const("fc_b", b)], transB=1)
    x = g.node("Softmax", [x], axis=-1)
    return g.model("small_cnn", [1, 3, 16, 16], x, [1, 10])


MODELS = {"mobilenet_v2": mobilenet_v2, "small_cnn": small_cnn, "mobilenet_v2_tiny": mobilenet_v2_tiny}

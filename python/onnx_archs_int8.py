"""Int8 (quantized) versions of the architecture benchmark's networks (issue 31, item 2: "int8
versions of at least three of them within 1.2x of ORT's QDQ/QLinear execution").

Each ``NAME_int8`` is the float ``NAME`` of onnx_archs.py / onnx_archs_mobile.py quantized the way
ONNX Runtime's own tooling does it for a mobile app:

1. ``onnxruntime.quantization.shape_inference.quant_pre_process`` (ONNX shape inference and ORT's
   basic graph optimisations: BatchNormalization folded into the convolution before it, Dropout
   and Identity removed), as ORT's quantization guide asks before quantizing;
2. ``quantize_static`` in the QDQ format (QuantizeLinear/DequantizeLinear pairs around each
   quantized op, which is what TVM's ONNX importer and mote_tvm's partitioner read, and what ORT
   itself fuses into QLinearConv/QGemm/... at session creation), uint8 activations with int8
   weights (U8S8; ACTIVATION_TYPE), per-channel int8 weights (symmetric, zero point 0, scales along
   the output channels), int32 biases at s_x * s_w; MinMax calibration on CALIB_SAMPLES standard-normal inputs (the
   benchmark's own input distribution) drawn from a seed derived from the model's name, so the
   file, and so the benchmark cache keyed by this source, is the same on every build.

ORT's QDQ quantizer drops a Relu/Clip that follows a quantized op and lets the QuantizeLinear's
range do the clamping, so the QDQ graphs have no Relu; the ops ORT quantizes by default
(Conv, Gemm, MatMul, Add, Mul, MaxPool, AveragePool, GlobalAveragePool, Concat, Flatten/Reshape,
Transpose, Split, ...) all get their inputs through DequantizeLinear and their output through
QuantizeLinear.  Nothing here downloads anything.

``ARCHS`` is onnx_archs_mobile.ARCHS (the float suite) plus the int8 models; python/bench_archs.py
reads this one.  ``INT8`` maps each int8 model to its float base.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

import onnx_archs_mobile

# The float models quantized (issue 31: "int8 versions of at least three of them"): what mobile
# apps ship quantized.  ShuffleNet v1 is left out on purpose: mote_tvm offloads quantized conv2d
# only with groups 1 or depthwise (docs/subgraph-format.md), so its grouped 1x1 convs would all
# stay in TVM.
INT8_BASES = ("resnet18", "mobilenet_v2", "squeezenet1_1", "efficientnet_lite0", "shufflenet_v2")
CALIB_SAMPLES = 8
SUFFIX = "_int8"

INT8 = {f"{b}{SUFFIX}": b for b in INT8_BASES}
# U8S8, not ORT's default S8S8: on x86_64 with AVX-512 VNNI (vpdpbusd multiplies uint8 by int8)
# ORT 1.31 ran resnet18's U8S8 QDQ file in 10.5 ms and its S8S8 one in 26 ms at 1 thread
# (mobilenet_v2 4 vs 6.5 ms), so S8S8 would compare Mote with ORT's slow path.  Mote's 8-bit
# GEMM takes both alike (uint8 shifted to int8).  "int8" in the names means 8-bit.
ACTIVATION_TYPE = "QUInt8"


def calibration_inputs(name: str, shape) -> list[dict]:
    """CALIB_SAMPLES standard-normal inputs from a seed of the model's name (not the benchmark's
    input: bench_archs.py seeds that with sum(map(ord, name)))."""
    rng = np.random.default_rng(7919 + sum(map(ord, name)))
    return [{"input": rng.standard_normal(shape).astype("float32")} for _ in range(CALIB_SAMPLES)]


def quantize(name: str) -> onnx.ModelProto:
    """The QDQ int8 model `name` (a key of INT8), built from its float base."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    base = INT8[name]
    builder, shape = onnx_archs_mobile.ARCHS[base]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(calibration_inputs(name, shape))

        def get_next(self):
            return next(self.it, None)

    with tempfile.TemporaryDirectory(prefix="mote-int8-") as tmp:
        fp, pre, q = (os.path.join(tmp, f) for f in ("float.onnx", "pre.onnx", "int8.onnx"))
        onnx.save(builder(), fp)
        # Static shapes throughout: ONNX's own shape inference is enough.
        quant_pre_process(fp, pre, skip_symbolic_shape=True)
        quantize_static(pre, q, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=getattr(QuantType, ACTIVATION_TYPE), weight_type=QuantType.QInt8)
        model = onnx.load(q)
    model.graph.name = name
    onnx.checker.check_model(model)
    return model


def output_quant(model: onnx.ModelProto, output: str = "output") -> tuple[float, int] | None:
    """(scale, zero point) of the QuantizeLinear whose DequantizeLinear writes graph output
    `output`: ORT's result is a multiple of that scale, so agreement is counted in its LSBs."""
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    dq = next((n for n in model.graph.node if n.op_type == "DequantizeLinear" and output in n.output), None)
    if dq is None or dq.input[1] not in inits:
        return None
    zp = int(inits[dq.input[2]].reshape(-1)[0]) if len(dq.input) > 2 and dq.input[2] in inits else 0
    return float(inits[dq.input[1]].reshape(-1)[0]), zp


def _builder(name):
    return lambda: quantize(name)


ARCHS = dict(onnx_archs_mobile.ARCHS)
ARCHS.update({name: (_builder(name), onnx_archs_mobile.ARCHS[base][1]) for name, base in INT8.items()})
INPUT_SPECS = dict(onnx_archs_mobile.INPUT_SPECS)

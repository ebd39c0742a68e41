#!/usr/bin/env python3
"""Build the two small models the C callback tests need, which the zoo does not provide: no zoo
model hands a tensor to a registered function (the zoo's `packed` kernel passes raw pointers).

    python callback_models.py OUT_DIR      -> OUT_DIR/lend.so, OUT_DIR/vm_dps.so

lend.so   main(x[512] f32) -> [512] f32. The TIR kernel `lend` fills a scratch buffer S (2 KiB,
          allocated by the kernel itself through TVMBackendAllocWorkspace and released when it
          returns) with x + 1, then calls the registered function "mote.test.lend" through
          T.call_packed with S and its output B as buffers. Buffers reach the function as
          DLTensor pointers, so the callback receives MoteArg tensors that are views of the
          kernel's memory: S is the kernel's scratch, B the output the VM allocated. The
          callback is expected to write B through the tensor's data pointer (the test's
          callback computes B = 3 * S).

vm_dps.so main(x[512] f32) -> [512] f32 through R.call_dps_packed("mote.test.vm_dps", (x,)):
          the VM itself calls the registered function (resolved when the model is loaded) with
          x and the output tensor it allocated, both VM tensors (the test's callback computes
          out = 2 * x). identity(x[512] f32) -> x returns its input as its output.
"""

import os
import sys

import tvm
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T


@I.ir_module
class _Lend:
    @T.prim_func(private=True)
    def lend(A: T.Buffer((512,), "float32"), B: T.Buffer((512,), "float32")):
        T.func_attr({"tir.noalias": True})
        S = T.alloc_buffer((512,), "float32")
        for i in range(512):
            S[i] = A[i] + T.float32(1)
        T.evaluate(T.call_packed("mote.test.lend", S, B))

    @R.function
    def main(x: R.Tensor((512,), "float32")) -> R.Tensor((512,), "float32"):
        cls = _Lend
        y = R.call_tir(cls.lend, (x,), out_ty=R.Tensor((512,), "float32"))
        return y


@I.ir_module
class _VmDps:
    @R.function
    def main(x: R.Tensor((512,), "float32")) -> R.Tensor((512,), "float32"):
        y = R.call_dps_packed("mote.test.vm_dps", (x,), out_ty=R.Tensor((512,), "float32"))
        return y

    @R.function
    def identity(x: R.Tensor((512,), "float32")) -> R.Tensor((512,), "float32"):
        return x


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, mod in (("lend", _Lend), ("vm_dps", _VmDps)):
        tvm.compile(mod, target="llvm").export_library(os.path.join(out, f"{name}.so"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

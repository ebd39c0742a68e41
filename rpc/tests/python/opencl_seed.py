"""TVM's Android RPC flow on the GPU, with TVM 0.27's client unchanged, against Mote's server
on the machine's OpenCL device (POCL in CI). EXTRA[0] is the OpenCL zoo.

1. The seed's GEMM (kernel-only, compiled for OpenCL): upload, load_module, tensors made on
   remote.cl(0) from numpy, the call, the result read back equal to numpy's a @ b, and
   time_evaluator(f.entry_name, dev, number=5).
2. A Relax model compiled for OpenCL through relax.VirtualMachine(rexec, remote.cl(0)): the
   output stays on the device and reads back equal to TVM's own CPU build of the module (the
   zoo's expected output), again with a host input, and timed.
3. Device memory misuse is an RPCError and the session goes on."""
import os

import numpy as np
import tvm
from tvm import relax

from rpc_common import EXTRA, connect

CLZOO = EXTRA[0]


def arrays(file, prefix):
    with np.load(os.path.join(CLZOO, file)) as z:
        keys = sorted((k for k in z.files if k.startswith(prefix)), key=lambda k: int(k[len(prefix):]))
        return [z[k] for k in keys]


remote = connect()
dev = remote.cl(0)
assert dev.exist, "remote.cl(0) does not exist"

# 1. The GEMM, as TVM's tutorial runs it.
remote.upload(os.path.join(CLZOO, "gemm_cl.so"), "gemm_cl.so")
f = remote.load_module("gemm_cl.so")
n = 256
rng = np.random.default_rng(28)
a_np = rng.uniform(-1, 1, (n, n)).astype("float32")
b_np = rng.uniform(-1, 1, (n, n)).astype("float32")
a = tvm.runtime.tensor(a_np, dev)
b = tvm.runtime.tensor(b_np, dev)
c = tvm.runtime.tensor(np.full((n, n), np.nan, "float32"), dev)
assert a.device.dlpack_device_type() % 128 == 4, a.device
f(a, b, c)
np.testing.assert_allclose(c.numpy(), a_np @ b_np, rtol=1e-4, atol=1e-4)
# Inputs untouched on the device.
np.testing.assert_array_equal(a.numpy(), a_np)
timer = f.time_evaluator(f.entry_name, dev, number=5)
t_gemm = timer(a, b, c)
assert 0 < t_gemm.mean < 1.0, t_gemm
np.testing.assert_allclose(c.numpy(), a_np @ b_np, rtol=1e-4, atol=1e-4)
# A device-to-device copy and a copy to the host, through the client's copyto.
c2 = tvm.runtime.empty((n, n), "float32", dev)
c.copyto(c2)
np.testing.assert_array_equal(c2.numpy(), c.numpy())
host = c.copyto(tvm.cpu(0))
np.testing.assert_array_equal(host.numpy(), c.numpy())

# 2. A Relax model on the device.
remote.upload(os.path.join(CLZOO, "mlp_cl.so"), "mlp_cl.so")
rexec = remote.load_module("mlp_cl.so")
vm = relax.VirtualMachine(rexec, dev)
x_np = arrays("mlp_cl.main.inputs.npz", "arg")[0]
want = arrays("mlp_cl.main.expected.npz", "out")[0]
x = tvm.runtime.tensor(x_np, dev)
for _ in range(3):
    out = vm["main"](x)
    assert out.device.dlpack_device_type() % 128 == 4, out.device
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)
timer = vm.time_evaluator("main", dev, number=3)
t_mlp = timer(x)
assert 0 < t_mlp.mean < 1.0, t_mlp

# 3. Misuse: a CPU tensor record naming device memory is refused; the session goes on.
try:
    f(a, b, tvm.runtime.tensor(np.zeros((n - 1, n), "float32"), dev))
    raise SystemExit("a wrong shape on the device was accepted")
except tvm.error.RPCError as e:
    assert "C.shape" in str(e) or "shape" in str(e), e
f(a, b, c)
np.testing.assert_allclose(c.numpy(), a_np @ b_np, rtol=1e-4, atol=1e-4)
print(f"opencl_seed: ok (gemm {t_gemm.mean * 1e3:.2f} ms, mlp_cl {t_mlp.mean * 1e3:.2f} ms per call "
      f"on {dev.device_name})")

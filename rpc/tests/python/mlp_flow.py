"""The flow of spec §5.10 on mlp.so, plus download/remove and error recovery."""
import os

import numpy as np
import tvm
from tvm import relax

from rpc_common import ZOO, arrays, close, connect, expect_rpc_error

remote = connect()
path = os.path.join(ZOO, "mlp.so")
remote.upload(path, "m.so")
rlib = remote.load_module("m.so")
assert "forward" in rlib["stats"](), rlib["stats"]()
dev = remote.cpu()
vm = relax.VirtualMachine(rlib, dev)
inputs = arrays("mlp.forward.inputs.npz", "arg")
(expected,) = arrays("mlp.forward.expected.npz", "out")
args = [tvm.runtime.tensor(a, dev) for a in inputs]
out = vm["forward"](*args)
assert tuple(out.shape) == expected.shape, out.shape
close(out.numpy(), expected, None, "mlp forward")

# time_evaluator as in the trace (number=10, repeat=3): three positive, sane times.
res = vm.time_evaluator("forward", dev, number=10, repeat=3)(*args)
assert len(res.results) == 3, res.results
assert all(0 < t < 0.5 for t in res.results), res.results

# download gives back the uploaded bytes; remove makes it disappear.
with open(path, "rb") as f:
    original = f.read()
assert bytes(remote.download("m.so")) == original
remote.remove("m.so")
expect_rpc_error(lambda: remote.download("m.so"), "m.so", "download after remove")

# A wrong call comes back as RPCError with Mote's message; the session goes on.
expect_rpc_error(lambda: vm["forward"](args[0], args[1]), "takes 5 arguments", "wrong arity")
close(vm["forward"](*args).numpy(), expected, None, "forward after an error")

# Unknown functions are absent, not errors.
try:
    remote.get_function("no.such.function")
    raise AssertionError("unknown global resolved")
except AttributeError:
    pass
try:
    vm.module["no_such_function"]
    raise AssertionError("unknown VM function resolved")
except AttributeError:
    pass

# A returned tensor can be copied on the server into client memory (kCopyAmongRemote), but not
# written: its memory belongs to the model.
dst = tvm.runtime.empty((2, 8), "float32", dev)
out.copyto(dst)
close(dst.numpy(), expected, {"rtol": 0, "atol": 0}, "copyto from a returned tensor")
expect_rpc_error(lambda: out.copyfrom(np.zeros((2, 8), "float32")), "read-only", "write a result")

# Round-tripping client memory.
buf = tvm.runtime.empty((2, 8), "float32", dev)
buf.copyfrom(expected)
close(buf.numpy(), expected, {"rtol": 0, "atol": 0}, "copyfrom/numpy round trip")
print("mlp_flow: ok")

"""-timeout: a session_timeout=2 client whose call runs longer gets RPCSessionTimeoutError."""
import time

import tvm
from tvm import relax
from tvm.error import RPCError

from rpc_common import arrays, connect, upload

remote = connect(session_timeout=2)
dev = remote.cpu()
upload(remote, "mlp.so")
vm = relax.VirtualMachine(remote.load_module("mlp.so"), dev)
args = [tvm.runtime.tensor(a, dev) for a in arrays("mlp.forward.inputs.npz", "arg")]
start = time.time()
try:
    # About 5 s of timing work on the server.
    vm.time_evaluator("forward", dev, number=1, repeat=1, min_repeat_ms=5000)(*args)
    raise AssertionError("the slow call finished")
except Exception as e:
    kind = type(e).__name__
    assert kind == "RPCSessionTimeoutError", (kind, str(e))
    assert "timeout" in str(e), str(e)
took = time.time() - start
assert took < 4.5, f"the timeout took {took:.1f}s to arrive"
print(f"timeout: ok ({kind} after {took:.1f}s)")

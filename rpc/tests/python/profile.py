"""mote.profile and mote.trace from a plain TVM client."""
import json

import tvm
from tvm import relax

from rpc_common import arrays, connect, upload

remote = connect()
dev = remote.cpu()
upload(remote, "mlp.so")
vm = relax.VirtualMachine(remote.load_module("mlp.so"), dev)
args = [tvm.runtime.tensor(a, dev) for a in arrays("mlp.forward.inputs.npz", "arg")]
prof = json.loads(remote.get_function("mote.profile")(vm.module, "forward", *args))
kernels = {e["name"] for e in prof["entries"] if e["kind"] == "kernel"}
assert {"matmul", "relu"} <= kernels, prof
assert all(e["calls"] >= 1 and e["total_ms"] >= 0 for e in prof["entries"]), prof
assert prof["wall_ms"] > 0
trace = json.loads(remote.get_function("mote.trace")(vm.module, "forward", *args))
evs = trace["traceEvents"]
assert any(e["name"] == "matmul" and e["ph"] == "X" and e["dur"] >= 0 for e in evs), evs
assert not hasattr(vm, "profile"), "TVM 0.27's relax VirtualMachine grew a profile()"
print(f"profile: ok ({len(prof['entries'])} entries, {len(evs)} trace events)")

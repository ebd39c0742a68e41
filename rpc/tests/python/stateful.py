"""The stateful VM API and the VM module's introspection functions on multi.so."""
import numpy as np
import tvm
from tvm import relax

from rpc_common import arrays, close, connect, upload

remote = connect()
dev = remote.cpu()
upload(remote, "multi.so")
vm = relax.VirtualMachine(remote.load_module("multi.so"), dev)
args = [tvm.runtime.tensor(a, dev) for a in arrays("multi.embed_stateful.inputs.npz", "arg")]
expected = arrays("multi.embed_stateful.expected.npz", "out")
vm.set_input("embed", *args)
vm.invoke_stateful("embed")
outs = vm.get_outputs("embed")
assert len(outs) == 2
for o, e in zip(outs, expected):
    close(o.numpy(), e, None, "embed stateful")
f = vm.module
assert f["get_function_arity"]("embed") == 4
names = [f["get_function_param_name"]("embed", i) for i in range(4)]
assert names[2:] == ["proj.weight", "proj.bias"], names

# save_function binds the arguments; time_evaluator then times the saved closure.
fa = [tvm.runtime.tensor(a, dev) for a in arrays("multi.forward.inputs.npz", "arg")]
(fexp,) = arrays("multi.forward.expected.npz", "out")
vm.save_function("forward", "forward_saved", *fa)
close(vm["forward_saved"]().numpy(), fexp, None, "saved forward")
res = vm.time_evaluator("forward_saved", dev, number=3, repeat=2)()
assert len(res.results) == 2 and all(t > 0 for t in res.results), res.results
# A returned tensor passed back as an argument: forward(forward(x)) against numpy.
y = vm["forward"](*fa)
w, b = (t.numpy() for t in fa[1:])
z = vm["forward"](y, fa[1], fa[2])
close(z.numpy(), np.maximum(y.numpy() @ w.T + b, 0), None, "forward of a returned tensor")
print("stateful: ok")

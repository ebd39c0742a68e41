"""A server started with code_free(true) (what the iOS app runs): TVM's client uploads a
code-free model of the offload zoo (argv extra 1), runs it through relax.VirtualMachine against
TVM's outputs and times it; a library that calls compiled kernels (the main zoo's mlp.so) is
refused at load_module with a message naming it as not code-free, and the session goes on."""
import json
import os

import numpy as np
import tvm
from tvm import relax

from rpc_common import ZOO, EXTRA, connect, upload

OZOO = EXTRA[0]
with open(os.path.join(OZOO, "manifest.json")) as f:
    models = json.load(f)["models"]
code_free = [m for m in models if m.get("code_free")][:3]
assert code_free, "the offload zoo has no code-free model"

remote = connect()
dev = remote.cpu()
for m in code_free:
    remote.upload(os.path.join(OZOO, m["file"]), m["file"])
    lib = remote.load_module(m["file"])
    vm = relax.VirtualMachine(lib, dev)
    for case in m["cases"]:
        if case["mode"] != "call" or case.get("expect_error"):
            continue
        with np.load(os.path.join(OZOO, case["inputs"])) as z:
            args = [tvm.runtime.tensor(z[f"arg{i}"], dev) for i in range(len(z.files))]
        with np.load(os.path.join(OZOO, case["expected"])) as z:
            want = z["out0"]
        got = vm[case["function"]](*args).numpy()
        tol = case["tolerance"]
        np.testing.assert_allclose(got, want, rtol=tol["rtol"], atol=tol["atol"])
        timer = vm.module.time_evaluator(case["function"], dev, number=3, repeat=1)
        assert 0 < timer(*args).mean < 1, "timing"

upload(remote, "mlp.so")
try:
    remote.load_module("mlp.so")
    raise SystemExit("mlp.so (which calls compiled kernels) loaded on a code-free server")
except tvm.error.RPCError as e:
    assert "not code-free" in str(e), str(e)
# The session goes on after the refusal.
lib = remote.load_module(code_free[0]["file"])
assert lib is not None
print(f"code_free: ok ({len(code_free)} models)")

"""Two sessions at once from one process: separate sandboxes, both usable."""
import time

import numpy as np
import tvm
from tvm import relax

from rpc_common import EXTRA, arrays, close, connect, expect_rpc_error, upload

r1, r2 = connect(), connect()
r1.upload(bytearray(b"one"), "f.bin")
expect_rpc_error(lambda: r2.download("f.bin"), "f.bin", "other session's file")
r2.upload(bytearray(b"two"), "f.bin")
assert bytes(r1.download("f.bin")) == b"one"
assert bytes(r2.download("f.bin")) == b"two"
for r in (r1, r2):
    upload(r, "mlp.so")
    dev = r.cpu()
    vm = relax.VirtualMachine(r.load_module("mlp.so"), dev)
    args = [tvm.runtime.tensor(a, dev) for a in arrays("mlp.forward.inputs.npz", "arg")]
    close(vm["forward"](*args).numpy(), arrays("mlp.forward.expected.npz", "out")[0], None, "forward")
# Sandbox confinement.
for bad in ["../escape", "/tmp/abs", "a/b", ".."]:
    expect_rpc_error(lambda: r1.upload(bytearray(b"x"), bad), "refused", f"upload {bad!r}")
print("two_sessions: ok", flush=True)
if EXTRA and EXTRA[0] == "hold":
    # Keep both sessions open until told (the Rust side checks active == 2 meanwhile).
    input()

"""TVM's client against what TVM's own server offers besides models: remote.system_lib() on a
server with no model linked is an empty module (a missing function is AttributeError), and
remote.download_linked_module gives a .so back as it is and links a .tar or .o upload into a
shared library that runs locally (the flow of TVM's test_rpc_remote_module)."""
import os
import tempfile

import numpy as np
import tvm
from tvm import te

from rpc_common import ZOO, connect, expect_rpc_error

remote = connect()

# system_lib(): an empty module, as TVM's server gives without a linked model.
lib = remote.system_lib()
try:
    lib["notexist"]
    raise AssertionError("a function of the empty system library was found")
except AttributeError:
    pass

# A .so comes back byte for byte.
with open(os.path.join(ZOO, "gemm.so"), "rb") as f:
    so = f.read()
remote.upload(bytearray(so), "gemm.so")
assert bytes(remote.download_linked_module("gemm.so")) == so, "the .so changed on the way"

# A .tar (export_library's) and a .o are linked by the server; the result runs here.
n = 102
A = te.placeholder((n,), name="A")
B = te.compute(A.shape, lambda *i: A(*i) + 1.0, name="B")
mod = tvm.IRModule.from_expr(te.create_prim_func([A, B]).with_attr("global_symbol", "myadd"))
built = tvm.compile(mod, "llvm")
with tempfile.TemporaryDirectory() as tmp:
    for name in ["dev_lib.tar", "dev_lib.o"]:
        path = os.path.join(tmp, name)
        if name.endswith(".tar"):
            built.export_library(path)
        else:
            built.mod.write_to_file(path)
        remote.upload(path)
        out = os.path.join(tmp, name + ".download.so")
        with open(out, "wb") as f:
            f.write(remote.download_linked_module(name))
        fl = tvm.runtime.load_module(out)
        a = tvm.runtime.tensor(np.random.uniform(size=n).astype("float32"))
        b = tvm.runtime.tensor(np.zeros(n, dtype="float32"))
        fl["myadd"](a, b)
        np.testing.assert_equal(b.numpy(), a.numpy() + 1)

# What cannot be linked is an error, and the session goes on.
remote.upload(bytearray(b"not a library"), "notes.txt")
expect_rpc_error(lambda: remote.download_linked_module("notes.txt"), "do not know how to link",
                 "a .txt")
remote.upload(bytearray(b"not an object file"), "junk.o")
expect_rpc_error(lambda: remote.download_linked_module("junk.o"), "failed", "a junk .o")
expect_rpc_error(lambda: remote.download_linked_module("absent.tar"), "absent.tar", "a missing tar")
assert bytes(remote.download_linked_module("gemm.so")) == so
print("linked_module: ok")

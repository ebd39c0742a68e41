"""TVM's unchanged Python client runs the zoo's `packed` model in N sessions, one after the
other, on a Mote RPC server started from Java (org.mote.rpc.CallbackThreadsTest).

argv: ZOO HOST PORT KEY N
Each session: rpc.connect, upload packed.so, load it, run `main` through relax.VirtualMachine
on a remote tensor, compare with the zoo's expected output and with numpy's 2x+1 of the input,
then end the session (the server side's session thread ends with it) before the next one.
The model's kernel calls the global function mote.zoo.scale_shift, which the Java test
registered: on the server, Java code runs on the session's native thread. Prints "session I ok"
per session, then "done".
"""
import gc
import os
import sys

import numpy as np
import tvm
from tvm import relax, rpc

ZOO, HOST, PORT, KEY, N = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])


def first(file, prefix):
    with np.load(os.path.join(ZOO, file)) as z:
        return z[prefix + "0"]


x = first("packed.main.inputs.npz", "arg")
expected = first("packed.main.expected.npz", "out")
np.testing.assert_allclose(expected, 2 * x + 1, rtol=1e-6, atol=1e-6, err_msg="the zoo's oracle")
for i in range(N):
    remote = rpc.connect(HOST, PORT, key=KEY, session_timeout=60)
    remote.upload(os.path.join(ZOO, "packed.so"), "packed.so")
    dev = remote.cpu()
    vm = relax.VirtualMachine(remote.load_module("packed.so"), dev)
    # A different input per session, so a stale output cannot pass.
    xi = (x + i).astype(x.dtype)
    out = vm["main"](tvm.runtime.tensor(xi, dev)).numpy()
    np.testing.assert_allclose(out, 2 * xi + 1, rtol=1e-5, atol=1e-5, err_msg=f"session {i}")
    if i == 0:
        np.testing.assert_allclose(out, expected + 0, rtol=1e-5, atol=1e-5, err_msg="zoo expected")
    del vm, dev, remote
    gc.collect()
    print(f"session {i} ok", flush=True)
print("done", flush=True)

"""Chained sessions (session_constructor_args=["rpc.Connect", ...]) through the server at
HOST:PORT. argv extra: MODE [HOP_HOST HOP_PORT HOP_KEY]...

  mlp HOPS...      the mlp flow (upload, load_module, relax VM, time_evaluator, download)
                   relayed through every hop listed, checked against the zoo's expected output
  refused HOPS...  the first server refuses the chain naming --allow-hop; it then still serves
  unknown          an unknown constructor is an RPCError
  timeout HOPS...  a session_timeout=2 client whose relayed call runs longer is told so
"""
import os
import time

import numpy as np
import tvm
from tvm import relax

from rpc_common import EXTRA, ZOO, arrays, close, connect, expect_rpc_error, expect_session_timeout

MODE = EXTRA[0]


def constructor_args(hops):
    """["rpc.Connect", host, port, key, False] for each hop, the first hop first."""
    out = []
    for i in range(0, len(hops), 3):
        out += ["rpc.Connect", hops[i], int(hops[i + 1]), hops[i + 2], False]
    return out


def mlp_flow(remote, name="m.so"):
    # A new name each time: TVM's own server crashes loading a library it has loaded before
    # once the upload has overwritten it.
    path = os.path.join(ZOO, "mlp.so")
    remote.upload(path, name)
    rlib = remote.load_module(name)
    dev = remote.cpu()
    vm = relax.VirtualMachine(rlib, dev)
    inputs = arrays("mlp.forward.inputs.npz", "arg")
    (expected,) = arrays("mlp.forward.expected.npz", "out")
    args = [tvm.runtime.tensor(a, dev) for a in inputs]
    close(vm["forward"](*args).numpy(), expected, None, "mlp forward through the chain")
    res = vm.time_evaluator("forward", dev, number=5, repeat=2)(*args)
    assert len(res.results) == 2 and all(t > 0 for t in res.results), res.results
    with open(path, "rb") as f:
        assert bytes(remote.download(name)) == f.read()
    # Client memory round trip (kCopyToRemote / kCopyFromRemote relayed).
    buf = tvm.runtime.empty(expected.shape, "float32", dev)
    buf.copyfrom(expected.astype("float32"))
    np.testing.assert_array_equal(buf.numpy(), expected.astype("float32"))


if MODE == "mlp":
    remote = connect(session_constructor_args=constructor_args(EXTRA[1:]))
    mlp_flow(remote)
    # An error on the last hop comes back as RPCError; the chain goes on.
    expect_rpc_error(lambda: remote.download("no-such-file"), "", "download")
    mlp_flow(remote, "m2.so")
    print(f"chain mlp: ok ({len(EXTRA[1:]) // 3} hops)")
elif MODE == "refused":
    msg = expect_rpc_error(
        lambda: connect(session_constructor_args=constructor_args(EXTRA[1:])),
        "--allow-hop",
        "a hop the server does not allow",
    )
    assert f"{EXTRA[1]}:{EXTRA[2]}" in msg, msg
    remote = connect()
    mlp_flow(remote)
    print("chain refused: ok")
elif MODE == "unknown":
    expect_rpc_error(
        lambda: connect(session_constructor_args=["rpc.NonExistingConstructor"]),
        "rpc.NonExistingConstructor",
        "an unknown constructor",
    )
    print("chain unknown: ok")
elif MODE == "timeout":
    took = expect_session_timeout(
        connect(session_timeout=2, session_constructor_args=constructor_args(EXTRA[1:])))
    print(f"chain timeout: ok ({took:.1f}s)")
else:
    raise SystemExit(f"unknown mode {MODE}")

"""Helpers for the RPC test scripts: argv is HOST PORT ZOO_DIR [extra...]."""
import json
import os
import sys

import numpy as np
import tvm
from tvm import rpc

HOST, PORT, ZOO = sys.argv[1], int(sys.argv[2]), sys.argv[3]
EXTRA = sys.argv[4:]


def connect(**kw):
    return rpc.connect(HOST, PORT, **kw)


def manifest():
    with open(os.path.join(ZOO, "manifest.json")) as f:
        return json.load(f)


def model(name):
    for m in manifest()["models"]:
        if m["name"] == name:
            return m
    raise SystemExit(f"model {name} not in the zoo manifest")


def arrays(file, prefix):
    """Arrays <prefix>0, <prefix>1, ... of a zoo npz, in order."""
    with np.load(os.path.join(ZOO, file)) as z:
        keys = sorted((k for k in z.files if k.startswith(prefix)), key=lambda k: int(k[len(prefix):]))
        return [z[k] for k in keys]


def upload(remote, name, as_name=None):
    remote.upload(os.path.join(ZOO, name), as_name or name)


def close(actual, expected, tol, what):
    tol = tol or {"rtol": 1e-5, "atol": 1e-5}
    np.testing.assert_allclose(
        actual.astype(np.float64) if actual.dtype != np.bool_ else actual,
        expected.astype(np.float64) if expected.dtype != np.bool_ else expected,
        rtol=tol["rtol"], atol=tol["atol"], err_msg=what)


def expect_rpc_error(fn, needle, what):
    try:
        fn()
    except tvm.error.RPCError as e:
        assert needle in str(e), f"{what}: {needle!r} not in {str(e)!r}"
        return str(e)
    raise AssertionError(f"{what}: no RPCError")


def expect_session_timeout(remote, within=4.5):
    """Run about 5 s of timing work on mlp.so over `remote` (made with session_timeout=2): the
    call must fail with RPCSessionTimeoutError, whose message says timeout, within `within`
    seconds. Returns the seconds it took."""
    import time

    from tvm import relax

    dev = remote.cpu()
    upload(remote, "mlp.so")
    vm = relax.VirtualMachine(remote.load_module("mlp.so"), dev)
    args = [tvm.runtime.tensor(a, dev) for a in arrays("mlp.forward.inputs.npz", "arg")]
    start = time.time()
    try:
        vm.time_evaluator("forward", dev, number=1, repeat=1, min_repeat_ms=5000)(*args)
    except Exception as e:
        kind = type(e).__name__
        assert kind == "RPCSessionTimeoutError", (kind, str(e))
        assert "timeout" in str(e), str(e)
    else:
        raise AssertionError("the slow call finished")
    took = time.time() - start
    assert took < within, f"the timeout took {took:.1f}s to arrive"
    return took

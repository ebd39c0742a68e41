"""TVM's unchanged Python client against a Mote RPC server started from Java
(org.mote.rpc.RpcServerTest runs it with the TVM 0.27 venv's python).

argv: ZOO MODE HOST PORT KEY [FREE]
  direct   rpc.connect(HOST, PORT, key=KEY), then the mlp flow; prints "ok <mean ms>".
           Through a TVM proxy at HOST:PORT, the same call reaches the server waiting there.
  tracker  HOST:PORT is a TVM tracker. Waits until it lists server:KEY with FREE free places
           (default 1: the server's session limit) and prints "listed"; runs the mlp flow on the session tracker.request(KEY) hands out and
           prints "ran <mean ms>"; ends that session, then waits for a line on stdin (the Java
           test stops the server meanwhile) and waits until the tracker lists server:KEY no
           more: prints "gone".
The mlp flow: upload the zoo's mlp.so, load it, run `forward` through relax.VirtualMachine on
remote tensors, compare with the zoo's expected outputs, time it with time_evaluator.
"""
import gc
import os
import sys
import time

import numpy as np
import tvm
from tvm import relax, rpc

ZOO, MODE, HOST, PORT, KEY = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
FREE = int(sys.argv[6]) if len(sys.argv) > 6 else 1


def arrays(file, prefix):
    with np.load(os.path.join(ZOO, file)) as z:
        keys = sorted((k for k in z.files if k.startswith(prefix)), key=lambda k: int(k[len(prefix):]))
        return [z[k] for k in keys]


def mlp_flow(remote):
    remote.upload(os.path.join(ZOO, "mlp.so"), "mlp.so")
    dev = remote.cpu()
    vm = relax.VirtualMachine(remote.load_module("mlp.so"), dev)
    args = [tvm.runtime.tensor(a, dev) for a in arrays("mlp.forward.inputs.npz", "arg")]
    (expected,) = arrays("mlp.forward.expected.npz", "out")
    out = vm["forward"](*args).numpy()
    assert out.shape == expected.shape, (out.shape, expected.shape)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5, err_msg="mlp forward")
    res = vm.time_evaluator("forward", dev, number=10, repeat=3)(*args)
    assert len(res.results) == 3 and all(0 < t < 0.5 for t in res.results), res.results
    return res.mean * 1e3


def listing(tracker):
    """(free places of KEY's queue or None, whether server:KEY is a live server entry)."""
    s = tracker.summary()
    info = s["queue_info"].get(KEY)
    listed = any(e.get("key") == f"server:{KEY}" for e in s["server_info"])
    return (None if info is None else info["free"]), listed


def until(what, secs, pred):
    deadline = time.time() + secs
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError(f"not within {secs} s: {what}")


if MODE == "direct":
    ms = mlp_flow(rpc.connect(HOST, PORT, key=KEY, session_timeout=60))
    print(f"ok {ms:.3f}", flush=True)
elif MODE == "tracker":
    tracker = rpc.connect_tracker(HOST, PORT)
    until(f"the tracker lists {KEY} with {FREE} free places", 20, lambda: listing(tracker) == (FREE, True))
    print("listed", flush=True)
    remote = tracker.request(KEY, session_timeout=60)
    ms = mlp_flow(remote)
    del remote
    gc.collect()
    print(f"ran {ms:.3f}", flush=True)
    sys.stdin.readline()
    until(f"the tracker forgets server:{KEY}", 20, lambda: not listing(tracker)[1] and not listing(tracker)[0])
    print("gone", flush=True)
else:
    raise SystemExit(f"unknown mode {MODE}")

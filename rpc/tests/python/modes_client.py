"""TVM's unchanged client reaching Mote's server through a tracker or a proxy.

argv: HOST PORT ZOO_DIR MODE KEY ROUNDS
  MODE tracker: HOST:PORT is a TVM tracker. Waits until the tracker lists KEY with a free
                session, checks `python -m tvm.exec.query_rpc_tracker` lists it, then ROUNDS
                times: connect_tracker(...).request(KEY), run mlp on the remote VM against TVM's
                expected output, see the session taken (free 0) during it and free again after.
  MODE proxy:   HOST:PORT is a TVM proxy; ROUNDS times rpc.connect(HOST, PORT, key=KEY) and mlp.
The server is expected to have max_sessions 1. Prints "ok <rounds>" on success.
"""
import gc
import subprocess
import sys
import time

import tvm
from tvm import relax, rpc

from rpc_common import EXTRA, HOST, PORT, ZOO, arrays, close, upload

MODE, KEY, ROUNDS = EXTRA[0], EXTRA[1], int(EXTRA[2])


def free(tracker):
    """`free` of KEY's queue in the tracker's summary (None while KEY is not listed)."""
    info = tracker.summary()["queue_info"].get(KEY)
    return None if info is None else info["free"]


def wait_free(tracker, want, secs):
    deadline = time.time() + secs
    while time.time() < deadline:
        if free(tracker) == want:
            return
        time.sleep(0.2)
    raise AssertionError(f"free({KEY}) is {free(tracker)}, expected {want} within {secs} s")


def run_mlp(remote):
    upload(remote, "mlp.so", "m.so")
    dev = remote.cpu()
    vm = relax.VirtualMachine(remote.load_module("m.so"), dev)
    args = [tvm.runtime.tensor(a, dev) for a in arrays("mlp.forward.inputs.npz", "arg")]
    (expected,) = arrays("mlp.forward.expected.npz", "out")
    close(vm["forward"](*args).numpy(), expected, None, "mlp forward")


if MODE == "tracker":
    tracker = rpc.connect_tracker(HOST, PORT)
    # Registration (or re-registration after a tracker restart) within the reconnect backoff.
    wait_free(tracker, 1, 30)
    listing = subprocess.run(
        [sys.executable, "-m", "tvm.exec.query_rpc_tracker", "--host", HOST, "--port", str(PORT)],
        capture_output=True, text=True, timeout=60, check=True).stdout
    assert KEY in listing and f"server:{KEY}" in listing, listing
    for _ in range(ROUNDS):
        remote = tracker.request(KEY, session_timeout=60)
        run_mlp(remote)
        assert free(tracker) == 0, f"free({KEY}) is {free(tracker)} during a session"
        del remote
        gc.collect()
        # The server offers the place again once the session is over.
        wait_free(tracker, 1, 15)
elif MODE == "proxy":
    for _ in range(ROUNDS):
        remote = rpc.connect(HOST, PORT, key=KEY, session_timeout=60)
        run_mlp(remote)
        del remote
        gc.collect()
else:
    raise SystemExit(f"unknown mode {MODE}")
print(f"ok {ROUNDS}")

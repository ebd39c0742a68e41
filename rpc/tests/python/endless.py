"""A model that never returns, stopped on the server (docs/rpc.md "Timeouts").

argv: HOST PORT ZOO MODE ENDLESS_TAR MODEL (a model of ZOO's manifest, or "first-code-free":
the first model whose manifest entry says code_free, for a code-free server). ENDLESS_TAR is `craft::endless_loop()` written by
the test (its `main()` loops forever); the server runs with an instruction budget too large to
end it, so only an interrupt can.

- MODE "timeout": a session_timeout=2 session calls main(); TVM's client must raise
  RPCSessionTimeoutError within 10 s. Then a new session uploads MODEL of ZOO and runs its first
  call case, which must match the zoo's expected output (computed by TVM).
- MODE "stop": a session calls main() after printing "calling"; the test stops the server
  meanwhile, and the call must fail with an error (printed). (Also the client the test kills
  mid-call.)
- MODE "zoo": only the new session running MODEL's first call case (ENDLESS unused).
"""
import os
import sys
import time

import numpy as np
import tvm
from tvm import relax

from rpc_common import ZOO, EXTRA, close, connect, manifest, model

MODE, ENDLESS, MODEL = EXTRA[0], EXTRA[1], EXTRA[2]


def endless_vm(remote):
    remote.upload(ENDLESS, "endless.tar")
    return relax.VirtualMachine(remote.load_module("endless.tar"), remote.cpu())


def run_zoo_model():
    remote = connect()
    dev = remote.cpu()
    if MODEL == "first-code-free":
        m = next(x for x in manifest()["models"] if x.get("code_free"))
    else:
        m = model(MODEL)
    remote.upload(os.path.join(ZOO, m["file"]), m["file"])
    vm = relax.VirtualMachine(remote.load_module(m["file"]), dev)
    case = next(c for c in m["cases"] if c.get("mode", "call") == "call" and not c.get("expect_error"))
    with np.load(os.path.join(ZOO, case["inputs"])) as z:
        args = [tvm.runtime.tensor(z[f"arg{i}"], dev) for i in range(len(z.files))]
    with np.load(os.path.join(ZOO, case["expected"])) as z:
        want = z["out0"]
    got = vm[case["function"]](*args).numpy()
    close(got, want, case.get("tolerance"), f"{m['name']}.{case['case']}")
    return f"{m['name']}.{case['case']}"


if MODE == "timeout":
    vm = endless_vm(connect(session_timeout=2))
    start = time.time()
    try:
        vm["main"]()
        raise SystemExit("the endless call returned")
    except tvm.error.RPCError as e:
        kind = type(e).__name__
        assert kind == "RPCSessionTimeoutError", (kind, str(e))
    took = time.time() - start
    assert took < 10, f"the timeout took {took:.1f}s"
    case = run_zoo_model()
    print(f"endless timeout: ok ({kind} after {took:.1f}s; then {case} matches TVM)")
elif MODE == "stop":
    vm = endless_vm(connect())
    print("calling", flush=True)
    start = time.time()
    try:
        vm["main"]()
        raise SystemExit("the endless call returned")
    except Exception as e:  # RPCError with the server's message, or the connection closing
        last = str(e).strip().splitlines()[-1] if str(e).strip() else ""
        print(f"endless stop: ok ({type(e).__name__} after {time.time() - start:.1f}s: {last})")
elif MODE == "zoo":
    print(f"endless zoo: ok ({run_zoo_model()} matches TVM)")
else:
    raise SystemExit(f"unknown mode {MODE}")

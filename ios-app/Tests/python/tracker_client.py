"""TVM 0.27's unchanged client through TVM's tracker, against a server with zoo models linked in.

    python tracker_client.py TRACKER_HOST TRACKER_PORT KEY ZOO_DIR MODEL

Asks the tracker for a session under KEY (waiting until a server offers one), loads MODEL of the
zoo by its system-library prefix with `ffi.SystemLib`, runs each call case through
relax.VirtualMachine against the zoo's expected output (TVM's own run) and times one.
Prints "tracker: ok MODEL (N cases)"; any failure raises.
"""
import json
import os
import sys

import numpy as np
import tvm
from tvm import relax, rpc

host, port, key, zoo, name = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
with open(os.path.join(zoo, "manifest.json")) as f:
    model = next(m for m in json.load(f)["models"] if m["name"] == name)

remote = rpc.connect_tracker(host, port).request(key, session_timeout=60)
dev = remote.cpu()
lib = remote.get_function("ffi.SystemLib")(model["system_lib"]["prefix"])
vm = relax.VirtualMachine(lib, dev)
n = 0
for case in model["cases"]:
    if case.get("mode", "call") != "call" or case.get("expect_error"):
        continue
    with np.load(os.path.join(zoo, case["inputs"])) as z:
        args = [tvm.runtime.tensor(z[f"arg{i}"], dev) for i in range(len(z.files))]
    with np.load(os.path.join(zoo, case["expected"])) as z:
        want = z["out0"]
    got = vm[case["function"]](*args).numpy()
    tol = case.get("tolerance") or {"rtol": 1e-5, "atol": 1e-5}
    np.testing.assert_allclose(got, want, rtol=tol["rtol"], atol=tol["atol"])
    timer = vm.module.time_evaluator(case["function"], dev, number=3, repeat=1)
    assert 0 < timer(*args).mean < 1, "timing"
    n += 1
assert n > 0, f"{name} has no call case"
print(f"tracker: ok {name} ({n} cases)")

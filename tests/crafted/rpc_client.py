"""The crafted files through a code-free `mote rpc serve` with TVM 0.27's own Python client.

    python tests/crafted/rpc_client.py PORT CRAFTED_DIR OFFLOAD_ZOO_DIR

For each file of CRAFTED_DIR/manifest.json marked `rpc`: upload it, load it with
remote.load_module, make a relax.VirtualMachine and call `main`; a file expected to fail must
raise (the server's error) carrying the manifest's message fragment, one expected to work must
return. Afterwards, in the same session, a code-free model of the offload zoo
(dense_bias_relu_acl.tar) is uploaded and run, and its output compared with the zoo's
reference: the server still serves. Prints `crafted check: rpc <file> ok|FAILED` lines and
`rpc: N passed, M failed`; exits 1 on any failure or if nothing ran.
"""

import json
import os
import sys
import time

import numpy as np
import tvm
from tvm import relax, rpc


def main():
    port, folder, ozoo = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    manifest = json.load(open(os.path.join(folder, "manifest.json")))
    remote = rpc.connect("127.0.0.1", port)
    dev = remote.cpu()
    passed = failed = 0

    def report(label, problem, secs):
        nonlocal passed, failed
        if problem:
            failed += 1
            print("crafted check: rpc %s FAILED (%s; %.2f s)" % (label, problem, secs))
        else:
            passed += 1
            print("crafted check: rpc %s ok (%.2f s)" % (label, secs))

    for e in manifest["files"]:
        if not e["rpc"]:
            continue
        start = time.monotonic()
        problem = None
        try:
            remote.upload(os.path.join(folder, e["file"]))
            lib = remote.load_module(e["file"])
            vm = relax.VirtualMachine(lib, dev)
            vm["main"]()
            if e["expect"] == "error":
                problem = "loaded and ran; expected %s" % e["code"]
        except Exception as x:  # TVM's client raises the server's error (RPCError, TVMError)
            text = str(x)
            if e["expect"] == "ok":
                problem = "raised: %s" % text.strip().splitlines()[-1][:200]
            elif e["message"] not in text:
                problem = "the error lacks %r: %s" % (e["message"], text.strip()[:300])
        secs = time.monotonic() - start
        if not problem and secs > 3 * e["time_s"]:
            problem = "took %.1f s" % secs
        report(e["file"], problem, secs)
        try:
            remote.remove(e["file"])
        except Exception:
            pass

    # The server still serves: a code-free model of the offload zoo against its reference.
    start = time.monotonic()
    problem = None
    try:
        zoo = json.load(open(os.path.join(ozoo, "manifest.json")))
        m = next(x for x in zoo["models"] if x["name"] == "dense_bias_relu_acl")
        case = m["cases"][0]
        remote.upload(os.path.join(ozoo, m["archive"]))
        vm = relax.VirtualMachine(remote.load_module(m["archive"]), dev)
        inputs = np.load(os.path.join(ozoo, case["inputs"]))
        want = np.load(os.path.join(ozoo, case["expected"]))["out0"]
        args = [tvm.runtime.tensor(inputs["arg%d" % i], dev) for i in range(len(inputs.files))]
        got = vm[case["function"]](*args).numpy()
        tol = case["tolerance"]
        if got.shape != want.shape or not np.allclose(got, want, rtol=tol["rtol"], atol=tol["atol"]):
            problem = "output differs from the reference"
    except Exception as x:
        problem = "%s: %s" % (type(x).__name__, str(x).strip()[:300])
    report("zoo dense_bias_relu_acl after the crafted files", problem, time.monotonic() - start)
    print("rpc: %d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed or not passed else 0)


if __name__ == "__main__":
    main()

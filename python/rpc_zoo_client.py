"""Run zoo models on a remote Mote (or TVM) RPC server with TVM 0.27's unchanged Python client.

    python rpc_zoo_client.py --host 127.0.0.1 --port 9090 [--key K] --zoo DIR [--only a,b]
                             [--system-lib]

For every selected model of DIR/manifest.json (a zoo or offload zoo built by python/zoo.py or
python/offload_zoo.py) and every case whose mode is "call": upload the library, load it with
remote.load_module, make a relax.VirtualMachine on remote.cpu(), put the inputs in remote
tensors, call the function, fetch the outputs and compare them with the case's expected npz
(TVM's own local run, made when the zoo was built) at the manifest's tolerance.

With --system-lib, the models are not uploaded: the server has the zoo's system-library builds
linked in, and each model with a `system_lib` entry is asked for by prefix with TVM's
`ffi.SystemLib(prefix)` global (what `remote.system_lib()` calls with no prefix); a prefix
nothing registered must then give an empty module, as TVM's server does (a function looked up in
it is AttributeError), and Mote's `mote.system_libs` must list every prefix.

Prints one line per case and a final "rpc zoo: N passed, M failed"; exits 1 on any failure.
This is the host half of scripts/test-rpc-phone.sh (the "phone" is an aarch64 Mote server under
qemu), and works against any server that speaks TVM's RPC protocol.
"""

import argparse
import json
import os
import sys

import numpy as np
import tvm
from tvm import relax, rpc


def flatten(value):
    """Remote outputs (a tensor, or nested tuples of them) as a flat list of numpy arrays."""
    if isinstance(value, tvm.runtime.Tensor):
        return [value.numpy()]
    if isinstance(value, (list, tuple)) or hasattr(value, "__len__"):
        out = []
        for v in value:
            out.extend(flatten(v))
        return out
    raise TypeError(f"unexpected output {type(value)}")


def run_case(remote, vm, dev, zoo, model, case):
    inputs = np.load(os.path.join(zoo, case["inputs"]))
    expected = np.load(os.path.join(zoo, case["expected"]))
    args = [tvm.runtime.tensor(inputs[f"arg{i}"], dev) for i in range(len(inputs.files))]
    result = vm[case["function"]](*args)
    if type(result).__name__ == "RPCObjectRef":  # registered by the runtime, not a Python class
        # A tuple result stays on the server as an opaque object (as with TVM's own server);
        # the stateful API reads its elements.
        vm.set_input(case["function"], *args)
        vm.invoke_stateful(case["function"])
        result = vm.get_outputs(case["function"])
    outs = flatten(result)
    want = [expected[f"out{i}"] for i in range(len(expected.files))]
    if len(outs) != len(want):
        return f"{len(outs)} outputs, expected {len(want)}"
    tol = case.get("tolerance") or {"rtol": 1e-5, "atol": 1e-5}
    for i, (got, exp) in enumerate(zip(outs, want)):
        if got.shape != exp.shape or got.dtype != exp.dtype:
            return f"output {i}: {got.dtype}{list(got.shape)}, expected {exp.dtype}{list(exp.shape)}"
        if not np.allclose(got, exp, rtol=tol["rtol"], atol=tol["atol"]):
            err = float(np.max(np.abs(got.astype(np.float64) - exp.astype(np.float64))))
            return f"output {i}: max abs error {err:g} (rtol {tol['rtol']}, atol {tol['atol']})"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--key", default="")
    ap.add_argument("--zoo", required=True)
    ap.add_argument("--only", default="", help="comma-separated model names (default: all)")
    ap.add_argument("--timeout", type=int, default=0, help="session_timeout in seconds")
    ap.add_argument("--system-lib", action="store_true",
                    help="models are linked into the server: ffi.SystemLib(prefix), no upload")
    a = ap.parse_args()

    manifest = json.load(open(os.path.join(a.zoo, "manifest.json")))
    only = [m for m in a.only.split(",") if m]
    models = [m for m in manifest["models"] if not only or m["name"] in only]
    missing = set(only) - {m["name"] for m in models}
    if missing:
        sys.exit(f"not in {a.zoo}: {', '.join(sorted(missing))}")

    remote = rpc.connect(a.host, a.port, key=a.key, session_timeout=a.timeout)
    dev = remote.cpu()
    passed = failed = 0
    if a.system_lib:
        models = [m for m in models if "system_lib" in m]
        try:
            empty = remote.get_function("ffi.SystemLib")("nope_")
        except Exception as e:  # TVM's client raises RPCError carrying the server's message
            problem = f"an error ({e}) where TVM's server gives an empty module"
        else:
            try:
                empty.get_function("vm_load_executable")
                problem = "the module of a prefix nothing registered has vm_load_executable"
            except AttributeError:
                problem = None
            except Exception as e:
                problem = f"unexpected error: {e}"
        if problem:
            failed += 1
            print(f"FAIL system-lib unknown prefix: {problem}")
        else:
            passed += 1
            print("ok   system-lib unknown prefix is an empty module (AttributeError on lookup)")
        listed = set(remote.get_function("mote.system_libs")().split(","))
        wanted = {m["system_lib"]["prefix"] for m in models}
        if wanted <= listed:
            passed += 1
            print(f"ok   mote.system_libs lists {sorted(wanted)}")
        else:
            failed += 1
            print(f"FAIL mote.system_libs lists {sorted(listed)}, missing {sorted(wanted - listed)}")
    for model in models:
        cases = [c for c in model["cases"] if c.get("mode", "call") == "call" and not c.get("expect_error")]
        if not cases:
            continue
        if a.system_lib:
            rlib = remote.get_function("ffi.SystemLib")(model["system_lib"]["prefix"])
        else:
            remote.upload(os.path.join(a.zoo, model["file"]))
            rlib = remote.load_module(os.path.basename(model["file"]))
        vm = relax.VirtualMachine(rlib, dev)
        for case in cases:
            try:
                problem = run_case(remote, vm, dev, a.zoo, model, case)
            except Exception as e:  # an RPCError from the server is a failure to report
                problem = f"{type(e).__name__}: {str(e).strip().splitlines()[-1]}"
            label = f"{model['name']}.{case['case']}"
            if problem:
                failed += 1
                print(f"FAIL {label}: {problem}")
            else:
                passed += 1
                print(f"ok   {label}")
        if not a.system_lib:
            remote.remove(os.path.basename(model["file"]))
    print(f"rpc zoo: {passed} passed, {failed} failed")
    sys.exit(1 if failed or not passed else 0)


if __name__ == "__main__":
    main()

"""Every zoo model through TVM's client: Relax models with relax.VirtualMachine on remote
tensors (the bytecode build, then the exec_mode="compiled" build where the zoo has one),
kernel-only libraries with module[function](*buffers); outputs against the zoo's expected npz
(made by TVM itself)."""
import numpy as np
import tvm
from tvm import relax

from rpc_common import arrays, close, connect, expect_rpc_error, manifest, upload

remote = connect()
dev = remote.cpu()
checked = 0
builds = []
for m in manifest()["models"]:
    builds.append((m, m["file"], m["file"]))
    if "compiled" in m:
        builds.append((m, m["compiled"]["file"], f"compiled_{m['name']}.so"))
compiled = 0
for m, path, remote_name in builds:
    upload(remote, path, remote_name)
    lib = remote.load_module(remote_name)
    if m["kind"] == "relax":
        vm = relax.VirtualMachine(lib, dev)
    for case in m["cases"]:
        what = f"{m['name']}.{case['case']}"
        inputs = arrays(case["inputs"], "arg")
        scalars = case.get("scalars", [])
        # Scalar parameters of kernels are 0-d arrays in the npz; TVM's client passes them as
        # Python numbers.
        args = [a.item() if i in scalars else tvm.runtime.tensor(a, dev) for i, a in enumerate(inputs)]
        fn = case["function"]
        if case["expect_error"]:
            f = (lambda: vm[fn](*args)) if m["kind"] == "relax" else (lambda: lib[fn](*args))
            expect_rpc_error(f, case["expect_error"], what)
            checked += 1
            continue
        expected = arrays(case["expected"], "out")
        if m["kind"] == "kernels":
            lib[fn](*args)
            outs = [args[i].numpy() for i in case["outputs"]]
        elif case["mode"] == "stateful" or len(expected) > 1:
            # Tuples come back as opaque remote objects; TVM's way to read them over RPC is
            # the stateful API.
            vm.set_input(fn, *args)
            vm.invoke_stateful(fn)
            outs = [t.numpy() for t in vm.get_outputs(fn)]
        else:
            outs = [vm[fn](*args).numpy()]
        assert len(outs) == len(expected), (what, len(outs), len(expected))
        for i, (o, e) in enumerate(zip(outs, expected)):
            assert o.shape == e.shape and o.dtype == e.dtype, (what, i, o.shape, o.dtype, e.shape, e.dtype)
            close(o, e, case["tolerance"], f"{what} out{i}")
        checked += 1
    compiled += path != m["file"]
    print(f"{m['name']}{' (compiled)' if path != m['file'] else ''}: {len(m['cases'])} cases ok", flush=True)
print(f"zoo_all: {checked} cases ok, {compiled} compiled builds")

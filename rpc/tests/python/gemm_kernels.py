"""The kernel-only gemm library: f["gemm"](a, b, c) and f.time_evaluator(f.entry_name, ...),
checked against numpy."""
import numpy as np
import tvm

from rpc_common import connect, model, upload

m = model("gemm")
assert m["kind"] == "kernels", m["kind"]
remote = connect()
dev = remote.cpu()
upload(remote, m["file"])
f = remote.load_module(m["file"])
rng = np.random.default_rng(7)
a_np = rng.standard_normal((64, 32)).astype("float32")
b_np = rng.standard_normal((32, 48)).astype("float32")
a, b = tvm.runtime.tensor(a_np, dev), tvm.runtime.tensor(b_np, dev)
c = tvm.runtime.tensor(np.full((64, 48), np.nan, "float32"), dev)
f["gemm"](a, b, c)
np.testing.assert_allclose(c.numpy(), a_np @ b_np, rtol=1e-4, atol=1e-4)

c2 = tvm.runtime.tensor(np.full((64, 48), np.nan, "float32"), dev)
timer = f.time_evaluator(f.entry_name, dev, number=5)
res = timer(a, b, c2)
assert len(res.results) == 1 and 0 < res.results[0] < 0.5, res.results
np.testing.assert_allclose(c2.numpy(), a_np @ b_np, rtol=1e-4, atol=1e-4)

# Every other argument honoured: repeat, min_repeat_ms grows number, cooldown, cache flush.
res = f.time_evaluator(
    "gemm", dev, number=1, repeat=3, min_repeat_ms=20, cooldown_interval_ms=1,
    repeats_to_cooldown=2, cache_flush_bytes=1 << 16, f_preproc="cache_flush_cpu_non_first_arg",
)(a, b, c2)
assert len(res.results) == 3 and all(0 < t < 0.5 for t in res.results), res.results
try:
    f.time_evaluator("gemm", dev, f_preproc="no_such_preproc")(a, b, c2)
    raise AssertionError("unknown f_preproc accepted")
except tvm.error.RPCError as e:
    assert "f_preproc" in str(e), str(e)
print(f"gemm_kernels: ok ({res.results})")

"""TVM's client calling functions registered in the server's process (tvm4j's RPC test flow:
the app registers test.rpc.addone and test.rpc.strcat, then serves RPC in the same process).
The functions are registered by rpc/tests/registered.rs. argv: HOST PORT ZOO MODE (ZOO is
unused). Each mode prints "registered MODE: ok" at the end."""
import numpy as np
import tvm

from rpc_common import EXTRA, connect, expect_rpc_error

MODE = EXTRA[0]
remote = connect()


def fn(name):
    return remote.get_function(name)


def still_works(what):
    assert fn("test.rpc.addone")(41) == 42, f"the session after {what}"


if MODE == "calls":
    # tvm4j's test_rpc: addone and strcat.
    addone = fn("test.rpc.addone")
    r = addone(10)
    assert r == 11 and isinstance(r, int), repr(r)
    r = fn("test.rpc.strcat")("abc", 11)
    assert r == "abc:11" and isinstance(r, str), repr(r)

    # Floats and bools arrive as such (the function refuses anything else) and come back.
    fb = fn("test.rpc.floatbool")
    r = fb(1.25, True)
    assert r == 2.5 and isinstance(r, float), repr(r)
    assert fb(1.25, False) == 1.25
    neg = fn("test.rpc.negate")
    assert neg(True) is False and neg(False) is True, (neg(True), neg(False))

    # An error of the function is an RPCError with its text; the session goes on.
    expect_rpc_error(lambda: fn("test.rpc.fail")(), "deliberate failure of test.rpc.fail",
                     "a failing function")
    expect_rpc_error(lambda: fn("test.rpc.fail")(), "function `test.rpc.fail` failed",
                     "a failing function's name")
    still_works("an error")

    # A panic likewise: the server thread survives it.
    panics = fn("test.rpc.panic")
    msg = expect_rpc_error(lambda: panics(), "the registered function test.rpc.panic panicked",
                           "a panicking function")
    assert "deliberate panic of test.rpc.panic" in msg, msg
    still_works("a panic")
    expect_rpc_error(lambda: panics(), "panicked", "a second panic")
    still_works("a second panic")
    assert addone(1) == 2, "a handle looked up before the panics"

elif MODE == "tensors":
    dev = remote.cpu()
    x = tvm.runtime.tensor(np.arange(6, dtype="float32").reshape(2, 3), dev)
    # A tensor argument is a view of the client's remote memory...
    r = fn("test.rpc.tensor_sum")(x)
    assert r == 15.0, r
    # ...which the function may write, as a kernel writes its output buffer.
    fn("test.rpc.fill")(x, 7.0)
    np.testing.assert_equal(x.numpy(), np.full((2, 3), 7, dtype="float32"))
    # A tensor returned is a remote tensor the client reads, and may pass back.
    y = fn("test.rpc.twice")(x)
    assert y.shape == (2, 3) and str(y.dtype) == "float32", (y.shape, y.dtype)
    np.testing.assert_equal(y.numpy(), np.full((2, 3), 14, dtype="float32"))
    assert fn("test.rpc.tensor_sum")(y) == 84.0
    # Types other than float32 reach the function as they are.
    assert fn("test.rpc.tensor_sum")(tvm.runtime.tensor(np.ones(4, "int32"), dev)) == 4.0

elif MODE == "refused":
    addone = fn("test.rpc.addone")
    expect_rpc_error(lambda: addone(bytearray(b"abc")), "test.rpc.addone: argument 0: bytes",
                     "bytes")
    expect_rpc_error(lambda: fn("test.rpc.strcat")("abc", remote.cpu()),
                     "test.rpc.strcat: argument 1: a device", "a device")
    # (TVM's client itself refuses to send a remote function; a module it sends.)
    expect_rpc_error(lambda: fn("test.rpc.strcat")("abc", remote.system_lib()),
                     "test.rpc.strcat: argument 1: a module", "a module")
    # The function's own checks still apply to what it is given.
    expect_rpc_error(lambda: addone("ten"), "expected an int", "a string to addone")
    still_works("refused arguments")

elif MODE == "resolution":
    # Resolved once, at lookup: re-registering the name does not change a handle already
    # looked up, only new lookups.
    version = fn("test.rpc.version")
    assert version() == 1
    fn("test.rpc.reregister")()
    assert version() == 1, "the handle followed a new registration"
    assert fn("test.rpc.version")() == 2, "a new lookup did not see the new registration"
    # The server's own names come first: a registered function of the same name is not served.
    libs = fn("mote.system_libs")()
    assert libs != "hijacked", "a registered function shadowed the server's own"

elif MODE == "limit":
    # Each lookup is a handle of the session, bounded by max_handles.
    held = [fn("test.rpc.addone") for _ in range(3)]
    expect_rpc_error(lambda: fn("test.rpc.addone"), "limit exceeded", "a lookup past the limit")
    assert held[0](1) == 2
    del held
    import gc

    gc.collect()
    assert fn("test.rpc.addone")(2) == 3, "handles freed, a lookup works again"

elif MODE == "off":
    # Without the option a registered name is unknown, as any other name.
    for name in ["test.rpc.addone", "test.rpc.strcat", "test.rpc.panic"]:
        try:
            fn(name)
        except AttributeError:
            pass
        else:
            raise AssertionError(f"{name} was served without serve_registered_functions")
    # The server's own functions are served as always.
    assert isinstance(fn("mote.system_libs")(), str)

else:
    raise SystemExit(f"unknown mode {MODE}")

print(f"registered {MODE}: ok")

"""pytest plug-in: run apache/tvm's own RPC tests, unchanged, against Mote's RPC server.

Loaded by scripts/peer/rpc.sh with `-p mote_server_plugin` (this folder on PYTHONPATH). It does
two things:

* With MOTE_RPC_SERVER_BIN set (the path of a `mote` binary), every `tvm.rpc.Server(...)` the
  tests start becomes `mote rpc serve` with the same mode, key, tracker and custom address: a
  `MoteServer` with the attributes and `terminate()` TVM's `Server` has. Without it, the tests
  use TVM's own Python server as they are.
* With MOTE_PEER_RESULTS set (a file path), it writes one JSON object per line for each test:
  its node id and outcome (passed, failed, skipped), plus, for failures, the last line of the
  error. The script reads both runs' files and prints them side by side.

The tests' sources are Apache's and are never copied here; NOT_APPLICABLE and KNOWN_FAILING name
tests by their function name (without the parameters) and say why.
"""

import json
import os
import re
import socket
import subprocess
import tempfile
import threading
import time

import pytest

# Tests that reach functions existing only inside TVM's own server process: the test functions
# TVM's Python server registers when its module is imported (`rpc.test.*`, `rpc.testing.*` in
# python/tvm/rpc/testing.py) and libtvm's testing functions (`testing.echo`, ...). Mote's
# server answers them as unknown (handle 0, `AttributeError` on the client), like any other
# name it does not serve. The ids are test functions; every parametrisation is meant.
NOT_APPLICABLE = {
    "test_rpc_simple": "calls rpc.test.addone, rpc.test.except, rpc.test.strcat (TVM's Python "
    "test functions, registered only in TVM's server process)",
    "test_rpc_runtime_string": "calls rpc.test.runtime_str_concat (TVM's Python test function)",
    "test_rpc_array": "passes the remote tensor to rpc.test.remote_tensor_func (TVM's Python test "
    "function); the tensor upload and read-back before it work on Mote",
    "test_rpc_echo": "calls testing.echo and testing.test_raise_error (libtvm's testing "
    "functions); its remote.system_lib() check passes on Mote",
    "test_rpc_return_func": "calls rpc.test.add_to_lhs (TVM's Python test function)",
    "test_rpc_return_tensor": "calls rpc.test.remote_return_nd (TVM's Python test function)",
    "test_rpc_return_remote_object": "calls rpc.testing.GetShapeElem and rpc.testing.GetShapeSize "
    "(TVM's Python test functions) on an ffi.Shape",
    "test_rpc_session_constructor_args": "calls testing.echo (libtvm's testing function) on the "
    "second hop of a chained session; the chaining itself (rpc.Connect) and its error case are "
    "tested by rpc/tests/chain.rs",
    "test_rpc_session_timeout_error": "looks up rpc.test.addone (TVM's Python test function) "
    "before the timeout; Mote's -timeout itself is tested by rpc/tests/client.rs",
}

# Tests expected to fail on Mote for a reason that is known and owned elsewhere, matched on the
# full node id.
KNOWN_FAILING: list[tuple[re.Pattern, str]] = []


def base_name(nodeid):
    """`path::test_x[param]` -> `test_x`."""
    return nodeid.split("::")[-1].split("[")[0]


def not_applicable(nodeid):
    return NOT_APPLICABLE.get(base_name(nodeid))


def known_failing(nodeid):
    for pattern, reason in KNOWN_FAILING:
        if pattern.search(nodeid):
            return reason
    return None


# TVM's chaining tests (session_constructor_args=["rpc.Connect", "127.0.0.1", server1.port, ...])
# make the first server connect to a second one started after it. Mote's server chains only to
# the hops it is started with (--allow-hop), so listening servers take their port from this
# pool, chosen once, and each allows every port of the pool; a stopped server gives its port
# back. Beyond the pool a server listens on any free port and cannot be chained to.
HOP_POOL_SIZE = 16
_hop_pool = None
_hop_lock = threading.Lock()


def _hop_ports():
    global _hop_pool  # pylint: disable=global-statement
    if _hop_pool is None:
        socks = [socket.socket() for _ in range(HOP_POOL_SIZE)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        _hop_pool = {s.getsockname()[1]: False for s in socks}
        for s in socks:
            s.close()
    return _hop_pool


def _take_hop_port():
    with _hop_lock:
        pool = _hop_ports()
        for port, taken in pool.items():
            if not taken:
                pool[port] = True
                return port
    return 0


def _give_hop_port(port):
    with _hop_lock:
        if port in _hop_ports():
            _hop_ports()[port] = False


class MoteServer:
    """`tvm.rpc.Server`'s interface, served by `mote rpc serve` in a child process.

    TVM's server takes the first free port of [port, port_end); Mote's is started on port 0 and
    the port it prints is reported instead (the tests only read `server.port`). TVM's server
    serves one session at a time and offers the tracker one place; `mote rpc serve` in tracker
    mode offers one place by default too (`--max-sessions`).
    """

    def __init__(
        self,
        host="0.0.0.0",
        port=9091,
        port_end=9199,
        is_proxy=False,
        tracker_addr=None,
        key="",
        load_library=None,
        custom_addr=None,
        silent=False,
        no_fork=False,
        server_init_callback=None,
        reuse_addr=True,
        timeout=None,
    ):
        del port_end, silent, no_fork, reuse_addr, timeout
        if load_library or server_init_callback:
            raise RuntimeError("mote rpc serve cannot load extra libraries or run Python callbacks")
        self.host = host
        self.custom_addr = custom_addr
        self.proc = None
        self.pool_port = 0
        args = [os.environ["MOTE_RPC_SERVER_BIN"], "rpc", "serve", "--key", key]
        if is_proxy:
            # As TVM's: host and port are the proxy's; the proxy registers with the tracker.
            args += ["--through-proxy", f"{host}:{port}"]
        else:
            self.pool_port = _take_hop_port()
            args += ["--host", host, "--port", str(self.pool_port)]
            for p in _hop_ports():
                args += ["--allow-hop", f"127.0.0.1:{p}", "--allow-hop", f"localhost:{p}"]
            if tracker_addr is not None:
                args += ["--tracker", f"{tracker_addr[0]}:{tracker_addr[1]}"]
                if custom_addr is not None:
                    args += ["--custom-addr", custom_addr]
        self.log = tempfile.NamedTemporaryFile(prefix="mote-rpc-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        self.port = port if is_proxy else self._wait_port()

    def _wait_port(self):
        pattern = re.compile(r"listening on .*:(\d+) ")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open(self.log.name, encoding="utf-8", errors="replace") as f:
                m = pattern.search(f.read())
            if m:
                return int(m.group(1))
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        text = open(self.log.name, encoding="utf-8", errors="replace").read()
        self.terminate()
        raise RuntimeError(f"mote rpc serve did not start: {text}")

    def terminate(self):
        """Stop the server (SIGTERM: leaves the tracker or proxy, ends the sessions)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        port, self.pool_port = self.pool_port, 0
        if port:
            _give_hop_port(port)
        self.log.close()
        try:
            os.unlink(self.log.name)
        except OSError:
            pass

    def __del__(self):
        try:
            self.terminate()
        except Exception:  # pylint: disable=broad-except
            pass


_lock = threading.Lock()


def _report_rpc_flag():
    """Make `tvm.support.libinfo()` say USE_RPC=ON when the runtime has TVM's RPC server.

    TVM's tests skip themselves unless `tvm.testing.env.build_flag_enabled("USE_RPC")`, which
    reads `libinfo()`; the TVM 0.27 wheel is built with RPC (it has `rpc.ServerLoop`) but its
    `libinfo()` lists no USE_RPC, so every RPC test would be skipped on both servers. Nothing else
    of libinfo changes, and nothing is added when the runtime really lacks RPC.
    """
    import tvm.support  # pylint: disable=import-outside-toplevel
    from tvm.rpc import _ffi_api  # pylint: disable=import-outside-toplevel

    if getattr(_ffi_api, "ServerLoop", None) is None:
        return
    original = tvm.support.libinfo

    def libinfo():
        info = dict(original())
        info.setdefault("USE_RPC", "ON")
        return info

    tvm.support.libinfo = libinfo


def pytest_configure(config):
    del config
    _report_rpc_flag()
    if os.environ.get("MOTE_RPC_SERVER_BIN"):
        import tvm.rpc  # pylint: disable=import-outside-toplevel
        import tvm.rpc.server  # pylint: disable=import-outside-toplevel

        tvm.rpc.Server = MoteServer
        tvm.rpc.server.Server = MoteServer


def _record(nodeid, outcome, message):
    path = os.environ.get("MOTE_PEER_RESULTS")
    if not path:
        return
    with _lock, open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"id": nodeid, "outcome": outcome, "message": message}) + "\n")


def _message(report):
    text = str(report.longrepr) if report.longrepr is not None else ""
    lines = [l.strip() for l in text.splitlines() if l.strip().startswith("E ")]
    line = lines[-1][1:].strip() if lines else (text.strip().splitlines() or [""])[-1]
    return line[:300]


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report):
    # One outcome per test: a failure in setup or teardown counts as a failure, a skip in setup
    # as a skip, otherwise the call's outcome.
    if report.when == "call" or (report.when == "setup" and not report.passed):
        outcome = report.outcome
        _record(report.nodeid, outcome, _message(report) if report.failed or report.skipped else "")
    elif report.when == "teardown" and report.failed:
        _record(report.nodeid, "failed", "teardown: " + _message(report))


def pytest_sessionfinish(session, exitstatus):
    """Kill the clients a failed test left running (test_rpc_tracker_request's `while True`
    processes are ended by the test only when it gets that far); multiprocessing would otherwise
    wait for them forever when pytest exits."""
    del session, exitstatus
    import multiprocessing  # pylint: disable=import-outside-toplevel

    for child in multiprocessing.active_children():
        child.kill()
        child.join(timeout=5)

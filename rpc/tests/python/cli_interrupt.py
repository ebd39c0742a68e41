"""`mote rpc serve` as a user runs it, with a model that never returns (docs/rpc.md "Timeouts").

    python cli_interrupt.py MOTE_BIN ENDLESS_TAR ZOO_DIR

ENDLESS_TAR is `craft::endless_loop()` (`cargo run -p mote-rpc --example endless_model`);
ZOO_DIR an offload zoo with code-free models. The server runs `--code-free` (crafted models are
code-free `.tar` files) with an instruction budget that never ends a call, so only an interrupt
can. Checked, each within a time bound:

1. a session_timeout=2 call of the endless `main()` raises RPCSessionTimeoutError within 10 s, the
   server process is still alive, and a new session runs a code-free zoo model matching TVM
   (endless.py timeout);
2. SIGINT while a session runs the endless `main()`: the server exits 0 within 10 s and the
   client's call fails (endless.py stop).

Prints "cli interrupt: ok"; exits 1 on any failure.
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

MOTE, ENDLESS, ZOO = sys.argv[1:4]
HERE = os.path.dirname(os.path.abspath(__file__))
ENV = dict(os.environ, PYTHONPATH=HERE, PYTHONUNBUFFERED="1")


def start_server(log):
    proc = subprocess.Popen(
        [MOTE, "rpc", "serve", "--port", "0", "--code-free", "--max-instructions", str(2**64 - 1)],
        stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.time() + 30
    while time.time() < deadline:
        with open(log.name) as f:
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", f.read())
        if m:
            return proc, int(m.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    sys.exit(f"mote rpc serve did not start:\n{open(log.name).read()}")


def client(port, mode):
    return [sys.executable, os.path.join(HERE, "endless.py"), "127.0.0.1", str(port), ZOO, mode,
            ENDLESS, "first-code-free"]


def main():
    with tempfile.NamedTemporaryFile("w+", suffix=".log") as log:
        proc, port = start_server(log)
        try:
            # 1. The session's timeout interrupts the call; the server serves on.
            r = subprocess.run(client(port, "timeout"), env=ENV, capture_output=True, text=True,
                               timeout=60)
            assert r.returncode == 0, f"timeout client failed:\n{r.stdout}\n{r.stderr}"
            print(r.stdout.strip())
            assert proc.poll() is None, "the server exited after the timeout"
            # 2. SIGINT while a call runs: the server stops promptly and cleanly.
            c = subprocess.Popen(client(port, "stop"), env=ENV, stdout=subprocess.PIPE, text=True)
            line = c.stdout.readline()
            assert "calling" in line, line
            time.sleep(1)
            assert proc.poll() is None, "the server exited early"
            start = time.time()
            proc.send_signal(signal.SIGINT)
            try:
                rc = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                sys.exit("the server still runs 10 s after SIGINT: the call was not interrupted")
            took = time.time() - start
            assert rc == 0, f"the server exited with {rc}"
            rest = c.communicate(timeout=20)[0]
            assert c.returncode == 0 and "endless stop: ok" in rest, rest
            print(rest.strip())
            print(f"server stopped in {took:.1f}s with status 0")
        finally:
            if proc.poll() is None:
                proc.kill()
        assert "session ended: Timeout" in open(log.name).read(), open(log.name).read()
    print("cli interrupt: ok")


if __name__ == "__main__":
    main()

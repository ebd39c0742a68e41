"""Connects, says so, waits for a line on stdin (the server is stopped meanwhile), then checks
that the session is gone."""
import sys

from rpc_common import connect

remote = connect()
remote.upload(bytearray(b"x"), "x.bin")
print("connected", flush=True)
sys.stdin.readline()
try:
    remote.download("x.bin")
    raise SystemExit("the session survived stop()")
except Exception as e:
    print(f"stop_client: ok ({type(e).__name__})")

"""Oracle for rpc/tests/modes.rs: answers one JSON line per command line on stdin, using TVM's
own Python tracker client (tvm.rpc.connect_tracker) and tvm.rpc.base framing.

Commands:
  summary HOST PORT       -> TrackerSession.summary() (a fresh tracker connection each time)
  request HOST PORT KEY   -> the raw REQUEST reply [0, [host, port, matchkey]]
Errors come back as {"error": "..."}; the helper keeps running.
"""

import json
import socket
import struct
import sys

import tvm.rpc
from tvm.rpc import base


def request(host, port, key):
    sock = socket.create_connection((host, port), timeout=10)
    try:
        sock.sendall(struct.pack("<i", base.RPC_TRACKER_MAGIC))
        magic = struct.unpack("<i", base.recvall(sock, 4))[0]
        if magic != base.RPC_TRACKER_MAGIC:
            raise RuntimeError("not a tracker")
        base.sendjson(sock, [base.TrackerCode.REQUEST, key, "", 1])
        return base.recvjson(sock)
    finally:
        sock.close()


def main():
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        try:
            if words[0] == "summary":
                session = tvm.rpc.connect_tracker(words[1], int(words[2]))
                out = session.summary()
                session.close()
            elif words[0] == "request":
                out = request(words[1], int(words[2]), words[3])
            else:
                out = {"error": "unknown command " + words[0]}
        except Exception as err:  # pylint: disable=broad-except
            out = {"error": repr(err)}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    print(json.dumps({"ready": True}), flush=True)
    main()

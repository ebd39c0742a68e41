"""Oracle for rpc/tests/modes.rs: answers one JSON line per command line on stdin, using TVM's
own Python tracker client (tvm.rpc.connect_tracker) and tvm.rpc.base framing.

Commands:
  summary HOST PORT       -> TrackerSession.summary() (a fresh tracker connection each time)
  request HOST PORT KEY   -> the raw REQUEST reply [0, [host, port, matchkey]]
  via_tracker HOST PORT KEY -> REQUEST, then the client handshake with the server it names
                            ({"code": reply - RPC_MAGIC, "server_key", "echo", "matchkey"})
  handshake HOST PORT CLIENTKEY... -> the client handshake alone
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


def handshake(host, port, key, payload):
    """The client side of the RPC handshake (tvm.rpc.base framing); on success sends payload
    and reads as many bytes back."""
    sock = socket.create_connection((host, port), timeout=10)
    try:
        sock.sendall(struct.pack("<i", base.RPC_MAGIC))
        sock.sendall(struct.pack("<i", len(key)))
        sock.sendall(key.encode("utf-8"))
        code = struct.unpack("<i", base.recvall(sock, 4))[0]
        out = {"code": code - base.RPC_MAGIC}
        if code == base.RPC_CODE_SUCCESS:
            keylen = struct.unpack("<i", base.recvall(sock, 4))[0]
            out["server_key"] = base.recvall(sock, keylen).decode("utf-8")
            sock.sendall(payload.encode("utf-8"))
            out["echo"] = base.recvall(sock, len(payload)).decode("utf-8")
        return out
    finally:
        sock.close()


def via_tracker(host, port, key):
    """What tvm.rpc.TrackerSession.request does before the session: REQUEST, then connect
    to the server it names with "client:<matchkey> -timeout=30"."""
    reply = request(host, port, key)
    _, (srv_host, srv_port, matchkey) = reply
    out = handshake(srv_host, srv_port, f"client:{matchkey} -timeout=30", "ping")
    out["matchkey"] = matchkey
    return out


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
            elif words[0] == "via_tracker":
                out = via_tracker(words[1], int(words[2]), words[3])
            elif words[0] == "handshake":
                out = handshake(words[1], int(words[2]), " ".join(words[3:]), "ping")
            else:
                out = {"error": "unknown command " + words[0]}
        except Exception as err:  # pylint: disable=broad-except
            out = {"error": repr(err)}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    print(json.dumps({"ready": True}), flush=True)
    main()

"""-timeout: a session_timeout=2 client whose call runs longer gets RPCSessionTimeoutError."""
from rpc_common import connect, expect_session_timeout

took = expect_session_timeout(connect(session_timeout=2))
print(f"timeout: ok (RPCSessionTimeoutError after {took:.1f}s)")

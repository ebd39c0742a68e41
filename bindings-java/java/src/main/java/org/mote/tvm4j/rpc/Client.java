package org.mote.tvm4j.rpc;

import org.mote.rpc.RemoteSession;

/**
 * tvm4j's RPC client: opens a session with a TVM RPC server (Mote's {@link Server} or
 * {@link org.mote.rpc.Server}, TVM's own, or either behind a TVM RPC proxy), through Mote's
 * {@link RemoteSession}.
 */
public class Client {
    /** For source compatibility; every method is static. */
    public Client() {}

    /**
     * Connects to the RPC server (or proxy) at {@code url:port}.
     *
     * @param url the server's host name or IP address
     * @param port the server's port
     * @param key the key the server must match (through a proxy, the key of the server to
     *     reach)
     * @return the session
     * @throws org.mote.rpc.RpcConnectionException when no session could be opened
     * @throws org.mote.UnsupportedException when the native library has no RPC client (see
     *     {@link org.mote.tvm4j.Module#enabled}{@code ("rpc")})
     */
    public static RPCSession connect(String url, int port, String key) {
        return new RPCSession(RemoteSession.connect(url, port, key));
    }

    /**
     * Connects to the RPC server at {@code url:port}, with no key.
     *
     * @param url the server's host name or IP address
     * @param port the server's port
     * @return the session
     * @throws org.mote.rpc.RpcConnectionException when no session could be opened
     * @throws org.mote.UnsupportedException when the native library has no RPC client
     */
    public static RPCSession connect(String url, int port) {
        return connect(url, port, "");
    }
}

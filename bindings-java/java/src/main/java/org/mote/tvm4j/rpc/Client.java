package org.mote.tvm4j.rpc;

/**
 * tvm4j's RPC client. Mote has no Java RPC client yet: both {@code connect} methods throw
 * {@link UnsupportedOperationException}. (TVM's Python client works against
 * {@link Server}.)
 */
public class Client {
    /** For source compatibility; every method is static. */
    public Client() {}

    /**
     * Connects to an RPC server: not in Mote.
     *
     * @param url the server's host
     * @param port the server's port
     * @param key the key to match
     * @return never
     * @throws UnsupportedOperationException always
     */
    public static RPCSession connect(String url, int port, String key) {
        throw new UnsupportedOperationException("Mote has no Java RPC client yet (cannot connect to " + url + ":"
                + port + "); Mote's RPC server (org.mote.tvm4j.rpc.Server) serves TVM's Python client");
    }

    /**
     * Connects to an RPC server: not in Mote.
     *
     * @param url the server's host
     * @param port the server's port
     * @return never
     * @throws UnsupportedOperationException always
     */
    public static RPCSession connect(String url, int port) {
        return connect(url, port, "");
    }
}

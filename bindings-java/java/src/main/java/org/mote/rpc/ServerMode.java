package org.mote.rpc;

/** How clients reach a {@link Server} (docs/rpc.md "Three ways to serve"). */
public enum ServerMode {
    /** The server listens; clients connect to it with {@code rpc.connect(host, port, key=...)}. */
    LISTEN,
    /**
     * The server listens and offers each free session place to a TVM tracker under its key;
     * clients ask the tracker ({@code rpc.connect_tracker(...).request(key)}).
     */
    TRACKER,
    /**
     * Nothing listens: the server connects out to a TVM proxy and waits there; the proxy joins
     * it to a client asking for the same key. For devices clients cannot reach.
     */
    PROXY
}

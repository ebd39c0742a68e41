package org.mote.tvm4j.rpc;

import org.mote.rpc.Server;

/**
 * tvm4j's processor for a server that waits at a TVM RPC proxy: {@link #run()} registers at
 * {@code host:port} under {@code key} (the proxy's clients ask for that key), serves the first
 * client the proxy pairs with it, and returns when that session ends.
 */
public class ConnectProxyServerProcessor implements ServerProcessor {
    private final String host;
    private final int port;
    private final String key;
    private volatile Runnable callback;
    private final OneSession session;

    /**
     * A processor for the proxy at {@code host:port}, under {@code key}.
     *
     * @param host the proxy's host
     * @param port the proxy's server port
     * @param key the key clients ask the proxy for
     */
    public ConnectProxyServerProcessor(String host, int port, String key) {
        this.host = host;
        this.port = port;
        this.key = key;
        this.session = new OneSession(
                () -> Server.builder().throughProxy(this.host + ":" + this.port).key(this.key)
                        .serveRegisteredFunctions(true)
                        .maxSessions(1).start(),
                () -> {
                    Runnable c = callback;
                    if (c != null) {
                        c.run();
                    }
                });
    }

    /**
     * Sets what runs once a client's session starts (tvm4j's apps start their watchdog there).
     *
     * @param callback called on the thread running {@link #run()}
     */
    public void setStartTimeCallback(Runnable callback) {
        this.callback = callback;
    }

    @Override
    public void run() {
        session.run();
    }

    @Override
    public void terminate() {
        session.terminate();
    }
}

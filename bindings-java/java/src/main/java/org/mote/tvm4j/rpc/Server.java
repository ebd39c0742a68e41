package org.mote.tvm4j.rpc;

import java.io.IOException;

/**
 * tvm4j's RPC server, run by Mote's ({@link org.mote.rpc.Server}): TVM's Python client
 * ({@code tvm.rpc.connect}) uploads, loads and runs modules on this machine through it.
 *
 * <p>Two kinds, as in tvm4j: {@link #Server(int)} listens on a port of every interface (the
 * port is taken, and served, from the constructor on: a port in use is an {@link IOException}
 * there); {@link #Server(String, int, String)} waits at a TVM RPC proxy under a key, from
 * {@link #start()} on. {@link #terminate()} stops either (waiting for running sessions).
 *
 * <p>As tvm4j's server, it serves the functions registered in this process
 * ({@link org.mote.tvm4j.Function#register}) to its clients besides the server's own
 * ({@link org.mote.rpc.Server.Builder#serveRegisteredFunctions}): a client's
 * {@code getFunction("my.func")} finds them, and they run in this process, with its rights.
 * For Mote's other settings (allowed peers, tracker mode, sandbox, state) use
 * {@link org.mote.rpc.Server} itself.
 */
public class Server {
    private final org.mote.rpc.Server.Builder builder;
    private org.mote.rpc.Server running;
    private boolean terminated;

    /**
     * A server listening on {@code serverPort} of every interface ({@code 0.0.0.0}).
     *
     * @param serverPort the port
     * @throws IOException when the port cannot be bound
     */
    public Server(int serverPort) throws IOException {
        builder = org.mote.rpc.Server.builder().host("0.0.0.0").port(serverPort)
                .serveRegisteredFunctions(true);
        try {
            running = builder.start();
        } catch (org.mote.MoteIoException e) {
            throw new IOException("cannot serve on port " + serverPort + ": " + e.getMessage(), e);
        }
    }

    /**
     * A server that waits at a TVM RPC proxy for clients asking for {@code key}.
     *
     * @param proxyHost the proxy's host
     * @param proxyPort the proxy's server port
     * @param key the key clients ask the proxy for
     */
    public Server(String proxyHost, int proxyPort, String key) {
        builder = org.mote.rpc.Server.builder().throughProxy(proxyHost + ":" + proxyPort).key(key)
                .serveRegisteredFunctions(true);
    }

    /**
     * Starts serving (a listening server already serves; then this does nothing). A proxy
     * that cannot be reached is not an error: the server keeps trying.
     *
     * @throws IllegalStateException after {@link #terminate()}
     */
    public synchronized void start() {
        if (terminated) {
            throw new IllegalStateException("the server was terminated");
        }
        if (running == null) {
            running = builder.start();
        }
    }

    /** Stops the server, waiting for the running sessions; later calls do nothing. */
    public void terminate() {
        org.mote.rpc.Server s;
        synchronized (this) {
            terminated = true;
            s = running;
        }
        if (s != null) {
            s.stop();
        }
    }

    /**
     * Mote's server behind this one (null for a proxy server not yet started).
     *
     * @return the server
     */
    public synchronized org.mote.rpc.Server moteServer() {
        return running;
    }
}

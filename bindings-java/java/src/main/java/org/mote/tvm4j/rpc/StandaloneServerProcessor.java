package org.mote.tvm4j.rpc;

import java.io.IOException;
import org.mote.MoteIoException;
import org.mote.rpc.Server;

/**
 * tvm4j's processor for a server that listens on a port of every interface: the port is bound
 * in the constructor (a port in use is an {@link IOException} there), and {@link #run()} serves
 * the first client that connects, then stops listening. Unlike tvm4j's, which only accepts
 * inside {@link #run()}, Mote's server starts serving as soon as the port is bound: a client
 * that connects before {@link #run()} is served at once, and {@link #run()} then returns when
 * that session ends.
 */
public class StandaloneServerProcessor implements ServerProcessor {
    private final Server server;
    private final OneSession session;

    /**
     * Binds {@code serverPort} ({@code 0.0.0.0}).
     *
     * @param serverPort the port
     * @throws IOException when the port cannot be bound
     */
    public StandaloneServerProcessor(int serverPort) throws IOException {
        try {
            server = Server.builder().host("0.0.0.0").port(serverPort).maxSessions(1)
                    .serveRegisteredFunctions(true).start();
        } catch (MoteIoException e) {
            throw new IOException("cannot serve on port " + serverPort + ": " + e.getMessage(), e);
        }
        Server s = server;
        session = new OneSession(() -> s, () -> {});
        session.serving();
    }

    @Override
    public void run() {
        session.run();
    }

    @Override
    public void terminate() {
        session.terminate();
    }

    /**
     * Mote's server behind this processor.
     *
     * @return the server
     */
    public Server moteServer() {
        return server;
    }
}

package org.mote.tvm4j.rpc;

import java.io.IOException;
import java.util.List;
import org.mote.MoteIoException;
import org.mote.rpc.Server;

/**
 * tvm4j's processor for a server registered with a TVM RPC tracker: the constructor binds the
 * first free port from 5001 to {@link #MAX_SERVER_PORT}; {@link #run()} registers with the
 * tracker under {@code key}, serves the first client the tracker sends, starts the watchdog's
 * timeout ({@link #HARD_TIMEOUT_DEFAULT} seconds) when that session starts, and returns when it
 * ends. The match key clients present is the one Mote's server offers the tracker
 * ({@link #getMatchKey()}).
 */
public class ConnectTrackerServerProcessor implements ServerProcessor {
    /** The last port tried. */
    public static final int MAX_SERVER_PORT = 5555;
    /** Milliseconds tvm4j waits for the tracker. */
    public static final int TRACKER_TIMEOUT = 6000;
    /** Milliseconds between attempts to reach the tracker. */
    public static final int RETRY_PERIOD = TRACKER_TIMEOUT;
    /** Milliseconds after which tvm4j registers again when no client came. */
    public static final int STALE_TRACKER_TIMEOUT = 300000;
    /** Seconds a session may run before the watchdog ends it. */
    public static final int HARD_TIMEOUT_DEFAULT = 300;

    private static final int FIRST_PORT = 5001;

    private final String trackerHost;
    private final int trackerPort;
    private final String key;
    private final RPCWatchdog watchdog;
    private final int port;
    private final OneSession session;

    /**
     * A processor for the tracker at {@code trackerHost:trackerPort}.
     *
     * @param trackerHost the tracker's host
     * @param trackerPort the tracker's port
     * @param key the device key clients ask the tracker for
     * @param watchdog started when the session starts (may be null)
     * @throws IOException when no port from 5001 to {@link #MAX_SERVER_PORT} is free
     */
    public ConnectTrackerServerProcessor(
            String trackerHost, int trackerPort, String key, RPCWatchdog watchdog)
            throws IOException {
        int p = FIRST_PORT;
        while (!free(p)) {
            if (++p > MAX_SERVER_PORT) {
                throw new IOException("no free port from " + FIRST_PORT + " to " + MAX_SERVER_PORT);
            }
        }
        this.port = p;
        this.trackerHost = trackerHost;
        this.trackerPort = trackerPort;
        this.key = key;
        this.watchdog = watchdog;
        this.session = new OneSession(this::start, this::sessionStarted);
    }

    private static boolean free(int port) {
        try (java.net.ServerSocket probe = new java.net.ServerSocket(port)) {
            return probe.getLocalPort() == port;
        } catch (IOException e) {
            return false;
        }
    }

    /**
     * The key a client presents to reach this server (what the tracker hands out), once
     * {@link #run()} has registered; null before.
     *
     * @return the match key, or null
     */
    public String getMatchKey() {
        Server s = session.started();
        if (s == null) {
            return null;
        }
        List<String> offers = s.state().trackerOffers();
        return offers.isEmpty() ? null : offers.get(0);
    }

    /**
     * The port the server listens on.
     *
     * @return the port
     */
    public int port() {
        return port;
    }

    private Server start() {
        try {
            return Server.builder().host("0.0.0.0").port(port).key(key).maxSessions(1)
                    .serveRegisteredFunctions(true)
                    .tracker(trackerHost + ":" + trackerPort).start();
        } catch (MoteIoException e) {
            throw new IllegalStateException("cannot serve on port " + port + ": "
                    + e.getMessage(), e);
        }
    }

    private void sessionStarted() {
        if (watchdog != null) {
            watchdog.startTimeout(HARD_TIMEOUT_DEFAULT * 1000);
        }
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

package org.mote.tvm4j.rpc;

import org.mote.rpc.Server;
import org.mote.rpc.ServerState;

/**
 * What the three processors do, each through one of these: Mote's server, started once (by
 * {@code start}), stopped when its first session has ended (its {@link ServerState#served()}
 * count reached one with none active) or at {@link #terminate()}; {@code onStart} runs once
 * when that session starts.
 */
final class OneSession {
    /** How often {@link #run()} looks at the server's state. */
    private static final long POLL_MS = 20;

    private final java.util.function.Supplier<Server> start;
    private final Runnable onStart;
    private Server server;
    private boolean terminated;
    private boolean sessionStarted;

    OneSession(java.util.function.Supplier<Server> start, Runnable onStart) {
        this.start = start;
        this.onStart = onStart;
    }

    /** The server, started now if it was not; null once terminated. */
    final synchronized Server serving() {
        if (terminated) {
            return null;
        }
        if (server == null) {
            server = start.get();
        }
        return server;
    }

    /** The server if it was started, else null. */
    final synchronized Server started() {
        return server;
    }

    void run() {
        Server s = serving();
        if (s == null) {
            return;
        }
        try {
            while (!s.isStopped()) {
                ServerState st = s.state();
                if (st.active() > 0 || st.served() > 0) {
                    boolean first;
                    synchronized (this) {
                        first = !sessionStarted;
                        sessionStarted = true;
                    }
                    if (first) {
                        onStart.run();
                    }
                }
                if (st.served() >= 1 && st.active() == 0) {
                    break;
                }
                Thread.sleep(POLL_MS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            s.stop();
        }
    }

    void terminate() {
        Server s;
        synchronized (this) {
            terminated = true;
            s = server;
        }
        if (s != null) {
            s.stop();
        }
    }
}

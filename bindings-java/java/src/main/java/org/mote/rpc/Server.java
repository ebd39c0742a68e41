package org.mote.rpc;

import java.io.File;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.mote.UnsupportedException;

/**
 * Mote's RPC server, which TVM's own Python client drives ({@code tvm.rpc.connect},
 * {@code remote.upload}, {@code load_module}, {@code relax.VirtualMachine},
 * {@code time_evaluator}): the native server of the Rust crate {@code mote-rpc} (see
 * docs/rpc.md), started from Java. One thread and one sandbox folder per session.
 *
 * <pre>{@code
 * try (Server server = Server.builder().port(9090).key("phone").start()) {
 *     server.addStateListener(s -> System.out.println(s));   // on the state thread
 *     ...                                                    // clients connect
 * }                                                          // close() stops and waits
 * }</pre>
 *
 * <p>Three modes ({@link ServerMode}): listen (the default), {@link Builder#tracker(String)
 * tracker} and {@link Builder#throughProxy(String) proxy}.
 *
 * <p><b>Threads.</b> Every method may be called from any thread. Sessions run on native
 * threads of their own; {@link StateListener}s are called on the server's state thread (see
 * there). <b>Lifetime.</b> A started server runs until {@link #stop()} or {@link #close()},
 * like a thread: dropping every reference to it does not stop it.
 */
public final class Server implements AutoCloseable {
    private static final Logger LOG = Logger.getLogger("org.mote.rpc");

    /** The message when libmote_java has no RPC entries (built without mote-java's rpc feature). */
    static final String WITHOUT_RPC = "this libmote_java has no RPC server: it was built without"
            + " mote-java's rpc feature (the inference library). On Android depend on"
            + " org.mote:mote-android-rpc instead of org.mote:mote-android; elsewhere build it with"
            + " cargo build -p mote-java --features rpc";

    /** Running servers, so that an unreferenced server keeps running (see the class docs). */
    private static final Set<Server> RUNNING = ConcurrentHashMap.newKeySet();

    private final ServerMode mode;
    private final long pollMillis;
    /** Read-locked around every native call using {@link #handle}, write-locked to free it. */
    private final ReentrantReadWriteLock handleLock = new ReentrantReadWriteLock();
    private long handle;
    /** Serialises {@link #stop()}. */
    private final Object stopLock = new Object();
    /** The state once stopped; set (under stopLock) before the handle is freed. */
    private volatile ServerState finalState;
    private final InetSocketAddress address;

    /** Guards {@link #listeners} and {@link #poller}; the state thread waits on it. */
    private final Object listenerLock = new Object();
    private final List<Registration> listeners = new ArrayList<>();
    private Thread poller;

    /** One registration of a listener and the last state it received. */
    private static final class Registration {
        final StateListener listener;
        ServerState seen;

        Registration(StateListener listener) {
            this.listener = listener;
        }
    }

    private Server(long handle, ServerMode mode, long pollMillis) {
        this.handle = handle;
        this.mode = mode;
        this.pollMillis = pollMillis;
        InetSocketAddress a;
        try {
            a = ServerState.read(handle, mode).address().orElse(null);
        } catch (RuntimeException e) {
            RpcBridge.serverFree(handle); // stops it
            throw e;
        }
        this.address = a;
        RUNNING.add(this);
    }

    /**
     * A builder with the defaults: listen mode on 127.0.0.1, any free port, key {@code ""},
     * every peer that can reach the socket, 4 sessions at once, a temporary sandbox folder
     * (removed at stop), the runtime's default threads per session, no idle timeout.
     *
     * @return a new builder
     */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Whether OpenCL is usable in this process, as one line for a status text: the same as
     * {@link org.mote.Mote#openclStatus()}, {@code "OpenCL: 0: <device name> (<OpenCL
     * version>), 1: ..."} or {@code "OpenCL: none (<reason>)"}. Unlike the server, it works
     * with a library built without the RPC server too.
     *
     * @return the line
     */
    public static String openclStatus() {
        return org.mote.Mote.openclStatus();
    }

    /**
     * The mode the server runs in.
     *
     * @return listen, tracker or proxy
     */
    public ServerMode mode() {
        return mode;
    }

    /**
     * The port the server listens on (the actual one when port 0 was asked). It stays the same
     * after stop, when nothing listens there any more.
     *
     * @return the port; empty in proxy mode, where nothing listens
     */
    public OptionalInt port() {
        return address == null ? OptionalInt.empty() : OptionalInt.of(address.getPort());
    }

    /**
     * The address the server listens on (see {@link #port()}).
     *
     * @return the address; empty in proxy mode
     */
    public Optional<InetSocketAddress> address() {
        return Optional.ofNullable(address);
    }

    /**
     * The server's state now. Cheap (a few atomic reads); after {@link #stop()} always the
     * same stopped state.
     *
     * @return an immutable snapshot
     */
    public ServerState state() {
        ServerState f = finalState;
        if (f != null) {
            return f;
        }
        handleLock.readLock().lock();
        try {
            if (handle == 0) {
                return finalState; // set before the handle was freed
            }
            return ServerState.read(handle, mode);
        } finally {
            handleLock.readLock().unlock();
        }
    }

    /**
     * Whether {@link #stop()} has completed.
     *
     * @return true once stopped
     */
    public boolean isStopped() {
        return finalState != null;
    }

    /**
     * Registers a listener of state changes. It first receives the current state, then every
     * state that differs from the last one it received, until the stopped state, all on the
     * state thread (see {@link StateListener}). The state is looked at every poll interval
     * ({@link Builder#statePollInterval}, 100 ms by default), so changes that undo each other
     * within one interval are not seen. Registering the same listener twice registers it twice.
     * Registering after stop delivers the stopped state once.
     *
     * @param listener the listener
     * @throws NullPointerException when {@code listener} is null
     */
    public void addStateListener(StateListener listener) {
        Objects.requireNonNull(listener, "listener");
        synchronized (listenerLock) {
            listeners.add(new Registration(listener));
            if (poller == null) {
                poller = new Thread(this::pollStates, "mote-rpc-state");
                poller.setDaemon(true);
                poller.start();
            } else {
                listenerLock.notifyAll();
            }
        }
    }

    /**
     * Removes one registration of a listener (the earliest). Once this returns the listener
     * is not called again, except for a call already running on the state thread when this
     * is called from another thread.
     *
     * @param listener the listener
     * @return whether it was registered
     */
    public boolean removeStateListener(StateListener listener) {
        synchronized (listenerLock) {
            for (int i = 0; i < listeners.size(); i++) {
                if (listeners.get(i).listener.equals(listener)) {
                    listeners.remove(i);
                    listenerLock.notifyAll();
                    return true;
                }
            }
            return false;
        }
    }

    /** The state thread: delivers states to the registered listeners, see addStateListener. */
    private void pollStates() {
        while (true) {
            ServerState s;
            try {
                s = state();
            } catch (RuntimeException e) {
                LOG.log(Level.SEVERE, "cannot read the RPC server's state; listeners stop", e);
                synchronized (listenerLock) {
                    poller = null;
                }
                return;
            }
            List<Registration> due = new ArrayList<>();
            synchronized (listenerLock) {
                if (listeners.isEmpty()) {
                    poller = null;
                    return;
                }
                for (Registration r : listeners) {
                    if (!s.equals(r.seen)) {
                        due.add(r);
                    }
                }
            }
            for (Registration r : due) {
                synchronized (listenerLock) {
                    if (!listeners.contains(r)) {
                        continue; // removed meanwhile
                    }
                    r.seen = s;
                }
                try {
                    r.listener.onStateChanged(s);
                } catch (RuntimeException e) {
                    LOG.log(Level.WARNING, "an RPC server state listener threw", e);
                }
            }
            synchronized (listenerLock) {
                boolean allSeen = true;
                for (Registration r : listeners) {
                    allSeen &= s.equals(r.seen);
                }
                if (s.stopped() && allSeen) {
                    // Every listener has the final state; a later registration starts a new
                    // state thread, which delivers it once.
                    poller = null;
                    return;
                }
                if (allSeen) {
                    try {
                        listenerLock.wait(pollMillis);
                    } catch (InterruptedException e) {
                        poller = null;
                        Thread.currentThread().interrupt();
                        return;
                    }
                }
            }
        }
    }

    /**
     * Stops the server and waits until it has stopped: no new sessions start, running ones end
     * (a call in progress finishes first), the server leaves the tracker or the proxy, the
     * sandbox folders are removed, and the listening socket is closed. Then the state
     * listeners receive the stopped state; when called from another thread than the state
     * thread, this also waits until they have. A second call (from any thread) waits for the
     * first one and then does nothing.
     */
    public void stop() {
        synchronized (stopLock) {
            if (finalState == null) {
                ServerState last;
                handleLock.readLock().lock();
                try {
                    RpcBridge.serverStop(handle);
                    last = ServerState.read(handle, mode);
                } finally {
                    handleLock.readLock().unlock();
                }
                finalState = last;
                handleLock.writeLock().lock();
                try {
                    RpcBridge.serverFree(handle);
                    handle = 0;
                } finally {
                    handleLock.writeLock().unlock();
                }
                RUNNING.remove(this);
            }
        }
        Thread t;
        synchronized (listenerLock) {
            t = poller;
            listenerLock.notifyAll();
        }
        if (t != null && t != Thread.currentThread()) {
            boolean interrupted = false;
            while (true) {
                try {
                    t.join();
                    break;
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** The same as {@link #stop()}. */
    @Override
    public void close() {
        stop();
    }

    @Override
    public String toString() {
        return "Server{" + state() + "}";
    }

    /**
     * The settings of a server to start. A builder is not thread-safe; each {@link #start()}
     * starts a new server with the settings as they are then.
     */
    public static final class Builder {
        private String host = "127.0.0.1";
        private int port = 0;
        private String key = "";
        private final List<String> allow = new ArrayList<>();
        /** 0: Mote's default (4, and 1 in tracker mode). */
        private int maxSessions = 0;
        private String sandbox;
        private ServerMode mode = ServerMode.LISTEN;
        private String modeAddress;
        private String customAddress;
        private int sessionThreads = 0;
        private long idleTimeoutMs = 0;
        private long pollIntervalMs = 100;
        private boolean serveRegistered;

        private Builder() {}

        /**
         * The address to listen on (listen and tracker modes). The default, 127.0.0.1, only
         * serves clients on this machine; use {@code "0.0.0.0"} and {@link #allow} for others.
         *
         * @param host an IP address or host name of this machine
         * @return this builder
         */
        public Builder host(String host) {
            this.host = Objects.requireNonNull(host, "host");
            return this;
        }

        /**
         * The port to listen on; 0 (the default) takes any free port, which {@link
         * Server#port()} then tells.
         *
         * @param port 0 to 65535
         * @return this builder
         * @throws IllegalArgumentException when out of range
         */
        public Builder port(int port) {
            if (port < 0 || port > 65535) {
                throw new IllegalArgumentException("port " + port + " is not 0..65535");
            }
            this.port = port;
            return this;
        }

        /**
         * The key: in listen mode, clients must present it ({@code rpc.connect(host, port,
         * key=...)}); in tracker and proxy modes, the key clients request. It is a name, not a
         * secret (docs/rpc.md "Threat model").
         *
         * @param key the key (default empty)
         * @return this builder
         */
        public Builder key(String key) {
            this.key = Objects.requireNonNull(key, "key");
            return this;
        }

        /**
         * Adds peer addresses that may connect; once any is given, connections from other
         * addresses are refused (counted in {@link ServerState#refused()}).
         *
         * @param addresses IP addresses
         * @return this builder
         */
        public Builder allow(InetAddress... addresses) {
            for (InetAddress a : addresses) {
                String ip = Objects.requireNonNull(a, "address").getHostAddress();
                int zone = ip.indexOf('%'); // an IPv6 scope: peers are matched by address only
                allow.add(zone < 0 ? ip : ip.substring(0, zone));
            }
            return this;
        }

        /**
         * Adds peer addresses that may connect, as IP literals ({@code "192.168.1.20"}).
         *
         * @param addresses IP literals
         * @return this builder
         * @throws IllegalArgumentException at {@link #start()} when one is not an IP literal
         */
        public Builder allow(String... addresses) {
            for (String a : addresses) {
                allow.add(Objects.requireNonNull(a, "address"));
            }
            return this;
        }

        /**
         * Sessions served at once (default 4, and 1 in tracker mode, where it is also the number
         * of places offered to the tracker: TVM's server offers one, and a tuning tool timing two
         * uploads at once on one device would get wrong numbers); more connections are refused.
         *
         * @param n at least 1
         * @return this builder
         * @throws IllegalArgumentException when {@code n < 1}
         */
        public Builder maxSessions(int n) {
            if (n < 1) {
                throw new IllegalArgumentException("maxSessions " + n + " is not at least 1");
            }
            this.maxSessions = n;
            return this;
        }

        /**
         * The folder under which each session gets a sandbox folder of its own for uploaded
         * files (created if missing, kept at stop). Default: a new temporary folder, removed
         * at stop.
         *
         * @param dir the folder
         * @return this builder
         */
        public Builder sandbox(File dir) {
            this.sandbox = Objects.requireNonNull(dir, "dir").getPath();
            return this;
        }

        /**
         * As {@link #sandbox(File)} (Android API 26 and later, which have {@code Path}).
         *
         * @param dir the folder
         * @return this builder
         */
        @Api26
        public Builder sandbox(Path dir) {
            return sandbox(Objects.requireNonNull(dir, "dir").toFile());
        }

        /**
         * Tracker mode: register with the TVM tracker at {@code address}; the tracker hands
         * clients the address it sees this server at.
         *
         * @param address {@code "host:port"} of the tracker
         * @return this builder
         * @throws IllegalArgumentException when not {@code host:port}
         * @throws IllegalStateException when proxy mode was chosen
         */
        public Builder tracker(String address) {
            return tracker(address, null);
        }

        /**
         * Tracker mode, giving clients {@code customAddress} instead of the address the
         * tracker sees this server at (for a server behind a port forward).
         *
         * @param address {@code "host:port"} of the tracker
         * @param customAddress the host clients should connect to, or null
         * @return this builder
         * @throws IllegalArgumentException when {@code address} is not {@code host:port}
         * @throws IllegalStateException when proxy mode was chosen
         */
        public Builder tracker(String address, String customAddress) {
            setMode(ServerMode.TRACKER, address);
            this.customAddress = customAddress;
            return this;
        }

        /**
         * Proxy mode: connect out to the TVM proxy at {@code address} and serve the clients it
         * pairs with this server's key. Nothing listens; host, port and allow are unused.
         *
         * @param address {@code "host:port"} of the proxy
         * @return this builder
         * @throws IllegalArgumentException when not {@code host:port}
         * @throws IllegalStateException when tracker mode was chosen
         */
        public Builder throughProxy(String address) {
            setMode(ServerMode.PROXY, address);
            return this;
        }

        private void setMode(ServerMode m, String address) {
            Objects.requireNonNull(address, "address");
            int colon = address.lastIndexOf(':');
            boolean ok = colon > 0 && colon < address.length() - 1;
            if (ok) {
                try {
                    int p = Integer.parseInt(address.substring(colon + 1));
                    ok = p > 0 && p <= 65535;
                } catch (NumberFormatException e) {
                    ok = false;
                }
            }
            if (!ok) {
                throw new IllegalArgumentException(address + " is not host:port");
            }
            if (mode != ServerMode.LISTEN && mode != m) {
                throw new IllegalStateException("tracker and proxy modes exclude each other");
            }
            this.mode = m;
            this.modeAddress = address;
        }

        /**
         * Threads of each session's runtime (default: the runtime's default).
         *
         * @param n at least 1
         * @return this builder
         * @throws IllegalArgumentException when {@code n < 1}
         */
        public Builder sessionThreads(int n) {
            if (n < 1) {
                throw new IllegalArgumentException("sessionThreads " + n + " is not at least 1");
            }
            this.sessionThreads = n;
            return this;
        }

        /**
         * End sessions idle this long (default zero: never). A client's own
         * {@code session_timeout} also applies. A positive timeout under one millisecond is
         * one millisecond.
         *
         * @param timeout the timeout, or zero for none
         * @param unit its unit
         * @return this builder
         * @throws IllegalArgumentException when negative
         */
        public Builder idleTimeout(long timeout, TimeUnit unit) {
            Objects.requireNonNull(unit, "unit");
            if (timeout < 0) {
                throw new IllegalArgumentException("idleTimeout " + timeout + " " + unit + " is negative");
            }
            long ms = unit.toMillis(timeout);
            this.idleTimeoutMs = timeout > 0 && ms == 0 ? 1 : ms;
            return this;
        }

        /**
         * As {@link #idleTimeout(long, TimeUnit)} (Android API 26 and later, which have
         * {@code Duration}).
         *
         * @param timeout the timeout, at least one millisecond, or zero for none
         * @return this builder
         * @throws IllegalArgumentException when negative
         */
        @Api26
        public Builder idleTimeout(Duration timeout) {
            Objects.requireNonNull(timeout, "timeout");
            if (timeout.isNegative()) {
                throw new IllegalArgumentException("idleTimeout " + timeout + " is negative");
            }
            long ms = timeout.toMillis();
            this.idleTimeoutMs = !timeout.isZero() && ms == 0 ? 1 : ms;
            return this;
        }

        /**
         * Whether clients may look up and call the functions registered in this process
         * ({@link org.mote.Function#register}, {@code org.mote.tvm4j.Function.register}, or
         * native code's {@code mote::register_function}) besides the server's own, as TVM's
         * server serves its process's global functions: a client's
         * {@code get_function("my.func")} then finds the function registered under that name
         * ({@link RemoteSession#getFunction} too). Default false: only the server's own
         * functions exist for clients. A registered function runs on the session's thread with
         * this process's rights, so turn this on only for functions fit for every client that
         * can reach the server (docs/rpc.md "Global functions").
         * {@link org.mote.tvm4j.rpc.Server} always serves them, as tvm4j's does.
         *
         * @param on whether to serve them
         * @return this builder
         */
        public Builder serveRegisteredFunctions(boolean on) {
            this.serveRegistered = on;
            return this;
        }

        /**
         * How often the state thread looks at the state for {@link StateListener}s (default
         * 100 ms).
         *
         * @param interval at least one millisecond
         * @param unit its unit
         * @return this builder
         * @throws IllegalArgumentException when shorter
         */
        public Builder statePollInterval(long interval, TimeUnit unit) {
            Objects.requireNonNull(unit, "unit");
            long ms = unit.toMillis(interval);
            if (ms < 1) {
                throw new IllegalArgumentException("statePollInterval " + interval + " " + unit + " is under 1 ms");
            }
            this.pollIntervalMs = ms;
            return this;
        }

        /**
         * As {@link #statePollInterval(long, TimeUnit)} (Android API 26 and later, which have
         * {@code Duration}).
         *
         * @param interval at least one millisecond
         * @return this builder
         * @throws IllegalArgumentException when shorter
         */
        @Api26
        public Builder statePollInterval(Duration interval) {
            Objects.requireNonNull(interval, "interval");
            if (interval.toMillis() < 1) {
                throw new IllegalArgumentException("statePollInterval " + interval + " is under 1 ms");
            }
            this.pollIntervalMs = interval.toMillis();
            return this;
        }

        /**
         * Starts a server: binds the socket and accepts on a native thread (listen and tracker
         * modes), starts registering with the tracker, or starts connecting to the proxy. A
         * tracker or proxy that cannot be reached is not an error here: the server keeps
         * trying (see {@link ServerState#trackerLastError()}).
         *
         * @return the running server
         * @throws org.mote.MoteIoException when the socket cannot be bound (port in use, no
         *     such address; the message names host and port) or the sandbox folder cannot be
         *     created (the message names it)
         * @throws IllegalArgumentException when an allowed address is not an IP literal
         * @throws UnsupportedException when the native library was built without the RPC
         *     server (mote-java's {@code rpc} feature; the message says which library to use)
         */
        public Server start() {
            long ms = idleTimeoutMs;
            int m;
            switch (mode) {
                case TRACKER:
                    m = RpcBridge.MODE_TRACKER;
                    break;
                case PROXY:
                    m = RpcBridge.MODE_PROXY;
                    break;
                default:
                    m = RpcBridge.MODE_LISTEN;
            }
            // Loaded first, so that a library that cannot load fails as it always does, and an
            // UnsatisfiedLinkError below can only be the missing RPC entries.
            org.mote.Mote.load();
            long h;
            try {
                h = RpcBridge.serverStart(host, port, key, allow.toArray(new String[0]),
                        maxSessions, sandbox, m, modeAddress, customAddress, sessionThreads, ms,
                        serveRegistered);
            } catch (UnsatisfiedLinkError e) {
                UnsupportedException u = new UnsupportedException(WITHOUT_RPC);
                u.initCause(e);
                throw u;
            }
            return new Server(h, mode, Math.max(1, pollIntervalMs));
        }
    }
}

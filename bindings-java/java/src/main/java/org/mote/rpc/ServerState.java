package org.mote.rpc;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * One look at a {@link Server}: immutable, so it may be kept and passed between threads freely.
 * Two snapshots are {@link #equals equal} when every field is.
 *
 * <p>Tracker fields are {@code false}, 0, empty in the other modes, and so are proxy fields
 * outside proxy mode. Once the server has stopped, the counters are those seen when its last
 * session had ended, the tracker is left ({@link #trackerConnected()} false, no offers) and
 * nothing waits at the proxy.
 */
public final class ServerState {
    private final ServerMode mode;
    private final InetSocketAddress address;
    private final int active;
    private final long served;
    private final long refused;
    private final boolean trackerConnected;
    private final long trackerRegistrations;
    private final List<String> trackerOffers;
    private final String trackerLastError;
    private final boolean proxyWaiting;
    private final long proxySessions;
    private final String proxyLastError;
    private final boolean stopped;

    private ServerState(ServerMode mode, long[] n, String[] t) {
        this.mode = mode;
        InetSocketAddress a = null;
        if (t[RpcBridge.T_ADDRESS] != null && n[RpcBridge.S_PORT] >= 0) {
            try {
                // An IP literal: getByName parses it without a name lookup.
                a = new InetSocketAddress(InetAddress.getByName(t[RpcBridge.T_ADDRESS]),
                        (int) n[RpcBridge.S_PORT]);
            } catch (UnknownHostException e) {
                throw new IllegalStateException("mote-rpc reported a bad address "
                        + t[RpcBridge.T_ADDRESS], e);
            }
        }
        this.address = a;
        this.active = (int) Math.min(Integer.MAX_VALUE, n[RpcBridge.S_ACTIVE]);
        this.served = n[RpcBridge.S_SERVED];
        this.refused = n[RpcBridge.S_REFUSED];
        this.trackerConnected = n[RpcBridge.S_TRACKER_CONNECTED] != 0;
        this.trackerRegistrations = n[RpcBridge.S_TRACKER_REGISTRATIONS];
        String offers = t[RpcBridge.T_TRACKER_OFFERS];
        this.trackerOffers = offers == null || offers.isEmpty() ? Collections.emptyList()
                : Collections.unmodifiableList(new ArrayList<>(Arrays.asList(offers.split("\n"))));
        this.trackerLastError = t[RpcBridge.T_TRACKER_ERROR];
        this.proxyWaiting = n[RpcBridge.S_PROXY_WAITING] != 0;
        this.proxySessions = n[RpcBridge.S_PROXY_SESSIONS];
        this.proxyLastError = t[RpcBridge.T_PROXY_ERROR];
        this.stopped = n[RpcBridge.S_STOPPED] != 0;
    }

    /** Reads the state of a live native server handle. */
    static ServerState read(long handle, ServerMode mode) {
        String[] t = new String[RpcBridge.T_LENGTH];
        long[] n = RpcBridge.serverState(handle, t);
        return new ServerState(mode, n, t);
    }

    /**
     * The mode the server was started in.
     *
     * @return listen, tracker or proxy
     */
    public ServerMode mode() {
        return mode;
    }

    /**
     * The listening address, with the actual port when port 0 was asked.
     *
     * @return the address; empty in proxy mode, where nothing listens
     */
    public Optional<InetSocketAddress> address() {
        return Optional.ofNullable(address);
    }

    /**
     * The listening port.
     *
     * @return the port; empty in proxy mode
     */
    public OptionalInt port() {
        return address == null ? OptionalInt.empty() : OptionalInt.of(address.getPort());
    }

    /**
     * Sessions running now (a client's handshake included).
     *
     * @return the number of running sessions
     */
    public int active() {
        return active;
    }

    /**
     * Sessions that have ended since the server started.
     *
     * @return the number of ended sessions
     */
    public long served() {
        return served;
    }

    /**
     * Connections refused since the server started (peer not in the allow-list, or
     * {@code maxSessions} reached).
     *
     * @return the number of refused connections
     */
    public long refused() {
        return refused;
    }

    /**
     * Tracker mode: whether the server is registered with the tracker on a live connection.
     *
     * @return true while registered
     */
    public boolean trackerConnected() {
        return trackerConnected;
    }

    /**
     * Tracker mode: successful registrations so far (each reconnection registers again).
     *
     * @return the number of registrations
     */
    public long trackerRegistrations() {
        return trackerRegistrations;
    }

    /**
     * Tracker mode: the match keys of the session places offered to the tracker now, sorted
     * (a place a client claimed disappears at the tracker client's next poll).
     *
     * @return the offers, unmodifiable
     */
    public List<String> trackerOffers() {
        return trackerOffers;
    }

    /**
     * Tracker mode: why the last connection to the tracker or the last attempt failed.
     *
     * @return the error's text; empty when none happened
     */
    public Optional<String> trackerLastError() {
        return Optional.ofNullable(trackerLastError);
    }

    /**
     * Proxy mode: whether a connection is registered at the proxy and waits for a client.
     *
     * @return true while waiting
     */
    public boolean proxyWaiting() {
        return proxyWaiting;
    }

    /**
     * Proxy mode: sessions the proxy has paired with this server so far.
     *
     * @return the number of paired sessions
     */
    public long proxySessions() {
        return proxySessions;
    }

    /**
     * Proxy mode: why the last attempt to reach the proxy failed.
     *
     * @return the error's text; empty when none happened
     */
    public Optional<String> proxyLastError() {
        return Optional.ofNullable(proxyLastError);
    }

    /**
     * Whether the server has stopped ({@link Server#stop()} returned or is about to).
     *
     * @return true once stopped
     */
    public boolean stopped() {
        return stopped;
    }

    @Override
    public boolean equals(Object o) {
        if (this == o) {
            return true;
        }
        if (!(o instanceof ServerState)) {
            return false;
        }
        ServerState s = (ServerState) o;
        return mode == s.mode && Objects.equals(address, s.address) && active == s.active
                && served == s.served && refused == s.refused
                && trackerConnected == s.trackerConnected
                && trackerRegistrations == s.trackerRegistrations
                && trackerOffers.equals(s.trackerOffers)
                && Objects.equals(trackerLastError, s.trackerLastError)
                && proxyWaiting == s.proxyWaiting && proxySessions == s.proxySessions
                && Objects.equals(proxyLastError, s.proxyLastError) && stopped == s.stopped;
    }

    @Override
    public int hashCode() {
        return Objects.hash(mode, address, active, served, refused, trackerConnected,
                trackerRegistrations, trackerOffers, trackerLastError, proxyWaiting, proxySessions,
                proxyLastError, stopped);
    }

    @Override
    public String toString() {
        StringBuilder b = new StringBuilder("ServerState{").append(mode);
        if (address != null) {
            b.append(' ').append(address.getAddress().getHostAddress()).append(':')
                    .append(address.getPort());
        }
        b.append(", active=").append(active).append(", served=").append(served)
                .append(", refused=").append(refused);
        if (mode == ServerMode.TRACKER) {
            b.append(", tracker connected=").append(trackerConnected).append(" registrations=")
                    .append(trackerRegistrations).append(" offers=").append(trackerOffers.size());
            if (trackerLastError != null) {
                b.append(" lastError=").append(trackerLastError);
            }
        }
        if (mode == ServerMode.PROXY) {
            b.append(", proxy waiting=").append(proxyWaiting).append(" sessions=")
                    .append(proxySessions);
            if (proxyLastError != null) {
                b.append(" lastError=").append(proxyLastError);
            }
        }
        if (stopped) {
            b.append(", stopped");
        }
        return b.append('}').toString();
    }
}

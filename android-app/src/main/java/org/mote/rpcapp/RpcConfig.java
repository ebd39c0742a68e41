package org.mote.rpcapp;

import android.content.Intent;
import android.content.SharedPreferences;
import java.util.Locale;

/**
 * What the user asked for: where to serve and under which key. Immutable; travels from the
 * Activity to the Service as Intent extras and is remembered in the app's preferences.
 *
 * <p>{@code host:port} means, by mode: STANDALONE the local address the server listens on
 * ({@code 0.0.0.0} = every interface); TRACKER the TVM tracker the server registers with (the
 * server itself listens on {@code 0.0.0.0} at {@link #LISTEN_PORT_IN_TRACKER_MODE}); PROXY the
 * TVM proxy the server connects out to (nothing listens).
 */
final class RpcConfig {
    /** How the server is reached; see the class comment. */
    enum Mode {
        STANDALONE,
        TRACKER,
        PROXY
    }

    /** Port the server listens on in tracker mode (the tracker hands it to clients). */
    static final int LISTEN_PORT_IN_TRACKER_MODE = 9090;

    private static final String EXTRA_HOST = "org.mote.rpcapp.HOST";
    private static final String EXTRA_PORT = "org.mote.rpcapp.PORT";
    private static final String EXTRA_KEY = "org.mote.rpcapp.KEY";
    private static final String EXTRA_MODE = "org.mote.rpcapp.MODE";

    final String host;
    final int port;
    final String key;
    final Mode mode;

    RpcConfig(String host, int port, String key, Mode mode) {
        this.host = host;
        this.port = port;
        this.key = key;
        this.mode = mode;
    }

    static RpcConfig defaults() {
        return new RpcConfig("0.0.0.0", 9090, "android", Mode.STANDALONE);
    }

    /** Parses the Activity's fields; the message says which field is wrong. */
    static RpcConfig parse(String host, String port, String key, Mode mode) {
        String h = host.trim();
        if (h.isEmpty()) {
            throw new IllegalArgumentException("host is empty");
        }
        int p;
        try {
            p = Integer.parseInt(port.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("port '" + port + "' is not a number");
        }
        if (p < 0 || p > 65535 || (p == 0 && mode != Mode.STANDALONE)) {
            throw new IllegalArgumentException("port " + p + " is out of range");
        }
        return new RpcConfig(h, p, key.trim(), mode);
    }

    void toIntent(Intent i) {
        i.putExtra(EXTRA_HOST, host).putExtra(EXTRA_PORT, port).putExtra(EXTRA_KEY, key)
                .putExtra(EXTRA_MODE, mode.name());
    }

    /** The config in {@code i}, or null when {@code i} carries none (a restart by the system). */
    static RpcConfig fromIntent(Intent i) {
        if (i == null || !i.hasExtra(EXTRA_HOST) || !i.hasExtra(EXTRA_MODE)) {
            return null;
        }
        try {
            return new RpcConfig(i.getStringExtra(EXTRA_HOST), i.getIntExtra(EXTRA_PORT, 9090),
                    String.valueOf(i.getStringExtra(EXTRA_KEY)),
                    Mode.valueOf(i.getStringExtra(EXTRA_MODE)));
        } catch (IllegalArgumentException | NullPointerException e) {
            return null;
        }
    }

    void save(SharedPreferences.Editor e) {
        e.putString("host", host).putInt("port", port).putString("key", key)
                .putString("mode", mode.name()).apply();
    }

    static RpcConfig load(SharedPreferences p) {
        RpcConfig d = defaults();
        Mode m;
        try {
            m = Mode.valueOf(p.getString("mode", d.mode.name()));
        } catch (IllegalArgumentException e) {
            m = d.mode;
        }
        return new RpcConfig(p.getString("host", d.host), p.getInt("port", d.port),
                p.getString("key", d.key), m);
    }

    /** "host:port" as the tracker and proxy builders want it (IPv6 literals bracketed). */
    String address() {
        return (host.indexOf(':') >= 0 && !host.startsWith("[") ? "[" + host + "]" : host)
                + ":" + port;
    }

    @Override
    public String toString() {
        return String.format(Locale.ROOT, "%s %s key=%s", mode.name().toLowerCase(Locale.ROOT),
                address(), key);
    }
}

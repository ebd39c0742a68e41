package org.mote;

import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Mote's native log records go to the {@code java.util.logging} logger {@code "org.mote"}
 * (Rust's error, warn, info, debug and trace become SEVERE, WARNING, INFO, FINE and FINER).
 * Native code skips records below the level that logger had when Mote loaded; after changing
 * it, call {@link #sync()}. Records may arrive on any thread (handlers must be thread-safe,
 * as {@code java.util.logging}'s own are).
 */
public final class Logging {
    private Logging() {}

    /** The logger that receives Mote's records. */
    public static final Logger LOGGER = Logger.getLogger("org.mote");

    /** Tells native code the logger's current level, so it stops or starts sending records. */
    public static void sync() {
        NativeBridge.setLogLevel(currentLevel());
    }

    static int currentLevel() {
        Logger l = LOGGER;
        Level level = null;
        while (l != null && (level = l.getLevel()) == null) {
            l = l.getParent();
        }
        int v = level == null ? Level.INFO.intValue() : level.intValue();
        if (v == Level.OFF.intValue()) {
            return 0;
        }
        if (v > Level.WARNING.intValue()) {
            return 1;
        }
        if (v > Level.INFO.intValue()) {
            return 2;
        }
        if (v > Level.FINE.intValue()) {
            return 3;
        }
        if (v > Level.FINER.intValue()) {
            return 4;
        }
        return 5;
    }

    /** Called by native code, on whatever thread logged. */
    static void emit(int level, String target, String message) {
        Level l;
        switch (level) {
            case 1: l = Level.SEVERE; break;
            case 2: l = Level.WARNING; break;
            case 3: l = Level.INFO; break;
            case 4: l = Level.FINE; break;
            default: l = Level.FINER; break;
        }
        LOGGER.logp(l, target, null, message);
    }
}

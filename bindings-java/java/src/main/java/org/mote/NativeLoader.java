package org.mote;

/** Loads libmote_java once, before the first native call. */
final class NativeLoader {
    private NativeLoader() {}

    private static boolean loaded;

    /**
     * Loads the library named by the system property {@code mote.library} (an absolute path),
     * else {@code mote_java} from {@code java.library.path}, and initialises it.
     */
    static synchronized void load() {
        if (loaded) {
            return;
        }
        String path = System.getProperty("mote.library", "");
        if (!path.isEmpty()) {
            System.load(path);
        } else {
            System.loadLibrary("mote_java");
        }
        loaded = true;
        NativeBridge.init(Logging.currentLevel());
    }
}

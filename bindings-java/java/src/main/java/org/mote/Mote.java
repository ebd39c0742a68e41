package org.mote;

import java.util.List;

/** Library-wide facts and settings. Every method may be called from any thread. */
public final class Mote {
    private Mote() {}

    /**
     * Loads and initialises the native library now, instead of at the first native call (so
     * that a missing or broken library fails here). Calling it again does nothing.
     *
     * @throws UnsatisfiedLinkError when {@code libmote_java} cannot be loaded
     */
    public static void load() {
        NativeLoader.load();
    }

    /**
     * The native runtime's version.
     *
     * @return e.g. {@code "0.1.0"}
     */
    public static String version() {
        return NativeBridge.version();
    }

    /**
     * The backends offloaded subgraphs can run on here, built-in and loaded plug-ins.
     *
     * @return their names
     */
    public static List<String> backendNames() {
        return Model.lines(NativeBridge.backendNames());
    }

    /**
     * Whether OpenCL is usable in this process, as one line for a status text:
     * {@code "OpenCL: 0: <device name> (<OpenCL version>), 1: ..."} (the indices
     * {@link SessionOptions#openclDevice} takes), or {@code "OpenCL: none (<reason>)"} when
     * there is no {@code libOpenCL}, no platform or no device. Mote opens {@code libOpenCL} at
     * run time, so an app needs none to load Mote; OpenCL lists its devices once per process
     * (the first call may take a moment while drivers load).
     *
     * @return the line
     */
    public static String openclStatus() {
        return NativeBridge.openclStatus();
    }

    /**
     * Loads a backend plug-in (a shared library) for the whole process.
     *
     * @param path the plug-in's path
     * @throws BackendException when it fails to load
     */
    public static void loadPlugin(String path) {
        NativeBridge.loadPlugin(path);
    }
}

package org.mote.tvm4j;

/** Global functions by name (as {@link API}). */
public final class APIInternal {
    private APIInternal() {}

    /**
     * The global function {@code name}.
     *
     * @param name the global name
     * @return the function, or null when none has that name
     */
    public static Function get(final String name) {
        return API.get(name);
    }
}

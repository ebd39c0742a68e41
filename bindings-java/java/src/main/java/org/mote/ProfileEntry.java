package org.mote;

/**
 * Accumulated time of one kernel, builtin or registered function in a {@link Session}.
 *
 * <p><b>Threads.</b> Immutable.
 */
public final class ProfileEntry {
    private final String name;
    private final String kind;
    private final long calls;
    private final long totalNanos;

    ProfileEntry(String name, String kind, long calls, long totalNanos) {
        this.name = name;
        this.kind = kind;
        this.calls = calls;
        this.totalNanos = totalNanos;
    }

    /**
     * The callee's name.
     *
     * @return the name
     */
    public String name() {
        return name;
    }

    /**
     * What the callee is ({@code "Kernel"}, {@code "Builtin"}, {@code "Registered"}...).
     *
     * @return the kind
     */
    public String kind() {
        return kind;
    }

    /**
     * How many times it was called.
     *
     * @return the call count
     */
    public long calls() {
        return calls;
    }

    /**
     * Total time spent in it.
     *
     * @return nanoseconds
     */
    public long totalNanos() {
        return totalNanos;
    }

    @Override
    public String toString() {
        return name + " (" + kind + "): " + calls + " calls, " + totalNanos + " ns";
    }
}
